use serde_json::{json, Value};

use super::*;

const NOT_CHECKED: &str = "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

const ROLES: [&str; 7] = [
    "ingressARN",
    "imageRegistryARN",
    "storageARN",
    "networkARN",
    "kubeCloudControllerARN",
    "nodePoolManagementARN",
    "controlPlaneOperatorARN",
];

/// A HostedCluster as activities/kube/src/manifest.rs builds one.
fn hosted_cluster() -> Value {
    let roles: serde_json::Map<String, Value> = ROLES
        .iter()
        .map(|r| {
            (
                r.to_string(),
                json!(format!("arn:aws:iam::123456789012:role/{r}")),
            )
        })
        .collect();
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "HostedCluster",
        "metadata": {
            "name": "demo",
            "namespace": "clusters",
            "labels": {"hypershift.openshift.io/infra-id": "demo-x7k2p"},
            "annotations": {},
        },
        "spec": {
            "infraID": "demo-x7k2p",
            "issuerURL": "https://b.s3.us-east-1.amazonaws.com/demo-x7k2p",
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64"},
            "pullSecret": {"name": "demo-pull-secret"},
            "sshKey": {"name": "demo-ssh-key"},
            "secretEncryption": {
                "type": "aescbc",
                "aescbc": {"activeKey": {"name": "demo-etcd-encryption-key"}},
            },
            "serviceAccountSigningKey": {"name": "demo-sa-token-issuer-key"},
            "networking": {
                "networkType": "OVNKubernetes",
                "machineNetwork": [{"cidr": "10.0.0.0/16"}],
                "clusterNetwork": [{"cidr": "10.132.0.0/14"}],
                "serviceNetwork": [{"cidr": "172.31.0.0/16"}],
            },
            "dns": {"baseDomain": "example.com", "publicZoneID": "Z1", "privateZoneID": "Z2"},
            "platform": {
                "type": "AWS",
                "aws": {
                    "region": "us-east-1",
                    "endpointAccess": "PublicAndPrivate",
                    "rolesRef": roles,
                    "cloudProviderConfig": {
                        "vpc": "vpc-1",
                        "subnet": {"id": "subnet-1"},
                        "zone": "us-east-1a",
                    },
                    "resourceTags": [{"key": "kubernetes.io/cluster/demo-x7k2p", "value": "owned"}],
                },
            },
            "services": [
                {"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}},
                {"service": "OAuthServer", "servicePublishingStrategy": {"type": "Route"}},
                {"service": "Konnectivity", "servicePublishingStrategy": {"type": "Route"}},
                {"service": "Ignition", "servicePublishingStrategy": {"type": "Route"}},
            ],
            "etcd": {
                "managementType": "Managed",
                "managed": {"storage": {
                    "type": "PersistentVolume",
                    "persistentVolume": {"size": "8Gi"},
                }},
            },
            "controllerAvailabilityPolicy": "SingleReplica",
            "infrastructureAvailabilityPolicy": "SingleReplica",
        },
    })
}

/// A NodePool as activities/kube/src/manifest.rs builds one.
fn node_pool() -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "demo-workers", "namespace": "clusters"},
        "spec": {
            "clusterName": "demo",
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64"},
            "replicas": 2,
            "arch": "amd64",
            "management": {"upgradeType": "Replace", "autoRepair": false},
            "platform": {
                "type": "AWS",
                "aws": {
                    "instanceType": "m6i.xlarge",
                    "instanceProfile": "demo-x7k2p-worker",
                    "subnet": {"id": "subnet-1"},
                    "rootVolume": {"size": 120, "type": "gp3"},
                },
            },
        },
    })
}

/// Checks a copy of `object` after `edit`, returning the result and the copy.
fn checked(kind: &str, object: &Value, edit: impl FnOnce(&mut Value)) -> (Checked, Value) {
    let mut object = object.clone();
    edit(&mut object);
    let result = check(kind, &mut object);
    (result, object)
}

fn invalid(kind: &str, object: &Value, edit: impl FnOnce(&mut Value)) -> Vec<String> {
    checked(kind, object, edit).0.invalid
}

#[test]
fn well_formed_aws_objects_pass_unchanged() {
    for (kind, object) in [
        ("HostedCluster", hosted_cluster()),
        ("NodePool", node_pool()),
    ] {
        let (result, after) = checked(kind, &object, |_| {});
        assert_eq!(result, Checked::default(), "{kind}");
        assert_eq!(after, object, "{kind}");
    }
}

