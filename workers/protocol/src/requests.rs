//! The API's request bodies, one type per verb (DESIGN.md §4). The server reads a body
//! field by field into these (so one `invalid_request` names every wrong field); a
//! client builds them and sends them with [`crate::ApiClient::request`]. Ids are the
//! engine's validated types: a wrong workflow id or seq does not deserialize.

use hcpflow_engine::event::ParentRef;
use hcpflow_engine::{Seq, WorkflowId, WorkflowStatus};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::replies::{
    CancelReply, ClustersReply, DescribeReply, EmptyReply, HistoryPage, ListReply, StartReply,
};

/// A request body, the verb it is sent to (`<prefix>.api.v1.<VERB>`) and its reply.
pub trait ApiRequest: Serialize {
    const VERB: &'static str;
    /// The reply's fields, without `ok`.
    type Reply: DeserializeOwned;
}

/// Every verb the API answers, in the order DESIGN.md §4 lists them.
pub const VERBS: [&str; 9] = [
    StartRequest::VERB,
    DestroyRequest::VERB,
    DescribeRequest::VERB,
    ListRequest::VERB,
    HistoryRequest::VERB,
    SignalRequest::VERB,
    CancelRequest::VERB,
    ClustersRequest::VERB,
    VerifyRequest::VERB,
];

/// Starts a workflow, as the API and the submit stream take it; the server sends one on
/// the internal `<prefix>.task.child` to start a parent's child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartRequest {
    pub workflow_type: String,
    /// Generated when absent.
    pub workflow_id: Option<WorkflowId>,
    pub input: Value,
    /// Set only on internal child starts; verified against the parent's history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRef>,
}

impl ApiRequest for StartRequest {
    const VERB: &'static str = "start";
    type Reply = StartReply;
}

/// Starts a destroying workflow type (`destroy_hosted_cluster`): the body of a start,
/// on a verb of its own so that NATS permissions can give it to admins alone (`start`
/// refuses these types).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DestroyRequest(pub StartRequest);

impl ApiRequest for DestroyRequest {
    const VERB: &'static str = "destroy";
    type Reply = StartReply;
}

/// One workflow's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescribeRequest {
    pub workflow_id: WorkflowId,
}

impl ApiRequest for DescribeRequest {
    const VERB: &'static str = "describe";
    type Reply = DescribeReply;
}

/// Workflows, newest first, narrowed by any of the filters; a page at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WorkflowStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_type: Option<String>,
    /// The workflows of one cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    /// 1–1000; 100 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The previous page's `cursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl ApiRequest for ListRequest {
    const VERB: &'static str = "list";
    type Reply = ListReply;
}

/// A page of a workflow's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRequest {
    pub workflow_id: WorkflowId,
    /// The first seq wanted (1 when absent); a `cursor` wins over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_seq: Option<Seq>,
    /// 1–1000; 100 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The previous page's `cursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// With each entry's `body`: the exact bytes that were hashed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub raw: bool,
}

impl ApiRequest for HistoryRequest {
    const VERB: &'static str = "history";
    type Reply = HistoryPage;
}

/// Delivers a signal to a live workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SignalRequest {
    pub workflow_id: WorkflowId,
    /// The signal's name.
    pub signal: String,
    pub payload: Value,
}

impl ApiRequest for SignalRequest {
    const VERB: &'static str = "signal";
    type Reply = EmptyReply;
}

/// Asks a live workflow to stop: its compensations run and it ends `cancelled`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub workflow_id: WorkflowId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ApiRequest for CancelRequest {
    const VERB: &'static str = "cancel";
    type Reply = CancelReply;
}

/// The cluster registry, live clusters first, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClustersRequest {
    /// Only the clusters of this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Destroyed clusters too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_destroyed: bool,
    /// 1–1000; 100 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl ApiRequest for ClustersRequest {
    const VERB: &'static str = "clusters";
    type Reply = ClustersReply;
}

/// The evidence for an audit of one workflow (its reply is read by `hcpflow-audit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyRequest {
    pub workflow_id: WorkflowId,
}

impl ApiRequest for VerifyRequest {
    const VERB: &'static str = "verify";
    type Reply = Value;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn absent_options_are_left_out_of_the_body() {
        let request = HistoryRequest {
            workflow_id: WorkflowId::new("wf-1").unwrap(),
            from_seq: None,
            limit: None,
            cursor: None,
            raw: false,
        };
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({"workflow_id": "wf-1"})
        );
        assert_eq!(
            serde_json::to_value(ListRequest {
                status: Some(WorkflowStatus::Blocked),
                ..ListRequest::default()
            })
            .unwrap(),
            json!({"status": "blocked"})
        );
    }

    #[test]
    fn a_wrong_id_or_seq_does_not_deserialize() {
        assert!(serde_json::from_value::<DescribeRequest>(json!({"workflow_id": "a b"})).is_err());
        assert!(serde_json::from_value::<HistoryRequest>(
            json!({"workflow_id": "wf-1", "from_seq": 0})
        )
        .is_err());
        let request: HistoryRequest =
            serde_json::from_value(json!({"workflow_id": "wf-1", "from_seq": 3})).unwrap();
        assert_eq!(request.from_seq, Some(Seq::new(3).unwrap()));
    }

    #[test]
    fn the_verbs_are_distinct() {
        let mut verbs = VERBS.to_vec();
        verbs.sort_unstable();
        verbs.dedup();
        assert_eq!(verbs.len(), VERBS.len());
    }
}
