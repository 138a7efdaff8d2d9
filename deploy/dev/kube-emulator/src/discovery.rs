//! Discovery documents (`/version`, `/api`, `/apis`, ...), as kube-rs and kubectl read
//! them to find resources, their kinds, verbs and subresources.

use serde_json::{json, Value};

use crate::resources::{ResourceType, ALL};

pub fn version() -> Value {
    json!({
        "major": "1", "minor": "30", "gitVersion": "v1.30.0-hcpflow-emulator",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.22", "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

/// The named API groups served, each with its one version, in the order of [`ALL`].
fn served_groups() -> Vec<(&'static str, &'static str)> {
    let mut groups: Vec<(&str, &str)> = Vec::new();
    for rt in ALL.iter().filter(|rt| !rt.group.is_empty()) {
        if !groups.contains(&(rt.group, rt.version)) {
            groups.push((rt.group, rt.version));
        }
    }
    groups
}

fn group_entry(group: &str, version: &str) -> Value {
    let version = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [version.clone()], "preferredVersion": version})
}

pub fn groups() -> Value {
    let groups: Vec<Value> = served_groups()
        .into_iter()
        .map(|(group, version)| group_entry(group, version))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(name: &str) -> Option<Value> {
    served_groups()
        .into_iter()
        .find(|(group, _)| *group == name)
        .map(|(group, version)| {
            let mut entry = group_entry(group, version);
            entry["kind"] = json!("APIGroup");
            entry["apiVersion"] = json!("v1");
            entry
        })
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "get",
    "list",
    "patch",
    "update",
    "watch",
    "deletecollection",
];

/// The APIResourceList of a group version, with `…/status` and `…/scale`.
pub fn resources(group: &str, version: &str) -> Option<Value> {
    let served: Vec<&ResourceType> = ALL
        .iter()
        .copied()
        .filter(|rt| rt.group == group && rt.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut list = Vec::new();
    for rt in served {
        let mut verbs = VERBS.to_vec();
        verbs.retain(|v| *v != "deletecollection");
        list.push(json!({
            "name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
            "kind": rt.kind, "verbs": verbs, "shortNames": rt.short_names,
        }));
        if rt.status {
            list.push(json!({"name": format!("{}/status", rt.plural), "singularName": "",
                             "namespaced": rt.namespaced, "kind": rt.kind, "verbs": ["get", "patch", "update"]}));
        }
        if rt.scale {
            list.push(
                json!({"name": format!("{}/scale", rt.plural), "singularName": "",
                             "namespaced": rt.namespaced, "group": "autoscaling", "version": "v1",
                             "kind": "Scale", "verbs": ["get", "patch", "update"]}),
            );
        }
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list}),
    )
}

/// `/openapi/v3`: one document per group version. kubectl reads them to learn that the
/// server validates fields itself (the `fieldValidation` parameter on PATCH); it then
/// skips client-side validation, for which the emulator has no schemas.
pub fn openapi_root() -> Value {
    let mut paths = serde_json::Map::new();
    let named = served_groups()
        .into_iter()
        .map(|(group, version)| format!("apis/{group}/{version}"));
    for gv in std::iter::once("api/v1".to_owned()).chain(named) {
        paths.insert(
            gv.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash=emulator")}),
        );
    }
    json!({"paths": paths})
}

/// The OpenAPI v3 document of a group version: its item paths, each PATCH with the
/// resource's group-version-kind and the `fieldValidation` parameter.
pub fn openapi_group_version(gv: &str) -> Option<Value> {
    let (group, version) = match gv.split('/').collect::<Vec<_>>().as_slice() {
        ["api", version] => ("", *version),
        ["apis", group, version] => (*group, *version),
        _ => return None,
    };
    let served: Vec<&ResourceType> = ALL
        .iter()
        .copied()
        .filter(|rt| rt.group == group && rt.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = serde_json::Map::new();
    for rt in served {
        let path = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", rt.plural)
        } else {
            format!("{prefix}/{}/{{name}}", rt.plural)
        };
        let operation = json!({
            "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
            "parameters": [
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            ],
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(path, json!({"patch": operation}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (hcpflow emulator)", "version": "v1.30.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
