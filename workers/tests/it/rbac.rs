//! The RBAC rules shipped for the activity workers (deploy/kubernetes/base/rbac.yaml)
//! against what a hosted cluster's life asked of the API server (the emulator's request
//! log): each request allowed by a rule, and each rule used by a request.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_yaml_ng::Value;

use crate::cluster_support::KubeRequest;

const RBAC: &str = include_str!("../../../deploy/kubernetes/base/rbac.yaml");

/// What one request asked, or one rule grants: a verb on a group's resource (with its
/// subresource), cluster-wide (`scope` "cluster") or in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub scope: String,
}

/// A rule's accesses, and the names it is limited to (none: any).
#[derive(Debug)]
pub(crate) struct Grant {
    pub access: Access,
    pub names: Option<BTreeSet<String>>,
}

#[derive(Deserialize)]
struct Rule {
    #[serde(rename = "apiGroups")]
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    #[serde(rename = "resourceNames", default)]
    names: Option<Vec<String>>,
}

/// Every grant of the shipped ClusterRoles (scope "cluster") and Roles (their namespace).
pub(crate) fn shipped_grants() -> Vec<Grant> {
    let mut grants = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(RBAC) {
        let object = Value::deserialize(document).expect("rbac.yaml is YAML");
        let scope = match object["kind"].as_str() {
            Some("ClusterRole") => "cluster".to_owned(),
            Some("Role") => object["metadata"]["namespace"].as_str().unwrap().to_owned(),
            _ => continue,
        };
        let rules: Vec<Rule> = serde_yaml_ng::from_value(object["rules"].clone()).unwrap();
        for rule in rules {
            for group in &rule.groups {
                for resource in &rule.resources {
                    for verb in &rule.verbs {
                        grants.push(Grant {
                            access: Access {
                                verb: verb.clone(),
                                group: group.clone(),
                                resource: resource.clone(),
                                scope: scope.clone(),
                            },
                            names: rule.names.clone().map(|names| names.into_iter().collect()),
                        });
                    }
                }
            }
        }
    }
    grants
}

/// `requests` diffed against the shipped grants, with `clusters_namespace` standing for
/// the shipped `clusters`: the requests no grant allows, and the grants no request used.
pub(crate) fn diff(
    requests: &[KubeRequest],
    clusters_namespace: &str,
) -> (Vec<String>, Vec<String>) {
    let grants = shipped_grants();
    assert!(!grants.is_empty(), "rbac.yaml grants nothing");
    let mut used = BTreeSet::new();
    let mut refused = BTreeSet::new();
    for request in requests {
        let scope = match request.namespace.as_deref() {
            None => "cluster".to_owned(),
            Some(ns) if ns == clusters_namespace => "clusters".to_owned(),
            Some(ns) => ns.to_owned(),
        };
        let access = Access {
            verb: request.verb.clone(),
            group: request.group.clone(),
            resource: request.resource.clone(),
            scope,
        };
        let name = &request.name;
        let allowing = grants.iter().position(|grant| {
            grant.access == access
                && grant
                    .names
                    .as_ref()
                    .is_none_or(|names| name.as_ref().is_some_and(|n| names.contains(n)))
        });
        match allowing {
            Some(index) => {
                used.insert(index);
            }
            None => {
                refused.insert(format!("{access:?} name {name:?}"));
            }
        }
    }
    let unused = grants
        .iter()
        .enumerate()
        .filter(|(index, _)| !used.contains(index))
        .map(|(_, grant)| format!("{:?}", grant.access))
        .collect();
    (refused.into_iter().collect(), unused)
}

#[test]
fn the_shipped_rules_are_read_whole() {
    let grants = shipped_grants();
    let has = |verb: &str, resource: &str, scope: &str| {
        grants.iter().any(|g| {
            g.access.verb == verb && g.access.resource == resource && g.access.scope == scope
        })
    };
    assert!(has("get", "namespaces", "cluster"));
    assert!(has("patch", "nodepools/scale", "clusters"));
    assert!(has("get", "deployments", "hypershift"));
    assert!(!has("delete", "namespaces", "cluster"));
    let request = |verb: &str, resource: &str, ns: Option<&str>, name: Option<&str>| {
        let group = if resource == "deployments" {
            "apps"
        } else {
            ""
        };
        KubeRequest {
            verb: verb.to_owned(),
            group: group.to_owned(),
            resource: resource.to_owned(),
            namespace: ns.map(str::to_owned),
            name: name.map(str::to_owned),
        }
    };
    // A name outside a rule's resourceNames is refused; a verb no rule has, too.
    let (refused, _) = diff(
        &[
            request("get", "deployments", Some("hypershift"), Some("other")),
            request("delete", "namespaces", None, Some("x")),
            request("get", "secrets", Some("ns-test"), Some("s")),
        ],
        "ns-test",
    );
    assert_eq!(refused.len(), 2, "{refused:?}");
}

/// Every Role and ClusterRole of rbac.yaml is bound, to the activity workers' service
/// account alone, by a binding that names a role of the file (a Role of its own
/// namespace).
#[test]
fn the_rules_are_bound_to_the_activity_workers_alone() {
    let objects: Vec<Value> = serde_yaml_ng::Deserializer::from_str(RBAC)
        .map(|document| Value::deserialize(document).unwrap())
        .collect();
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    // (kind, namespace or "", name) of each role, and of each binding's roleRef.
    let roles: BTreeSet<(String, String, String)> = objects
        .iter()
        .filter(|o| matches!(o["kind"].as_str(), Some("Role" | "ClusterRole")))
        .map(|o| {
            let metadata = &o["metadata"];
            (
                text(&o["kind"]),
                text(&metadata["namespace"]),
                text(&metadata["name"]),
            )
        })
        .collect();
    let mut bound = BTreeSet::new();
    for binding in objects.iter().filter(|o| {
        matches!(
            o["kind"].as_str(),
            Some("RoleBinding" | "ClusterRoleBinding")
        )
    }) {
        let role_ref = &binding["roleRef"];
        let namespace = text(&binding["metadata"]["namespace"]);
        let role = (
            text(&role_ref["kind"]),
            namespace.clone(),
            text(&role_ref["name"]),
        );
        let role = match role.0.as_str() {
            "ClusterRole" => (role.0, String::new(), role.2),
            _ => role,
        };
        assert!(
            roles.contains(&role),
            "{binding:?} names no role of the file"
        );
        let subjects: Vec<(String, String, String)> = binding["subjects"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|s| (text(&s["kind"]), text(&s["namespace"]), text(&s["name"])))
            .collect();
        let activity = (
            "ServiceAccount".into(),
            "hcpflow".into(),
            "hcpflow-activity".into(),
        );
        assert_eq!(subjects, [activity], "{binding:?}");
        bound.insert(role);
    }
    assert_eq!(bound, roles, "a role nothing binds");
}