#[test]
fn an_unknown_field_is_pruned_and_reported() {
    let (result, after) = checked("HostedCluster", &hosted_cluster(), |hc| {
        hc["spec"]["platform"]["aws"]["foo"] = json!("bar");
        hc["spec"]["services"][1]["servicePublishingStrategy"]["route"] = json!({"port": 1});
        hc["extra"] = json!(true);
    });
    assert_eq!(
        result.unknown,
        [
            "extra",
            "spec.platform.aws.foo",
            "spec.services[1].servicePublishingStrategy.route.port",
        ]
    );
    assert!(result.invalid.is_empty(), "{:?}", result.invalid);
    let mut expected = hosted_cluster();
    expected["spec"]["services"][1]["servicePublishingStrategy"]["route"] = json!({});
    assert_eq!(after, expected);
}

#[test]
fn null_fields_without_a_default_are_dropped_silently() {
    let (result, after) = checked("NodePool", &node_pool(), |np| {
        np["spec"]["pausedUntil"] = Value::Null;
        np["spec"]["nodeLabels"] = json!({"a": null, "b": "c"});
    });
    assert_eq!(result, Checked::default());
    assert!(after["spec"].get("pausedUntil").is_none());
    assert_eq!(after["spec"]["nodeLabels"], json!({"b": "c"}));
}

#[test]
fn a_bad_enum_is_an_unsupported_value_and_stops_the_rules() {
    let errors = invalid("HostedCluster", &hosted_cluster(), |hc| {
        hc["spec"]["platform"]["aws"]["endpointAccess"] = json!("Foo");
        hc["spec"]["services"][0]["servicePublishingStrategy"]["route"] = json!({});
    });
    assert_eq!(
        errors,
        [
            r#"spec.platform.aws.endpointAccess: Unsupported value: "Foo": supported values: "Public", "PublicAndPrivate", "Private""#,
            NOT_CHECKED,
        ]
    );
}

#[test]
fn a_missing_required_field_is_reported() {
    let errors = invalid("HostedCluster", &hosted_cluster(), |hc| {
        hc["spec"]["release"] = json!({});
        hc["spec"]["platform"]["aws"]["rolesRef"]
            .as_object_mut()
            .unwrap()
            .remove("storageARN");
    });
    assert_eq!(
        errors,
        [
            "spec.platform.aws.rolesRef.storageARN: Required value",
            "spec.release.image: Required value",
            NOT_CHECKED,
        ]
    );
    let errors = invalid("NodePool", &node_pool(), |np| {
        np["spec"].as_object_mut().unwrap().remove("management");
    });
    assert_eq!(errors, ["spec.management: Required value", NOT_CHECKED]);
}

#[test]
fn a_wrong_type_is_reported_as_the_api_server_words_it() {
    let errors = invalid("NodePool", &node_pool(), |np| {
        np["spec"]["replicas"] = json!("3");
        np["spec"]["platform"]["aws"]["rootVolume"]["size"] = json!(true);
        np["spec"]["management"]["autoRepair"] = json!("yes");
    });
    assert_eq!(
        errors,
        [
            r#"spec.management.autoRepair: Invalid value: "string": spec.management.autoRepair in body must be of type boolean: "string""#,
            r#"spec.platform.aws.rootVolume.size: Invalid value: "": spec.platform.aws.rootVolume.size in body must be of type int64: """#,
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            NOT_CHECKED,
        ]
    );
}

#[test]
fn replicas_and_auto_scaling_together_break_a_rule() {
    let errors = invalid("NodePool", &node_pool(), |np| {
        np["spec"]["autoScaling"] = json!({"min": 3, "max": 1});
    });
    assert_eq!(
        errors,
        [
            r#"spec: Invalid value: "object": Both replicas or autoScaling should not be set"#,
            r#"spec.autoScaling: Invalid value: "object": max must be equal or greater than min"#,
        ]
    );
}

