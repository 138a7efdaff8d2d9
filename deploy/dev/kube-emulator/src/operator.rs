//! A simulated HyperShift operator (hypershift-aws.md §6): moves HostedCluster and
//! NodePool status the way the real operator does, after configurable delays.
//!
//! HostedCluster: adds its finalizer; refuses a configuration the hypershift-operator
//! refuses (`ValidConfiguration=False` with its message: see `configuration`); without
//! its pull secret (`spec.pullSecret`, missing or without `.dockerconfigjson`) reports
//! `ValidReleaseImage=False (SecretNotFound)`, Progressing blocked and the
//! reconciliation failed as the real one does, and rolls no control plane out until
//! the Secret is right (see `pull_secret`, after hostedcluster_controller.go); walks
//! the condition sequence (ValidConfiguration … KubeAPIServerAvailable …
//! Available=True, Progressing=False, Degraded=False), one condition per `step`,
//! reporting `Degraded=True` while the components roll out; once the API server is up
//! writes the admin kubeconfig Secret and `status.kubeconfig`; on delete removes the
//! finalizer after `deletion`.
//! NodePool: `status.replicas` follows `spec.replicas` one node per `node`, with
//! AllMachinesReady, AllNodesHealthy and Ready — once its HostedCluster has a default
//! security group. As the real NodePool controller does
//! (hypershift-operator/controllers/nodepool/aws.go: `setAWSConditions`,
//! `buildAWSSecurityGroups`), an AWS NodePool reports `AWSSecurityGroupAvailable`:
//! False `DefaultSGNotReady` "Waiting for AWS default security group to be created for
//! hosted cluster" while the HostedCluster's `status.platform.aws.
//! defaultWorkerSecurityGroupID` is empty — no machine template, so no machines are
//! made or removed (AllMachinesReady and AllNodesHealthy False `NotFound` "No Machines
//! are created" while it has none, no Ready of its own) — and True `AsExpected`
//! "NodePool has a default security group" once it is set. A NodePool whose
//! HostedCluster does not exist is left alone.
//!
//! The default security group and `ValidAWSIdentityProvider` are the control plane's.
//! With the cloud side on, it makes both (see `cloud`). Without it, the operator stands
//! in: an AWS HostedCluster gets `ValidAWSIdentityProvider` (Unknown `StatusUnknown`
//! "Cannot validate AWS identity provider while KubeAPIServer is not available", then
//! True `AsExpected` "All is well" once the API server is up), and with it
//! `AWSDefaultSecurityGroupCreated` True and a made-up `sg-…` id (derived from the uid,
//! in no AWS anywhere). A blocked HostedCluster (no control plane) has
//! `ValidAWSIdentityProvider` Unknown `StatusUnknown` with no message, as the
//! HostedCluster controller sets it without a control plane to copy it from. None of
//! it holds Available back (`computeHostedClusterAvailability` does not look at it).
//!
//! Failure injection, by annotation on the object:
//! - `hcpflow.io/emulator-fail-available: <reason>` — the HostedCluster never becomes
//!   Available (Available=False and Degraded=True with that reason);
//! - `hcpflow.io/emulator-stall-at: <n>` — the NodePool stops at n replicas;
//! - `hcpflow.io/emulator-deletion-hangs: "true"` — the finalizer is never removed;
//! - `hcpflow.io/emulator-guest-unreachable: "true"` — on deletion the control plane
//!   cannot reach the guest cluster, so it skips the guest's cloud resources (as the
//!   real HCCO does once it gives up, `Cleanup skipped: MaxConnectionFailuresExceeded`;
//!   the emulator skips the failing passes before that) and leaves them to the
//!   destroy's own cleanup.
//!
//! The installation (`install`): the operator's Deployment as `hypershift install`
//! writes it, with or without the AWS private platform; a HostedCluster that
//! installation does not support gets `SupportedHostedCluster=False` and nothing rolls
//! out. The cloud side (`cloud`), when the emulator has an AWS endpoint: what the
//! operators make in AWS for a HostedCluster — the default security group and
//! PrivateLink — and what the guest cluster makes once it has nodes (load balancers,
//! a volume, the registry bucket, the public `*.apps` record), in its own loop; it owns
//! the conditions in [`cloud::CONDITIONS`], and a deleted HostedCluster keeps its
//! finalizer until the cloud side's cleanup is through — PrivateLink always, the default
//! security group and the guest's resources only with
//! `hypershift.openshift.io/cleanup-cloud-resources: "true"` ([`cloud::CLEANUP_CLOUD_RESOURCES`]).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine;
use chrono::{SecondsFormat, Utc};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub mod cloud;
mod configuration;
pub mod install;
mod pull_secret;

