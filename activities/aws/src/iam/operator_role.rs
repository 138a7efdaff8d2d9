//! One operator role of the cluster (hypershift-aws.md §2.2): `<infra-id>-<suffix>`,
//! web-identity trust on the cluster's OIDC provider, and an inline policy of the same
//! name scoped to this cluster's zones.

use hcpflow_engine::ActivityFailure;

use crate::clients::AwsClients;
use crate::iam::role::{ensure_role, Role};
use crate::iam::Owner;
use crate::policies::ZoneIds;
use crate::roles::{OperatorRole, OPERATOR_ROLES};
use crate::scope::Scope;

pub use hcpflow_hypershift::aws::iam::CreateOperatorRole;

/// The operator role with this suffix.
pub fn operator_role(suffix: &str) -> Result<&'static OperatorRole, ActivityFailure> {
    OPERATOR_ROLES
        .iter()
        .find(|role| role.suffix == suffix)
        .ok_or_else(|| {
            ActivityFailure::permanent(
                "UnknownRole",
                format!("{suffix:?} is not one of the seven operator roles"),
            )
        })
}

/// Creates (or finds and corrects) the role and writes its inline policy.
pub async fn create_operator_role(
    aws: &AwsClients,
    scope: &Scope<'_>,
    request: &CreateOperatorRole,
) -> Result<Role, ActivityFailure> {
    let role = operator_role(&request.role)?;
    let zones = ZoneIds {
        public: request.public_zone_id.clone(),
        private: request.private_zone_id.clone(),
        local: request.local_zone_id.clone(),
    };
    let policy = role
        .policy
        .render(&zones)
        .map_err(|e| ActivityFailure::permanent("InvalidPolicy", e.to_string()))?;
    let name = role.name(&request.infra_id);
    let trust = role.trust_policy(&request.provider_arn, &request.issuer);
    let owner = Owner {
        infra_id: &request.infra_id,
        resource_tags: &request.resource_tags,
    };
    ensure_role(aws, scope, owner, &name, &trust, &name, &policy).await
}