#[test]
fn bounds_lengths_and_patterns_are_checked() {
    let errors = invalid("NodePool", &node_pool(), |np| {
        np["spec"]["platform"]["aws"]["rootVolume"]["size"] = json!(4);
        np["spec"]["release"]["image"] = json!("");
        np["spec"]["platform"]["aws"]["instanceType"] = json!("x".repeat(256));
    });
    assert_eq!(
        errors,
        [
            "spec.platform.aws.instanceType: Too long: may not be more than 255 bytes",
            "spec.platform.aws.rootVolume.size: Invalid value: 4: spec.platform.aws.rootVolume.size in body should be greater than or equal to 8",
            r#"spec.release.image: Invalid value: "": spec.release.image in body should be at least 1 chars long"#,
            NOT_CHECKED,
        ]
    );
    let errors = invalid("HostedCluster", &hosted_cluster(), |hc| {
        hc["spec"]["platform"]["aws"]["serviceEndpoints"] =
            json!([{"name": "ec2", "url": "http://x"}]);
        hc["spec"]["labels"] =
            Value::Object((0..21).map(|i| (format!("l{i}"), json!("v"))).collect());
    });
    assert_eq!(
        errors,
        [
            "spec.labels: Too many: 21: must have at most 20 items",
            r#"spec.platform.aws.serviceEndpoints[0].url: Invalid value: "http://x": spec.platform.aws.serviceEndpoints[0].url in body should match '^https://'"#,
            NOT_CHECKED,
        ]
    );
}

#[test]
fn resource_tags_are_limited_in_number_and_content() {
    let errors = invalid("HostedCluster", &hosted_cluster(), |hc| {
        hc["spec"]["platform"]["aws"]["resourceTags"] = json!([{"key": "a b", "value": "ok"}]);
    });
    assert_eq!(
        errors,
        [
            r#"spec.platform.aws.resourceTags[0].key: Invalid value: "string": key must only contain letters, digits, and the characters _ . : / = + - @"#
        ]
    );
    let errors = invalid("HostedCluster", &hosted_cluster(), |hc| {
        let tags: Vec<Value> = (0..26)
            .map(|i| json!({"key": format!("k{i}"), "value": "v"}))
            .collect();
        hc["spec"]["platform"]["aws"]["resourceTags"] = json!(tags);
    });
    assert_eq!(
        errors,
        [
            "spec.platform.aws.resourceTags: Too many: 26: must have at most 25 items",
            NOT_CHECKED
        ]
    );
}

#[test]
fn the_hosted_cluster_rules_apply() {
    let errors = invalid("HostedCluster", &hosted_cluster(), |hc| {
        hc["spec"]["services"].as_array_mut().unwrap().pop();
        hc["spec"]["services"][1]["servicePublishingStrategy"] =
            json!({"type": "Route", "loadBalancer": {"hostname": "api.example.com"}});
        hc["spec"]["infraID"] = json!("Demo");
    });
    assert_eq!(
        errors,
        [
            r#"spec: Invalid value: "object": spec.services in body should have at least 4 items or 3 for IBMCloud"#,
            r#"spec.infraID: Invalid value: "string": infraID must consist of lowercase alphanumeric characters or '-', start and end with an alphanumeric character, and be between 1 and 253 characters"#,
            r#"spec.services[1].servicePublishingStrategy: Invalid value: "object": only route is allowed when type is Route, and forbidden otherwise"#,
            r#"spec.services[1].servicePublishingStrategy: Invalid value: "object": only loadBalancer is required when type is LoadBalancer, and forbidden otherwise"#,
        ]
    );
    let errors = invalid("HostedCluster", &hosted_cluster(), |hc| {
        hc["spec"]["networking"]["serviceNetwork"] = json!([{"cidr": "10.0.0.0/16"}]);
        hc["spec"]["etcd"] = json!({"managementType": "Unmanaged"});
    });
    assert_eq!(
        errors,
        [
            r#"spec.etcd: Invalid value: "object": Only unmanaged configuration must be set when managementType is Unmanaged"#,
            r#"spec.networking: Invalid value: "object": CIDR ranges in machineNetwork, clusterNetwork, and serviceNetwork must be unique and non-overlapping"#,
        ]
    );
}