use crate::http::Shared;
use crate::resources::{ResourceType, HOSTED_CLUSTERS, NODE_POOLS, SECRETS};
use crate::store::{meta, Part, Store};

pub const FINALIZER: &str = "hypershift.openshift.io/finalizer";
pub const FAIL_AVAILABLE: &str = "hcpflow.io/emulator-fail-available";
pub const STALL_AT: &str = "hcpflow.io/emulator-stall-at";
pub const DELETION_HANGS: &str = "hcpflow.io/emulator-deletion-hangs";
pub const GUEST_UNREACHABLE: &str = "hcpflow.io/emulator-guest-unreachable";
/// `hyperv1.UnsupportedHostedClusterReason`.
pub const UNSUPPORTED: &str = "UnsupportedHostedCluster";
/// `hyperv1.NodePoolAWSSecurityGroupAvailableConditionType`.
pub const SECURITY_GROUP_AVAILABLE: &str = "AWSSecurityGroupAvailable";
/// `hyperv1.DefaultAWSSecurityGroupNotReadyReason`.
pub const SECURITY_GROUP_NOT_READY: &str = "DefaultSGNotReady";
/// The NodePool controller's message while the HostedCluster has no default security
/// group.
pub const WAITING_FOR_SECURITY_GROUP: &str =
    "Waiting for AWS default security group to be created for hosted cluster";

/// The conditions a HostedCluster gains, in order, before Available.
pub const SEQUENCE: [&str; 9] = [
    "ValidConfiguration",
    "SupportedHostedCluster",
    "ValidReleaseImage",
    "ReconciliationActive",
    "ReconciliationSucceeded",
    "InfrastructureReady",
    "EtcdAvailable",
    "KubeAPIServerAvailable",
    "IgnitionEndpointAvailable",
];

/// The conditions the operator sets on its first look (True, once the configuration
/// passes); a `False` among them is what a client may treat as final.
pub const VALIDITY: [&str; 3] = [
    "ValidConfiguration",
    "SupportedHostedCluster",
    "ValidReleaseImage",
];

/// How fast the simulated operator moves.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Between two HostedCluster conditions.
    pub step: Duration,
    /// Per NodePool node.
    pub node: Duration,
    /// From a delete to the finalizer's removal.
    pub deletion: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            step: Duration::from_millis(300),
            node: Duration::from_millis(500),
            deletion: Duration::from_secs(1),
        }
    }
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    meta(object)
        .get("annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn condition(kind: &str, status: bool, reason: &str, message: &str, generation: i64) -> Value {
    json!({"type": kind, "status": if status { "True" } else { "False" }, "reason": reason,
           "message": message, "lastTransitionTime": now(), "observedGeneration": generation})
}

fn unknown(kind: &str, reason: &str, message: &str, generation: i64) -> Value {
    let mut unknown = condition(kind, false, reason, message, generation);
    unknown["status"] = json!("Unknown");
    unknown
}

fn on_aws(object: &Value) -> bool {
    object
        .pointer("/spec/platform/type")
        .and_then(Value::as_str)
        == Some("AWS")
}

