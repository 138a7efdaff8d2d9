//! The cloud side's conditions on the HostedCluster, as the hypershift-operator's
//! HostedCluster controller sets them (hostedcluster_controller.go): it copies
//! `AWSDefaultSecurityGroupCreated` and `ValidAWSIdentityProvider` from the control
//! plane; while the control plane is being deleted it bubbles
//! `AWSDefaultSecurityGroupDeleted` (`computeAWSDefaultSGDeletedCondition`) and
//! `CloudResourcesDestroyed` up from it — Unknown `StatusUnknown` with no message while
//! the control plane has none; and it sums the AWSEndpointServices'
//! `AWSEndpointAvailable` and `AWSEndpointServiceAvailable` up
//! (`computeAWSEndpointServiceCondition`): Unknown `StatusUnknown` "AWSEndpointService
//! conditions not found" while no endpoint service has the condition, False `AWSError`
//! with the False ones' messages joined by "; ", else True `AWSSuccess` "All is well".

use chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};

pub const SECURITY_GROUP_CREATED: &str = "AWSDefaultSecurityGroupCreated";
pub(super) const SECURITY_GROUP_DELETED: &str = "AWSDefaultSecurityGroupDeleted";
pub(super) const ENDPOINT_AVAILABLE: &str = "AWSEndpointAvailable";
pub(super) const ENDPOINT_SERVICE_AVAILABLE: &str = "AWSEndpointServiceAvailable";
/// `hyperv1.ValidAWSIdentityProvider` (the CPO's health check: `identity`).
pub const VALID_IDENTITY_PROVIDER: &str = "ValidAWSIdentityProvider";
/// `hyperv1.CloudResourcesDestroyed`.
pub(super) const CLOUD_RESOURCES_DESTROYED: &str = "CloudResourcesDestroyed";
/// `hyperv1.StatusUnknownReason`.
pub const STATUS_UNKNOWN: &str = "StatusUnknown";
/// `hyperv1.AllIsWellMessage`.
pub const ALL_IS_WELL: &str = "All is well";

pub(super) fn condition(
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    generation: i64,
) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
           "observedGeneration": generation})
}

/// `computeAWSEndpointServiceCondition` over the endpoint services' conditions of
/// `kind` (`None`: that service has none yet).
pub(super) fn summed(
    kind: &str,
    per_service: &[Option<Result<(), String>>],
    generation: i64,
) -> Value {
    let present: Vec<&Result<(), String>> = per_service.iter().flatten().collect();
    if present.is_empty() {
        return condition(
            kind,
            "Unknown",
            STATUS_UNKNOWN,
            "AWSEndpointService conditions not found",
            generation,
        );
    }
    let failures: Vec<&str> = present
        .iter()
        .filter_map(|r| r.as_ref().err().map(String::as_str))
        .collect();
    if failures.is_empty() {
        condition(kind, "True", "AWSSuccess", ALL_IS_WELL, generation)
    } else {
        condition(kind, "False", "AWSError", &failures.join("; "), generation)
    }
}

/// What the HostedCluster controller bubbles up from a control plane being deleted that
/// has no condition of this `kind`.
pub(super) fn not_reported(kind: &str, generation: i64) -> Value {
    condition(kind, "Unknown", STATUS_UNKNOWN, "", generation)
}

/// Replaces the conditions of the given types, keeping a condition's
/// lastTransitionTime while its status stays the same (`meta.SetStatusCondition`).
pub(super) fn merge(status: &mut Value, conditions: Vec<Value>) {
    if !status.is_object() {
        *status = json!({});
    }
    let mut all = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for mut new in conditions {
        match all.iter_mut().find(|c| c["type"] == new["type"]) {
            Some(old) => {
                if old["status"] == new["status"] {
                    new["lastTransitionTime"] = old["lastTransitionTime"].clone();
                }
                *old = new;
            }
            None => all.push(new),
        }
    }
    status["conditions"] = Value::Array(all);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_conditions_sum_up_like_the_hostedcluster_controllers() {
        let unknown = summed(ENDPOINT_AVAILABLE, &[None, None], 1);
        assert_eq!(
            (&unknown["status"], &unknown["reason"], &unknown["message"]),
            (
                &json!("Unknown"),
                &json!("StatusUnknown"),
                &json!("AWSEndpointService conditions not found")
            )
        );
        let failed = summed(
            ENDPOINT_AVAILABLE,
            &[Some(Err("a".into())), Some(Ok(())), Some(Err("b".into()))],
            1,
        );
        assert_eq!(failed["status"], "False");
        assert_eq!(failed["reason"], "AWSError");
        assert_eq!(failed["message"], "a; b");
        let fine = summed(ENDPOINT_AVAILABLE, &[Some(Ok(())), None], 1);
        assert_eq!(
            (&fine["status"], &fine["reason"], &fine["message"]),
            (&json!("True"), &json!("AWSSuccess"), &json!("All is well"))
        );
    }

    #[test]
    fn merging_keeps_other_conditions_and_unchanged_transition_times() {
        let mut status = json!({"conditions": [
            {"type": "Available", "status": "True", "lastTransitionTime": "t0"},
            {"type": ENDPOINT_AVAILABLE, "status": "False", "lastTransitionTime": "t1"}]});
        let mut new = condition(ENDPOINT_AVAILABLE, "False", "AWSError", "x", 1);
        new["lastTransitionTime"] = json!("t2");
        merge(&mut status, vec![new]);
        let conditions = status["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[1]["lastTransitionTime"], "t1");
        assert_eq!(conditions[1]["message"], "x");
    }
}