#[test]
fn rules_see_the_defaults() {
    // Without etcd and networking, the defaults make the object valid.
    let (result, after) = checked("HostedCluster", &hosted_cluster(), |hc| {
        let spec = hc["spec"].as_object_mut().unwrap();
        spec.remove("etcd");
        spec.remove("networking");
    });
    assert_eq!(result, Checked::default());
    assert!(after["spec"].get("etcd").is_none(), "check adds no default");
    let mut defaulted = after;
    apply_defaults("HostedCluster", &mut defaulted);
    assert_eq!(defaulted["spec"]["etcd"]["managementType"], "Managed");
    assert_eq!(
        defaulted["spec"]["networking"]["networkType"],
        "OVNKubernetes"
    );
    assert_eq!(defaulted["spec"]["platform"]["aws"]["multiArch"], false);
    assert_eq!(defaulted["spec"]["olmCatalogPlacement"], "management");

    let mut pool = node_pool();
    apply_defaults("NodePool", &mut pool);
    assert_eq!(
        pool["spec"]["management"]["replace"],
        json!({"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}, "strategy": "RollingUpdate"})
    );
    // arm64 needs a platform that supports it; s390x needs KubeVirt.
    let errors = invalid("NodePool", &node_pool(), |np| {
        np["spec"]["arch"] = json!("s390x");
    });
    assert_eq!(
        errors,
        [r#"spec: Invalid value: "object": s390x is only supported on KubeVirt platform"#]
    );
}

#[test]
fn a_rule_that_fails_to_evaluate_reports_the_cel_error() {
    let errors = invalid("NodePool", &node_pool(), |np| {
        np["spec"]["platform"]["aws"]["subnet"] = json!({"id": "my-subnet"});
    });
    assert_eq!(
        errors,
        [
            r#"spec.platform.aws.subnet: Invalid value: "object": no such key: filters evaluating rule: subnet is invalid, a valid subnet id or filters must be set, but not both"#
        ]
    );
}

#[test]
fn an_unmodelled_field_is_never_accepted_silently() {
    let errors = invalid("HostedCluster", &hosted_cluster(), |hc| {
        hc["spec"]["platform"]["azure"] = json!({"location": "eastus"});
    });
    assert_eq!(
        errors,
        ["spec.platform.azure: the emulator does not model this field"]
    );
    let errors = invalid("NodePool", &node_pool(), |np| {
        np["spec"]["platform"]["kubevirt"] = json!({});
    });
    assert_eq!(
        errors,
        ["spec.platform.kubevirt: the emulator does not model this field"]
    );
}

#[test]
fn int_or_string_fields_take_either() {
    let errors = invalid("HostedCluster", &hosted_cluster(), |hc| {
        hc["spec"]["etcd"]["managed"]["storage"]["persistentVolume"]["size"] = json!("8GB");
    });
    assert_eq!(
        errors,
        [concat!(
            r#"spec.etcd.managed.storage.persistentVolume.size: Invalid value: "8GB": "#,
            r#"spec.etcd.managed.storage.persistentVolume.size in body should match "#,
            r#"'^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'"#
        )]
    );
    let errors = invalid("NodePool", &node_pool(), |np| {
        np["spec"]["management"]["replace"] = json!({"strategy": "RollingUpdate", "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": true}});
    });
    assert_eq!(
        errors,
        [
            r#"spec.management.replace.rollingUpdate.maxUnavailable: Invalid value: "boolean": spec.management.replace.rollingUpdate.maxUnavailable in body must be of type integer,string: "boolean""#,
            r#"<nil>: Invalid value: "": "spec.management.replace.rollingUpdate.maxUnavailable" must validate at least one schema (anyOf)"#,
            r#"spec.management.replace.rollingUpdate.maxUnavailable: Invalid value: "boolean": spec.management.replace.rollingUpdate.maxUnavailable in body must be of type integer: "boolean""#,
            NOT_CHECKED,
        ]
    );
}

#[test]
fn other_kinds_are_left_alone() {
    let mut secret = json!({"kind": "Secret", "spec": {"foo": 1}, "extra": true});
    let before = secret.clone();
    assert_eq!(check("Secret", &mut secret), Checked::default());
    assert_eq!(secret, before);
}

#[test]
fn the_field_validation_directive_is_parsed_as_the_api_server_does() {
    assert_eq!(FieldValidation::from_query(None), Ok(FieldValidation::Warn));
    assert_eq!(
        FieldValidation::from_query(Some("Strict")),
        Ok(FieldValidation::Strict)
    );
    assert_eq!(
        FieldValidation::from_query(Some("Ignore")),
        Ok(FieldValidation::Ignore)
    );
    assert!(FieldValidation::from_query(Some("strict")).is_err());
}