fn find_condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == kind)
}

/// What the operator reports besides a refused or unsupported configuration.
struct Blocked<'a> {
    generation: i64,
    /// The pull secret cannot be used.
    pull_secret: Option<&'a pull_secret::Unavailable>,
}

/// The HostedCluster controller's `Degraded` message without a HostedControlPlane.
pub const NO_CONTROL_PLANE: &str = "The hosted control plane is not found";

/// `ValidReleaseImage` while the pull secret cannot be used (see `pull_secret`).
fn pull_secret_not_found(unavailable: &pull_secret::Unavailable, generation: i64) -> Value {
    condition(
        "ValidReleaseImage",
        false,
        pull_secret::SECRET_NOT_FOUND,
        &unavailable.message,
        generation,
    )
}

/// `ReconciliationSucceeded` while the pull secret cannot be used: the report's error.
fn reconciliation_failed(unavailable: &pull_secret::Unavailable, generation: i64) -> Value {
    condition(
        "ReconciliationSucceeded",
        false,
        "ReconciliationError",
        &unavailable.reconciliation_error(),
        generation,
    )
}

/// The HostedCluster controller's `ValidAWSIdentityProvider` while there is no control
/// plane to copy it from.
fn identity_not_reported(generation: i64) -> Value {
    unknown(
        cloud::VALID_IDENTITY_PROVIDER,
        cloud::STATUS_UNKNOWN,
        "",
        generation,
    )
}

