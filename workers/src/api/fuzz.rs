//! Property-based fuzzing of what arrives from NATS before any I/O: every request body
//! (bytes of any shape, or JSON of any shape under a verb's field names) reads into
//! its request type or into one documented error, every workflow input of any shape is
//! validated or refused with its problems, and the task and history-entry decoders
//! refuse what they cannot read (the task loop dead-letters what does not decode) —
//! never a panic. Run by `cargo test` (and so
//! `make test`) for a bounded number of cases.

use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::api::fields::Fields;
use hcpflow_protocol::{
    parse_body, ActivityTaskMessage, ApiError, CancelRequest, ClustersRequest, DescribeRequest,
    ErrorCode, HistoryEntry, HistoryRequest, ListRequest, SignalRequest, StartRequest,
    VerifyRequest, WorkflowTask,
};

/// The field names the verbs read, and a few they do not.
const NAMES: [&str; 16] = [
    "workflow_type",
    "workflow_id",
    "input",
    "parent",
    "status",
    "concurrency_key",
    "limit",
    "cursor",
    "from_seq",
    "raw",
    "signal",
    "payload",
    "reason",
    "name",
    "include_destroyed",
    "ünïcode\u{0}",
];

/// The fields of the HyperShift workflows' inputs, and one they do not have.
const CREATE_NAMES: [&str; 27] = [
    "name",
    "infra_id",
    "region",
    "zones",
    "base_domain",
    "endpoint_access",
    "vpc_cidr",
    "oidc_bucket",
    "namespace",
    "management",
    "release_image",
    "pull_secret",
    "pull_secret_ref",
    "ssh_public_key",
    "node_pools",
    "keep_on_failure",
    "control_plane_timeout_secs",
    "availability_policy",
    "resource_tags",
    "annotations",
    "aws_account",
    "management_aws_account",
    "cluster",
    "node_pool",
    "replicas",
    "timeout_secs",
    "ünknown",
];

/// Strings that reach the edges: ids of every length, unicode, control characters,
/// sealed-looking values, numbers as text.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_-]{0,140}",
        ".{0,40}",
        Just("sealed:v2:k:AAAA".to_owned()),
        Just("sealed:v1:dev:".to_owned() + &"A".repeat(60)),
        Just("-1".to_owned()),
        Just("\u{202e}\u{0}\u{ffff}".to_owned()),
    ]
}

/// JSON of any shape, a few levels deep.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A request object whose keys are the verbs' field names, with values of any shape.
fn request_body() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(prop::sample::select(NAMES.to_vec()), json(), 0..10)
        .prop_map(|fields| fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Reads `map` as every verb's request; each is a request or a documented error.
fn read_as_every_verb(map: Map<String, Value>) {
    let fields = Fields(map);
    let documented = |result: Result<(), ApiError>| match result {
        Ok(()) => {}
        Err(error) => assert!(
            matches!(error.code, ErrorCode::InvalidRequest),
            "an undocumented error reading fields: {error:?}"
        ),
    };
    documented(fields.read::<StartRequest>().map(drop));
    documented(fields.read::<DescribeRequest>().map(drop));
    documented(fields.read::<ListRequest>().map(drop));
    documented(fields.read::<HistoryRequest>().map(drop));
    documented(fields.read::<SignalRequest>().map(drop));
    documented(fields.read::<CancelRequest>().map(drop));
    documented(fields.read::<ClustersRequest>().map(drop));
    documented(fields.read::<VerifyRequest>().map(drop));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_are_a_body_or_a_documented_error(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        match parse_body(&bytes, 256) {
            Ok(map) => read_as_every_verb(map),
            Err(error) => prop_assert!(matches!(
                error.code,
                ErrorCode::TooLarge | ErrorCode::InvalidJson | ErrorCode::InvalidRequest
            )),
        }
        // The task and entry decoders refuse what they cannot read.
        let _ = serde_json::from_slice::<WorkflowTask>(&bytes);
        let _ = serde_json::from_slice::<ActivityTaskMessage>(&bytes);
        let _ = serde_json::from_slice::<HistoryEntry>(&bytes).map(|entry| entry.event());
    }

    #[test]
    fn any_fields_read_into_a_request_or_an_error_naming_them(map in request_body()) {
        // Through the bytes, as a body arrives (floats may not come back bit for bit).
        let body = serde_json::to_vec(&Value::Object(map)).unwrap_or_default();
        let parsed = parse_body(&body, usize::MAX).map_err(|e| TestCaseError::fail(e.to_string()))?;
        read_as_every_verb(parsed);
    }

    #[test]
    fn any_input_is_validated_or_refused_with_its_problems(
        changes in prop::collection::btree_map(prop::sample::select(CREATE_NAMES.to_vec()), json(), 0..6),
        workflow_type in prop::sample::select(vec![
            hcpflow_hypershift::create::TYPE,
            hcpflow_hypershift::scale::TYPE,
            hcpflow_hypershift::destroy::TYPE,
        ]),
    ) {
        // Every start's input goes through its type's validation, then the server's
        // policies, before anything is recorded: each says what is wrong, never panics.
        // A valid input with a few fields changed (null: taken out), so that the checks
        // past the first one are reached too.
        let mut input = serde_json::json!({
            "name": "demo", "region": "us-east-1", "zones": ["us-east-1a"],
            "base_domain": "example.com", "endpoint_access": "Public", "vpc_cidr": "10.0.0.0/16",
            "oidc_bucket": "oidc", "release_image": "quay.io/openshift-release-dev/ocp-release:4.17.0-x86_64",
            "pull_secret": "{\"auths\": {}}", "ssh_public_key": "ssh-ed25519 AAAA",
            "node_pools": [{"name": "p", "zone": "us-east-1a", "replicas": 1}],
            "cluster": "demo", "node_pool": "p", "replicas": 2,
        });
        for (field, value) in changes {
            match value {
                Value::Null => input.as_object_mut().unwrap().remove(field),
                value => input.as_object_mut().unwrap().insert(field.to_owned(), value),
            };
        }
        let mut catalog = hcpflow_engine::Catalog::new();
        hcpflow_hypershift::catalog::register_workflows(&mut catalog).unwrap();
        let info = catalog.info(workflow_type).unwrap();
        if let Err(problems) = (info.validate)(&input) {
            prop_assert!(!problems.is_empty() && problems.iter().all(|p| !p.is_empty()));
        }
        let _ = hcpflow_hypershift::admission::AdmissionPolicy::default().check(workflow_type, &input);
        let _ = hcpflow_hypershift::aws_accounts::AwsAccounts::default().check("t", workflow_type, &input);
        let _ = hcpflow_hypershift::pull_secret_ref::SecretRefPolicy::default().check("t", workflow_type, &input);
    }

    #[test]
    fn any_json_is_a_task_or_is_refused(value in json()) {
        let _ = serde_json::from_value::<WorkflowTask>(value.clone());
        let _ = serde_json::from_value::<ActivityTaskMessage>(value.clone());
        if let Ok(entry) = serde_json::from_value::<HistoryEntry>(value) {
            let _ = entry.event();
        }
    }
}
