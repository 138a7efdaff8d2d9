//! The OpenAPI schemas of HyperShift's HostedCluster and NodePool
//! (hypershift.openshift.io/v1beta1), applied as kube-apiserver applies a CRD's
//! structural schema: unknown fields are pruned, and the `spec` is validated — types,
//! enums, patterns, bounds, required fields and the `x-kubernetes-validations` rules
//! that need no old object.
//!
//! The schemas are our own compact description of the `Default` feature set of
//! HyperShift's generated CRDs (`cmd/install/assets/crds/hypershift-operator`). What
//! each models, shallowly models or leaves out is said at the top of
//! `schema/hosted_cluster.rs` and `schema/node_pool.rs`; a field left out is never
//! accepted silently: it is reported as `<path>: the emulator does not model this field`.
//!
//! The API server also stores the schema defaults (`arch: amd64`, `etcd`, `networking`,
//! …); [`check`] validates as if they were set but does not add them — [`apply_defaults`]
//! does.

mod common;
mod formats;
mod hosted_cluster;
mod model;
mod node_pool;

use std::sync::OnceLock;

use serde_json::Value;

use model::Node;

/// How the request asked unknown fields to be handled (the `fieldValidation` query parameter).
///
/// With `Ignore` the unknown fields are dropped silently; with `Warn` (the API server's
/// default) each one is a `Warning` header `unknown field "spec.foo"`; with `Strict` the
/// request fails with 400 BadRequest `strict decoding error: unknown field "spec.foo"`
/// (several joined by ", ").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// The directive of a `fieldValidation` query value, `Warn` when absent.
    ///
    /// Errors: the API server's message for any other value.
    pub fn from_query(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(format!(
                "fieldValidation: Unsupported value: {}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                Value::String(other.to_owned())
            )),
        }
    }
}

/// What [`check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// The paths of the fields pruned as unknown, e.g. `spec.platform.aws.foo`.
    pub unknown: Vec<String>,
    /// Field errors in Kubernetes' style, e.g. `spec.release.image: Required value`.
    pub invalid: Vec<String>,
}

fn schema(kind: &str) -> Option<&'static Node> {
    static HOSTED_CLUSTER: OnceLock<Node> = OnceLock::new();
    static NODE_POOL: OnceLock<Node> = OnceLock::new();
    match kind {
        "HostedCluster" => Some(HOSTED_CLUSTER.get_or_init(hosted_cluster::spec)),
        "NodePool" => Some(NODE_POOL.get_or_init(node_pool::spec)),
        _ => None,
    }
}

/// Checks `object["spec"]` of a HostedCluster (kind "HostedCluster") or NodePool ("NodePool"); removes unknown fields from `object` in place (as the API server's pruning does) and returns their paths (e.g. `spec.platform.aws.foo`), and every invalid field as a message in Kubernetes' field-error style, e.g. `spec.platform.aws.endpointAccess: Unsupported value: "Foo": supported values: "Public", "PublicAndPrivate", "Private"`, `spec.release.image: Required value`, `spec.replicas: Invalid value: ...`, or a CEL rule's message (`spec: Invalid value: "object": <rule message>`). Other kinds: return an empty Checked and change nothing.
///
/// Unknown top-level fields (other than `apiVersion`, `kind`, `metadata`, `spec` and
/// `status`) are pruned and reported too, and so are `null` values of fields without a
/// default, as the API server drops them (those are not reported). `status` and
/// `metadata` are not checked.
pub fn check(kind: &str, object: &mut Value) -> Checked {
    let Some(schema) = schema(kind) else {
        return Checked::default();
    };
    let outcome = model::check_resource(schema, object);
    Checked {
        unknown: outcome.unknown,
        invalid: outcome.invalid,
    }
}

/// Sets the schema defaults of absent fields of `object["spec"]`, as the API server does
/// before validating and storing a HostedCluster or NodePool. Other kinds: no change.
pub fn apply_defaults(kind: &str, object: &mut Value) {
    if let Some(schema) = schema(kind) {
        model::default_resource(schema, object);
    }
}

#[cfg(test)]
mod tests;