/// The made-up id of the default security group the operator stands in for when there
/// is no cloud side: `sg-` and 17 hex digits, the same for the same HostedCluster.
fn stand_in_security_group(uid: &str) -> String {
    let digest = Sha256::digest(format!("default-sg/{uid}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sg-{}", &hex[..17])
}

/// Sets conditions, keeping lastTransitionTime of those whose status did not change,
/// and the conditions the cloud side owns ([`cloud::CONDITIONS`]) as they are.
fn set_conditions(status: &mut Value, conditions: Vec<Value>) {
    let old = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let merged: Vec<Value> = conditions
        .into_iter()
        .map(|mut new| {
            if let Some(previous) = old.iter().find(|c| c["type"] == new["type"]) {
                if previous["status"] == new["status"] {
                    new["lastTransitionTime"] = previous["lastTransitionTime"].clone();
                }
            }
            new
        })
        .collect();
    let kept = old.into_iter().filter(|c| {
        c["type"]
            .as_str()
            .is_some_and(|kind| cloud::CONDITIONS.contains(&kind))
            && !merged.iter().any(|new| new["type"] == c["type"])
    });
    let merged: Vec<Value> = merged.iter().cloned().chain(kept).collect();
    status["conditions"] = Value::Array(merged);
}

/// The simulated operator's memory: when it first saw each object (by uid), and when
/// each NodePool last gained or lost a node.
#[derive(Debug, Default)]
pub struct Operator {
    timing: Timing,
    seen: HashMap<String, Instant>,
    last_node: HashMap<String, Instant>,
    deleting: HashMap<String, Instant>,
    /// With the cloud side on: which deleted HostedClusters it has cleaned up after.
    /// `None`: no cloud side, the operator stands in for the control plane's identity
    /// check and default security group.
    cleanup: Option<cloud::CleanupGate>,
}

impl Operator {
    pub fn new(timing: Timing) -> Self {
        Self {
            timing,
            ..Self::default()
        }
    }

    /// The cloud side is on: a HostedCluster's finalizer waits for its cleanup as well,
    /// and the identity check and default security group are its.
    pub fn with_cleanup(mut self, gate: cloud::CleanupGate) -> Self {
        self.cleanup = Some(gate);
        self
    }

    /// Runs reconcile passes until the process ends.
    pub async fn run(mut self, shared: Shared) {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            shared.with(|store| self.reconcile(store));
        }
    }

    /// One pass over every HostedCluster and NodePool; whether anything was written.
    pub fn reconcile(&mut self, store: &mut Store) -> bool {
        let mut changed = false;
        for (key, object) in store.all_of(&HOSTED_CLUSTERS) {
            changed |= self.hosted_cluster(store, key.namespace.as_str(), &key.name, object);
        }
        for (key, object) in store.all_of(&NODE_POOLS) {
            changed |= self.node_pool(store, key.namespace.as_str(), &key.name, object);
        }
        changed
    }

    fn age(&mut self, object: &Value) -> Duration {
        let uid = meta(object)
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        self.seen.entry(uid).or_insert_with(Instant::now).elapsed()
    }

    /// Handles a deletion: the finalizer goes after the deletion delay. `Some(changed)`
    /// when the object is being deleted.
    fn deletion(
        &mut self,
        store: &mut Store,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        object: &Value,
    ) -> Option<bool> {
        if !meta(object).contains_key("deletionTimestamp") {
            return None;
        }
        let uid = meta(object)
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let since = *self
            .deleting
            .entry(uid.clone())
            .or_insert_with(Instant::now);
        if annotation(object, DELETION_HANGS) == Some("true")
            || since.elapsed() < self.timing.deletion
        {
            return Some(false);
        }
        let cleaned = |gate: &cloud::CleanupGate| gate.is_done(&uid);
        if rt.kind == "HostedCluster" && !self.cleanup.as_ref().is_none_or(cleaned) {
            return Some(false);
        }
        let mut next = object.clone();
        if let Some(finalizers) = next["metadata"]["finalizers"].as_array_mut() {
            finalizers.retain(|f| f != FINALIZER);
        }
        if rt.kind == "HostedCluster" {
            let _ = store.delete(&SECRETS, Some(ns), &format!("{name}-admin-kubeconfig"));
        }
        Some(store.update(rt, Some(ns), name, next, Part::Main).is_ok())
    }

    fn ensure_finalizer(
        store: &mut Store,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        object: &Value,
    ) -> bool {
        let has = meta(object)
            .get("finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|f| f == FINALIZER));
        if has {
            return false;
        }
        let mut next = object.clone();
        match next["metadata"]["finalizers"].as_array_mut() {
            Some(list) => list.push(json!(FINALIZER)),
            None => next["metadata"]["finalizers"] = json!([FINALIZER]),
        }
        if let Some(m) = next["metadata"].as_object_mut() {
            m.remove("resourceVersion");
        }
        store.update(rt, Some(ns), name, next, Part::Main).is_ok()
    }

    fn hosted_cluster(&mut self, store: &mut Store, ns: &str, name: &str, object: Value) -> bool {
        if let Some(changed) = self.deletion(store, &HOSTED_CLUSTERS, ns, name, &object) {
            return changed;
        }
        if Self::ensure_finalizer(store, &HOSTED_CLUSTERS, ns, name, &object) {
            return true;
        }
        let generation = meta(&object)
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let supported = install::validate_support(store, &object);
        let pull_secret = pull_secret::check(store, ns, &object);
        let blocked = Blocked {
            generation,
            pull_secret: pull_secret.as_ref().err(),
        };
        if let Err(message) = configuration::validate(store, ns, &object) {
            return self.refuse(store, ns, name, &object, &blocked, &message, supported);
        }
        if let Err(message) = supported {
            return self.unsupported(store, ns, name, &object, &blocked, &message);
        }
        if let Err(unavailable) = &pull_secret {
            if !self.has_control_plane(&object) {
                return self.without_pull_secret(store, ns, name, &object, generation, unavailable);
            }
        }
        let steps = (self.age(&object).as_millis() / self.timing.step.as_millis().max(1)) as usize;
        let failure = annotation(&object, FAIL_AVAILABLE).map(str::to_owned);
        let reached = steps.min(SEQUENCE.len());
        let mut conditions: Vec<Value> = SEQUENCE
            .iter()
            .enumerate()
            .map(|(i, kind)| {
                // The operator judges the spec at once; the rest comes with the rollout.
                if i < reached || VALIDITY.contains(kind) {
                    condition(kind, true, "AsExpected", "", generation)
                } else {
                    condition(
                        kind,
                        false,
                        "Reconciling",
                        "waiting for the previous conditions",
                        generation,
                    )
                }
            })
            .collect();
        for c in &mut conditions {
            if c["type"] == "ValidReleaseImage" {
                *c = match &pull_secret {
                    Ok(()) => condition(
                        "ValidReleaseImage",
                        true,
                        "AsExpected",
                        "Release image is valid",
                        generation,
                    ),
                    Err(unavailable) => pull_secret_not_found(unavailable, generation),
                };
            }
            // The control plane runs on without the pull secret, but the operator's
            // own reconciliation fails and its rollouts stay blocked.
            if let (Err(unavailable), Some("ReconciliationSucceeded")) =
                (&pull_secret, c["type"].as_str())
            {
                *c = reconciliation_failed(unavailable, generation);
            }
        }
        let api_up = reached
            > SEQUENCE
                .iter()
                .position(|c| *c == "KubeAPIServerAvailable")
                .unwrap_or(0);
        let done = steps > SEQUENCE.len();
        let available = done && failure.is_none();
        match &failure {
            Some(reason) if done => {
                conditions.push(condition(
                    "Available",
                    false,
                    reason,
                    &format!("the hosted control plane is not available: {reason}"),
                    generation,
                ));
                conditions.push(condition("Progressing", false, reason, "", generation));
                conditions.push(condition(
                    "Degraded",
                    true,
                    reason,
                    &format!("the hosted control plane is degraded: {reason}"),
                    generation,
                ));
            }
            _ => {
                conditions.push(condition(
                    "Available",
                    available,
                    if available {
                        "AsExpected"
                    } else {
                        "WaitingForAvailable"
                    },
                    "",
                    generation,
                ));
                conditions.push(condition(
                    "Progressing",
                    !available,
                    if available {
                        "AsExpected"
                    } else {
                        "Reconciling"
                    },
                    "",
                    generation,
                ));
                // Components roll out with unavailable replicas: the control plane
                // reports itself degraded until they are up, as the real one does.
                let rolling_out = !available && steps > 0;
                conditions.push(if rolling_out {
                    condition(
                        "Degraded",
                        true,
                        "UnavailableReplicas",
                        "kube-apiserver deployment has 1 unavailable replicas",
                        generation,
                    )
                } else {
                    condition("Degraded", false, "AsExpected", "", generation)
                });
            }
        }
        if let Err(unavailable) = &pull_secret {
            for c in &mut conditions {
                if c["type"] == "Progressing" {
                    *c = condition(
                        "Progressing",
                        false,
                        "Blocked",
                        &unavailable.message,
                        generation,
                    );
                }
            }
        }
        let mut stand_in_group = None;
        if on_aws(&object) {
            if self.cleanup.is_some() {
                // The cloud side reports it; until it does, the HostedCluster
                // controller's own.
                if find_condition(&object, cloud::VALID_IDENTITY_PROVIDER).is_none() {
                    conditions.push(identity_not_reported(generation));
                }
            } else if api_up {
                conditions.push(condition(
                    cloud::VALID_IDENTITY_PROVIDER,
                    true,
                    "AsExpected",
                    cloud::ALL_IS_WELL,
                    generation,
                ));
                conditions.push(condition(
                    cloud::SECURITY_GROUP_CREATED,
                    true,
                    "AsExpected",
                    cloud::ALL_IS_WELL,
                    generation,
                ));
                let uid = meta(&object)
                    .get("uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                stand_in_group = Some(stand_in_security_group(uid));
            } else {
                conditions.push(unknown(
                    cloud::VALID_IDENTITY_PROVIDER,
                    cloud::STATUS_UNKNOWN,
                    cloud::KUBE_API_SERVER_UNAVAILABLE,
                    generation,
                ));
            }
        }
        let mut status = object.get("status").cloned().unwrap_or_else(|| json!({}));
        let before = status.clone();
        set_conditions(&mut status, conditions);
        if let Some(id) = stand_in_group {
            let known = status
                .pointer("/platform/aws/defaultWorkerSecurityGroupID")
                .and_then(Value::as_str)
                .is_some_and(|known| !known.is_empty());
            if !known {
                status["platform"]["aws"]["defaultWorkerSecurityGroupID"] = json!(id);
            }
        }
        let mut changed = false;
        if api_up {
            let secret = format!("{name}-admin-kubeconfig");
            if store.get(&SECRETS, Some(ns), &secret).is_err() {
                let kubeconfig = format!(
                    "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: https://api.{name}.hypershift.local:6443\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: admin\ncurrent-context: {name}\nusers:\n- name: admin\n  user: {{}}\n"
                );
                let encoded =
                    base64::engine::general_purpose::STANDARD.encode(kubeconfig.as_bytes());
                let created = store.create(
                    &SECRETS,
                    Some(ns),
                    json!({"metadata": {"name": secret, "namespace": ns,
                                        "labels": {"hypershift.openshift.io/hosted-cluster": name}},
                           "type": "Opaque", "data": {"kubeconfig": encoded}}),
                );
                changed |= created.is_ok();
            }
            status["kubeconfig"] = json!({"name": secret});
        }
        if available {
            let image = object
                .pointer("/spec/release/image")
                .cloned()
                .unwrap_or(Value::Null);
            status["version"] = json!({"desired": {"image": image},
                                       "history": [{"state": "Completed", "image": image, "completionTime": now()}]});
            if before
                .pointer("/version/history/0/completionTime")
                .is_some()
            {
                status["version"] = before["version"].clone();
            }
        }
        if status == before {
            return changed;
        }
        let mut next = object.clone();
        next["status"] = status;
        store
            .update(&HOSTED_CLUSTERS, Some(ns), name, next, Part::Status)
            .is_ok()
            || changed
    }

    /// The operator refuses the configuration: `ValidConfiguration=False` with its
    /// message, nothing reconciled. A fixed configuration starts the rollout afresh.
    /// Without its pull secret the release is not valid either.
    #[allow(clippy::too_many_arguments)]
    fn refuse(
        &mut self,
        store: &mut Store,
        ns: &str,
        name: &str,
        object: &Value,
        blocked: &Blocked,
        message: &str,
        supported: Result<(), String>,
    ) -> bool {
        let generation = blocked.generation;
        if let Some(uid) = meta(object).get("uid").and_then(Value::as_str) {
            self.seen.remove(uid);
        }
        let mut conditions = vec![condition(
            "ValidConfiguration",
            false,
            "InvalidConfiguration",
            message,
            generation,
        )];
        if let Err(unsupported) = supported {
            conditions.push(condition(
                "SupportedHostedCluster",
                false,
                UNSUPPORTED,
                &unsupported,
                generation,
            ));
        }
        if let Some(unavailable) = blocked.pull_secret {
            conditions.push(pull_secret_not_found(unavailable, generation));
        }
        if on_aws(object) {
            conditions.push(identity_not_reported(generation));
        }
        conditions.extend([
            condition(
                "Available",
                false,
                "InvalidConfiguration",
                "the configuration is not valid",
                generation,
            ),
            condition("Progressing", false, "InvalidConfiguration", "", generation),
            condition("Degraded", false, "AsExpected", "", generation),
        ]);
        self.write_blocked(store, ns, name, object, conditions)
    }

    /// The operator's installation does not support the HostedCluster
    /// (`validateHostedClusterSupport`): `SupportedHostedCluster=False`, and the
    /// reconciliation is blocked (no control plane: Available=False with the Progressing
    /// message, Progressing=False `Blocked`) until the spec or the installation changes.
    /// Without its pull secret the release cannot be looked up, and that is what blocks
    /// Progressing first.
    fn unsupported(
        &mut self,
        store: &mut Store,
        ns: &str,
        name: &str,
        object: &Value,
        blocked: &Blocked,
        message: &str,
    ) -> bool {
        if let Some(uid) = meta(object).get("uid").and_then(Value::as_str) {
            self.seen.remove(uid);
        }
        let generation = blocked.generation;
        let release = blocked.pull_secret;
        let progressing = match release {
            Some(unavailable) => unavailable.message.clone(),
            None => format!("SupportedHostedCluster condition is false: {message}"),
        };
        let mut conditions = vec![
            condition("ValidConfiguration", true, "AsExpected", "", generation),
            condition(
                "SupportedHostedCluster",
                false,
                UNSUPPORTED,
                message,
                generation,
            ),
            condition(
                "Available",
                false,
                "WaitingForAvailable",
                &progressing,
                generation,
            ),
            condition("Progressing", false, "Blocked", &progressing, generation),
            condition("Degraded", false, "AsExpected", "", generation),
        ];
        if let Some(unavailable) = release {
            conditions.push(pull_secret_not_found(unavailable, generation));
        }
        if on_aws(object) {
            conditions.push(identity_not_reported(generation));
        }
        self.write_blocked(store, ns, name, object, conditions)
    }

    /// Whether the HostedCluster has a hosted control plane: the operator rolls one out
    /// (or rolled it out before the emulator restarted).
    fn has_control_plane(&self, object: &Value) -> bool {
        let uid = meta(object)
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.seen.contains_key(uid)
            || find_condition(object, "KubeAPIServerAvailable")
                .is_some_and(|c| c["status"] == "True")
    }

    /// The pull secret is missing (or has no `.dockerconfigjson`) and there is no
    /// control plane yet (see `pull_secret`): the configuration passes, the release
    /// cannot be looked up, the reconciliation fails, and no control plane is made —
    /// until the Secret is right, when the rollout starts.
    fn without_pull_secret(
        &mut self,
        store: &mut Store,
        ns: &str,
        name: &str,
        object: &Value,
        generation: i64,
        unavailable: &pull_secret::Unavailable,
    ) -> bool {
        let message = &unavailable.message;
        let mut conditions = vec![
            condition("ValidConfiguration", true, "AsExpected", "", generation),
            condition("SupportedHostedCluster", true, "AsExpected", "", generation),
            pull_secret_not_found(unavailable, generation),
            condition(
                "ReconciliationActive",
                true,
                "AsExpected",
                "Reconciliation active on resource",
                generation,
            ),
            reconciliation_failed(unavailable, generation),
            // `computeHostedClusterAvailability` without a HostedControlPlane: the
            // message of a blocked Progressing.
            condition(
                "Available",
                false,
                "WaitingForAvailable",
                message,
                generation,
            ),
            condition("Progressing", false, "Blocked", message, generation),
            unknown(
                "Degraded",
                cloud::STATUS_UNKNOWN,
                NO_CONTROL_PLANE,
                generation,
            ),
        ];
        if on_aws(object) {
            conditions.push(identity_not_reported(generation));
        }
        self.write_blocked(store, ns, name, object, conditions)
    }

    fn write_blocked(
        &mut self,
        store: &mut Store,
        ns: &str,
        name: &str,
        object: &Value,
        conditions: Vec<Value>,
    ) -> bool {
        let mut status = object.get("status").cloned().unwrap_or_else(|| json!({}));
        let before = status.clone();
        set_conditions(&mut status, conditions);
        if status == before {
            return false;
        }
        let mut next = object.clone();
        next["status"] = status;
        store
            .update(&HOSTED_CLUSTERS, Some(ns), name, next, Part::Status)
            .is_ok()
    }

    fn node_pool(&mut self, store: &mut Store, ns: &str, name: &str, object: Value) -> bool {
        if let Some(changed) = self.deletion(store, &NODE_POOLS, ns, name, &object) {
            return changed;
        }
        if Self::ensure_finalizer(store, &NODE_POOLS, ns, name, &object) {
            return true;
        }
        let cluster_name = object
            .pointer("/spec/clusterName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // The NodePool controller does nothing without its HostedCluster.
        let Ok(hosted_cluster) = store.get(&HOSTED_CLUSTERS, Some(ns), cluster_name) else {
            return false;
        };
        let aws = on_aws(&object);
        // `buildAWSSecurityGroups`: no machine template without the default security
        // group, so no machines are made or removed.
        let waiting_for_group = aws
            && hosted_cluster
                .pointer("/status/platform/aws/defaultWorkerSecurityGroupID")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
        let generation = meta(&object)
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let desired = object
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let stall = annotation(&object, STALL_AT).and_then(|n| n.parse::<i64>().ok());
        let current = object
            .pointer("/status/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let uid = meta(&object)
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let last = *self
            .last_node
            .entry(uid.clone())
            .or_insert_with(Instant::now);
        let target = match stall {
            _ if waiting_for_group => current,
            Some(limit) if desired > current => desired.min(limit.max(current)),
            _ => desired,
        };
        if waiting_for_group {
            // The first machine comes a node's time after the template can be made.
            self.last_node.insert(uid.clone(), Instant::now());
        }
        let mut replicas = current;
        if replicas != target && last.elapsed() >= self.timing.node {
            replicas += (target - replicas).signum();
            self.last_node.insert(uid, Instant::now());
        }
        let ready = replicas == desired;
        let stalled = stall.is_some_and(|limit| limit < desired && replicas >= limit);
        let (reason, message) = if ready {
            ("AsExpected", String::new())
        } else if stalled {
            (
                "MachinesStalled",
                format!(
                    "{replicas} of {desired} machines are ready; the rest cannot be provisioned"
                ),
            )
        } else {
            (
                "WaitingForNodes",
                format!("{replicas} of {desired} nodes are ready"),
            )
        };
        let mut conditions = if waiting_for_group && replicas == 0 {
            // `setAllMachinesReadyCondition` and `setAllNodesHealthyCondition` with no
            // machines; Ready comes from a MachineDeployment, which does not exist.
            let (reason, message) = if desired == 0 {
                ("AsExpected", "NodePool set to no replicas")
            } else {
                ("NotFound", "No Machines are created")
            };
            let mut without_machines = vec![
                condition("AllMachinesReady", false, reason, message, generation),
                condition("AllNodesHealthy", false, reason, message, generation),
            ];
            without_machines.extend(find_condition(&object, "Ready").cloned());
            without_machines
        } else {
            vec![
                condition("AllMachinesReady", ready, reason, &message, generation),
                condition("AllNodesHealthy", ready, reason, &message, generation),
                condition("Ready", ready, reason, &message, generation),
            ]
        };
        if aws {
            conditions.push(if waiting_for_group {
                condition(
                    SECURITY_GROUP_AVAILABLE,
                    false,
                    SECURITY_GROUP_NOT_READY,
                    WAITING_FOR_SECURITY_GROUP,
                    generation,
                )
            } else {
                condition(
                    SECURITY_GROUP_AVAILABLE,
                    true,
                    "AsExpected",
                    "NodePool has a default security group",
                    generation,
                )
            });
        }
        let mut status = object.get("status").cloned().unwrap_or_else(|| json!({}));
        let before = status.clone();
        status["replicas"] = json!(replicas);
        set_conditions(&mut status, conditions);
        if status == before {
            return false;
        }
        let mut next = object.clone();
        next["status"] = status;
        store
            .update(&NODE_POOLS, Some(ns), name, next, Part::Status)
            .is_ok()
    }
}
