//! The internal task messages on `<prefix>.tasks.*`: wake-ups for the workers, each
//! naming its workflow by a validated id, so a message with a wrong id or seq does not
//! decode (it is dropped as malformed, never run).

use hcpflow_engine::{Seq, WorkflowId};
use serde::{Deserialize, Serialize};

/// A workflow task: run the executor for this workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowTask {
    pub workflow_id: WorkflowId,
    /// Set when a child finished: record its outcome in this (the parent's) history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<ChildDone>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildDone {
    pub child_id: WorkflowId,
    pub started_seq: Seq,
}

/// An activity task: run attempt `attempt` of the activity scheduled at `scheduled_seq`.
/// It names the attempt and nothing else: the worker runs the type, input and options
/// the history recorded, so a forged message can at most wake an attempt the history
/// waits for. (Messages of earlier versions carried the request too; it is ignored.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityTaskMessage {
    pub workflow_id: WorkflowId,
    pub scheduled_seq: Seq,
    pub attempt: u32,
}

/// The header that marks an internal child start on the submit subject.
pub const PARENT_HEADER: &str = "Hcpflow-Parent";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_task_with_a_wrong_id_or_seq_does_not_decode() {
        let good =
            json!({"workflow_id": "wf-1", "child": {"child_id": "wf-1-c", "started_seq": 4}});
        let task: WorkflowTask = serde_json::from_value(good.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&task).unwrap(),
            good,
            "the bytes stay as they were"
        );
        for bad in [
            json!({"workflow_id": "wf 1"}),
            json!({"workflow_id": ""}),
            json!({"workflow_id": "wf-1", "child": {"child_id": "c", "started_seq": 0}}),
            json!({"workflow_id": "wf-1", "child": {"child_id": "c/d", "started_seq": 1}}),
        ] {
            assert!(
                serde_json::from_value::<WorkflowTask>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        let activity = json!({"workflow_id": "wf-1", "scheduled_seq": 0, "attempt": 1});
        let error = serde_json::from_value::<ActivityTaskMessage>(activity).unwrap_err();
        assert!(
            error.to_string().contains("seq must be at least 1"),
            "{error}"
        );
        // A message of an earlier version, with the request in it, names the same attempt.
        let earlier = json!({"workflow_id": "wf-1", "scheduled_seq": 2, "attempt": 1,
                             "activity_type": "noop.step", "input": {}, "options": {}});
        let task: ActivityTaskMessage = serde_json::from_value(earlier).unwrap();
        assert_eq!(task.scheduled_seq.get(), 2);
    }
}
