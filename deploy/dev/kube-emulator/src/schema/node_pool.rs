//! The schema of a NodePool's `spec` (hypershift.openshift.io/v1beta1, the `Default`
//! feature set of HyperShift's generated CRD).
//!
//! Modelled in full except `platform.azure` and `platform.kubevirt`, which are reported
//! when present. Rules that compare with the old object (`oldSelf`: immutability, "arch
//! is required once set") are not evaluated.

use serde_json::{json, Value};

use super::common::{
    aws_filters, aws_resource_tags, local_ref, paused_until, release, string_map, PLATFORM_TYPES,
};
use super::formats;
use super::model::{
    boolean, get, has, int, int32, int64, int_or_string, items, list, object, one_of, string, text,
    unmodelled, Node,
};

pub(super) fn spec() -> Node {
    object(vec![
        (
            "arch",
            one_of(&["arm64", "amd64", "ppc64le", "s390x"]).default(json!("amd64")),
        ),
        (
            "autoScaling",
            object(vec![("max", int32().min(1)), ("min", int32().min(0))])
                .required(&["max", "min"])
                .rule("max must be equal or greater than min", |a| {
                    Ok(int(a, "max")? >= int(a, "min")?)
                }),
        ),
        (
            "clusterName",
            string().min_len(1).max_len(253).text_rule(
                "clusterName must consist of lowercase alphanumeric characters or '-', start and end with an alphanumeric character, and be between 1 and 253 characters",
                formats::lowercase_label,
            ),
        ),
        ("config", list(local_ref()).max_items(10)),
        ("management", management()),
        ("nodeDrainTimeout", string()),
        ("nodeLabels", string_map()),
        ("nodeVolumeDetachTimeout", string()),
        ("pausedUntil", paused_until(1)),
        ("platform", platform()),
        ("release", release()),
        ("replicas", int32()),
        ("taints", list(taint()).max_items(50)),
        ("tuningConfig", list(local_ref()).max_items(10)),
    ])
    .required(&["clusterName", "management", "platform", "release"])
    .rule(
        "Setting Arch to arm64 is only supported for AWS, Azure, Agent, GCP and None",
        |s| {
            let platform = get(s, "platform")?;
            Ok(text(s, "arch")? != "arm64"
                || has(platform, "aws")
                || has(platform, "azure")
                || has(platform, "agent")
                || ["GCP", "None"].contains(&text(platform, "type")?))
        },
    )
    .rule("Both replicas or autoScaling should not be set", |s| {
        Ok(!has(s, "replicas") || !has(s, "autoScaling"))
    })
    .rule("s390x is only supported on KubeVirt platform", |s| {
        Ok(text(s, "arch")? != "s390x" || has(get(s, "platform")?, "kubevirt"))
    })
    .rule(
        "ImageType 'Windows' requires arch 'amd64' (AWS only)",
        |s| {
            let windows = s
                .pointer("/platform/aws/imageType")
                .is_some_and(|t| t == "Windows");
            Ok(!windows || text(s, "arch")? == "amd64")
        },
    )
    .rule(
        "Scale-from-zero (autoScaling.min=0) is currently only supported for AWS and Azure platforms",
        |s| {
            if !has(s, "autoScaling") || int(get(s, "autoScaling")?, "min")? > 0 {
                return Ok(true);
            }
            Ok(["AWS", "Azure"].contains(&text(get(s, "platform")?, "type")?))
        },
    )
}

