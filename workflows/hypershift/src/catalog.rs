//! The HyperShift workflow types, registered with what intake needs to know of each:
//! the validation of its input, the secret fields sealed at intake, and the cluster
//! name as the concurrency key (create, scale and destroy of one cluster never run at
//! once; different clusters run in parallel).

use hcpflow_engine::{Catalog, DuplicateWorkflowType, TypeInfo};

use crate::input::{validate_create, validate_destroy, validate_scale};
use crate::{create, destroy, scale};

pub fn register_workflows(catalog: &mut Catalog) -> Result<(), DuplicateWorkflowType> {
    catalog.register(
        create::TYPE,
        create::create_hosted_cluster,
        TypeInfo {
            validate: validate_create,
            secret_pointers: vec![crate::kube::secrets::PULL_SECRET_POINTER.to_owned()],
            concurrency_key_pointer: Some("/name".to_owned()),
            claims_cluster_name: true,
            acts_on_cluster_name: false,
            destructive: false,
        },
    )?;
    catalog.register(
        scale::TYPE,
        scale::scale_node_pool,
        TypeInfo {
            validate: validate_scale,
            secret_pointers: Vec::new(),
            concurrency_key_pointer: Some("/cluster".to_owned()),
            claims_cluster_name: false,
            acts_on_cluster_name: true,
            destructive: false,
        },
    )?;
    catalog.register(
        destroy::TYPE,
        destroy::destroy_hosted_cluster,
        TypeInfo {
            validate: validate_destroy,
            secret_pointers: Vec::new(),
            concurrency_key_pointer: Some("/cluster".to_owned()),
            claims_cluster_name: false,
            acts_on_cluster_name: true,
            destructive: true,
        },
    )?;
    Ok(())
}
