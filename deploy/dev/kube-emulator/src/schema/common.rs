//! Schema pieces both HostedCluster and NodePool use.

use super::formats;
use super::model::{int64, list, map, object, one_of, string, Node};

/// A release: `image`, required.
pub(super) fn release() -> Node {
    object(vec![(
        "image",
        string().min_len(1).max_len(253).text_rule(
            "Image must start with a word character (letters, digits, or underscores) and contain no white spaces",
            formats::release_image,
        ),
    )])
    .required(&["image"])
}

/// A reference to an object by name (`LocalObjectReference`): `name`, defaulting to "".
pub(super) fn local_ref() -> Node {
    object(vec![("name", string().default(serde_json::json!("")))])
}

/// A map of strings.
pub(super) fn string_map() -> Node {
    map(string())
}

/// AWS resource filters: `name` and `values`, both required.
pub(super) fn aws_filters() -> Node {
    list(
        object(vec![
            ("name", string().max_len(255)),
            ("values", list(string().max_len(255)).max_items(50)),
        ])
        .required(&["name", "values"]),
    )
    .max_items(50)
}

/// AWS resource tags; a HostedCluster's also carry an `overridePolicy`.
pub(super) fn aws_resource_tags(with_override_policy: bool) -> Node {
    let mut fields = vec![
        (
            "key",
            string().min_len(1).max_len(128).text_rule(
                "key must only contain letters, digits, and the characters _ . : / = + - @",
                formats::aws_tag,
            ),
        ),
        (
            "value",
            string().min_len(1).max_len(256).text_rule(
                "value must only contain letters, digits, and the characters _ . : / = + - @",
                formats::aws_tag,
            ),
        ),
    ];
    if with_override_policy {
        fields.push(("overridePolicy", one_of(&["Allow", "Deny"])));
    }
    list(object(fields).required(&["key", "value"])).max_items(25)
}

/// `pausedUntil`, with its minimum length (4 on a HostedCluster, 1 on a NodePool).
pub(super) fn paused_until(min_length: usize) -> Node {
    string().min_len(min_length).max_len(35).text_rule(
        "PausedUntil must be a date in RFC3339 format or 'True', 'true', 'False' or 'false'",
        formats::paused_until,
    )
}

/// The platform types.
pub(super) const PLATFORM_TYPES: &[&str] = &[
    "AWS", "Azure", "IBMCloud", "KubeVirt", "Agent", "PowerVS", "None",
];

/// A pod toleration (HostedCluster `tolerations`).
pub(super) fn toleration() -> Node {
    object(vec![
        ("effect", string()),
        ("key", string()),
        ("operator", string()),
        ("tolerationSeconds", int64()),
        ("value", string()),
    ])
}