fn management() -> Node {
    let replace = object(vec![
        (
            "rollingUpdate",
            object(vec![
                ("maxSurge", int_or_string()),
                ("maxUnavailable", int_or_string()),
            ]),
        ),
        ("strategy", one_of(&["RollingUpdate", "OnDelete"])),
    ])
    .default(
        json!({"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}, "strategy": "RollingUpdate"}),
    )
    .rule(
        "The 'rollingUpdate' field can only be set when 'strategy' is 'RollingUpdate'",
        |r| Ok(!has(r, "rollingUpdate") || text(r, "strategy")? == "RollingUpdate"),
    );
    object(vec![
        ("autoRepair", boolean().default(json!(false))),
        ("inPlace", object(vec![("maxUnavailable", int_or_string())])),
        ("replace", replace),
        ("upgradeType", one_of(&["Replace", "InPlace"])),
    ])
    .required(&["upgradeType"])
    .rule(
        "The 'inPlace' field can only be set when 'upgradeType' is 'InPlace'",
        |m| Ok(!has(m, "inPlace") || text(m, "upgradeType")? == "InPlace"),
    )
}

fn taint() -> Node {
    object(vec![
        (
            "effect",
            one_of(&["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        ),
        (
            "key",
            string().min_len(1).max_len(253).text_rule(
                "key must be a qualified name with an optional subdomain prefix e.g. example.com/MyName",
                formats::qualified_name,
            ),
        ),
        (
            "value",
            string().max_len(253).text_rule(
                "Value must start and end with alphanumeric characters and can only contain '-', '_', '.' in the middle",
                formats::label_value,
            ),
        ),
    ])
    .required(&["effect", "key"])
}

fn platform() -> Node {
    let label_selector = object(vec![
        (
            "matchExpressions",
            list(
                object(vec![
                    ("key", string()),
                    ("operator", string()),
                    ("values", list(string())),
                ])
                .required(&["key", "operator"]),
            ),
        ),
        ("matchLabels", string_map()),
    ]);
    object(vec![
        (
            "agent",
            object(vec![("agentLabelSelector", label_selector)]),
        ),
        ("aws", aws()),
        ("azure", unmodelled()),
        ("ibmcloud", object(vec![("providerType", string())])),
        ("kubevirt", unmodelled()),
        ("powervs", powervs()),
        ("type", one_of(PLATFORM_TYPES).max_len(100)),
    ])
    .required(&["type"])
}

fn aws() -> Node {
    let capacity_reservation = object(vec![
        (
            "id",
            string().max_len(20).text_rule(
                "AWS Capacity Reservation ID must start with 'cr-' followed by 17 lowercase hexadecimal characters (e.g., cr-0123456789abcdef0)",
                formats::capacity_reservation_id,
            ),
        ),
        ("marketType", one_of(&["OnDemand", "CapacityBlocks"])),
        (
            "preference",
            one_of(&["", "None", "CapacityReservationsOnly", "Open"]),
        ),
    ])
    .rule(
        "AWS Capacity Reservation preference 'None' or 'Open' is incompatible with specifying a Capacity Reservation ID",
        |c| {
            Ok(!has(c, "id")
                || !has(c, "preference")
                || !["Open", "None"].contains(&text(c, "preference")?))
        },
    )
    .rule(
        "AWS Capacity Reservation market type 'CapacityBlocks' requires a Capacity Reservation ID",
        |c| Ok(!is(c, "marketType", "CapacityBlocks") || has(c, "id")),
    );
    let placement = object(vec![
        ("capacityReservation", capacity_reservation),
        (
            "marketType",
            one_of(&["", "OnDemand", "Spot", "CapacityBlocks"]),
        ),
        (
            "spot",
            object(vec![(
                "maxPrice",
                string()
                    .min_len(1)
                    .max_len(20)
                    .pattern(r"^[0-9]+(\.[0-9]+)?$", formats::decimal),
            )]),
        ),
        ("tenancy", one_of(&["default", "dedicated", "host"])),
    ])
    .rule(
        "AWS Capacity Reservations cannot be used with Dedicated Hosts (tenancy 'host')",
        |p| Ok(!is(p, "tenancy", "host") || !has(p, "capacityReservation")),
    )
    .rule(
        "Spot instances cannot be combined with Capacity Reservations",
        |p| Ok(!is(p, "marketType", "Spot") || !has(p, "capacityReservation")),
    )
    .rule("Spot instances require default tenancy or unset", |p| {
        Ok(!is(p, "marketType", "Spot") || !has(p, "tenancy") || is(p, "tenancy", "default"))
    })
    .rule(
        "CapacityBlocks market type requires capacityReservation to be specified",
        |p| Ok(!is(p, "marketType", "CapacityBlocks") || has(p, "capacityReservation")),
    )
    .rule(
        "spot options can only be specified when marketType is 'Spot'",
        |p| Ok(!has(p, "spot") || is(p, "marketType", "Spot")),
    );
    object(vec![
        ("ami", string().max_len(255)),
        ("imageType", one_of(&["Windows", "Linux"])),
        ("instanceProfile", string().max_len(255)),
        ("instanceType", string().max_len(255)),
        ("placement", placement),
        ("resourceTags", aws_resource_tags(false)),
        (
            "rootVolume",
            object(vec![
                ("encrypted", boolean()),
                ("encryptionKey", string().max_len(2048)),
                ("iops", int64()),
                ("size", int64().min(8)),
                ("type", string().max_len(255)),
            ])
            .required(&["size", "type"]),
        ),
        (
            "securityGroups",
            list(object(vec![
                ("filters", aws_filters()),
                ("id", string().max_len(255)),
            ]))
            .max_items(50),
        ),
        (
            "subnet",
            object(vec![
                ("filters", aws_filters()),
                ("id", string().max_len(255)),
            ])
            .rule(
                "subnet is invalid, a valid subnet id or filters must be set, but not both",
                |s| {
                    let by_id = s
                        .get("id")
                        .and_then(Value::as_str)
                        .is_some_and(|id| id.starts_with("subnet-"));
                    if by_id {
                        Ok(!has(s, "filters"))
                    } else {
                        Ok(!items(s, "filters")?.is_empty())
                    }
                },
            ),
        ),
    ])
    .required(&["instanceType", "subnet"])
}

/// `has(v.key) && v.key == value`.
fn is(v: &Value, key: &str, value: &str) -> bool {
    v.get(key).is_some_and(|x| x == value)
}

fn powervs() -> Node {
    object(vec![
        (
            "image",
            object(vec![
                ("id", string().max_len(255)),
                ("name", string().max_len(255)),
            ]),
        ),
        (
            "imageDeletePolicy",
            one_of(&["delete", "retain"]).default(json!("delete")),
        ),
        ("memoryGiB", int32().default(json!(32))),
        (
            "processorType",
            one_of(&["dedicated", "shared", "capped"]).default(json!("shared")),
        ),
        ("processors", int_or_string().default(json!("0.5"))),
        (
            "storageType",
            one_of(&["tier1", "tier3"]).default(json!("tier1")),
        ),
        ("systemType", string().max_len(255).default(json!("s922"))),
    ])
}
