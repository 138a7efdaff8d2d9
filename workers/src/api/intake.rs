//! Starting workflows: from the request/reply API, the submit stream and parents.
//!
//! Guarantees: a start is answered only after it is committed in Postgres. The same id
//! with the same input is `already_started`; with another input it is a `conflict`.
//! Secret fields are sealed before anything is recorded.

use std::sync::Arc;

use chrono::SubsecRound;
use hcpflow_engine::event::{HistoryEvent, WorkflowStarted};
use hcpflow_engine::{
    canonical, input_purpose, run_workflow_task, Binding, Event, Keyring, OsEntropy, SealKeys,
    Sealed, Seq, TenantId, Timestamp, WorkflowId, WorkflowStatus,
};
use hcpflow_eventstore::NewWorkflow;
use rand::RngCore;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::api::views::store_error;
use crate::runtime::decide::add_commands;
use crate::runtime::journal::{Journal, Write};
use hcpflow_engine::Catalog;
use hcpflow_hypershift::admission::AdmissionPolicy;
use hcpflow_hypershift::aws_accounts::AwsAccounts;
use hcpflow_hypershift::pull_secret_ref::SecretRefPolicy;
use hcpflow_protocol::{ApiError, ErrorCode, StartRequest, StartStatus};

#[derive(Debug)]
pub struct Intake {
    pub journal: Arc<Journal>,
    pub catalog: Arc<Catalog>,
    /// The seal keys in force (reloaded when their files change).
    pub seal_keys: Option<Arc<SealKeys>>,
    /// What this server lets a start ask of the management cluster.
    pub admission: AdmissionPolicy,
    /// Which pull secret references each tenant may name.
    pub secret_refs: SecretRefPolicy,
    /// Which AWS accounts each tenant may name.
    pub aws_accounts: AwsAccounts,
}

/// Which verb asks for a start: `destroy` is the only way to start a destructive type,
/// so that NATS permissions can give it to admins alone; `Child` is a parent's start of
/// its child, which only the server's processes can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartVerb {
    Start,
    Destroy,
    Child,
}

impl Intake {
    /// Validates, seals and records a start for `caller`'s tenant (a child's is its
    /// parent's).
    pub async fn start(
        &self,
        caller: &TenantId,
        verb: StartVerb,
        request: StartRequest,
    ) -> Result<(WorkflowId, StartStatus), ApiError> {
        let info = self.catalog.info(&request.workflow_type).ok_or_else(|| {
            ApiError::new(
                ErrorCode::UnknownWorkflowType,
                format!(
                    "unknown workflow_type {:?}; this server runs {}",
                    request.workflow_type,
                    self.catalog.names().join(", ")
                ),
            )
        })?;
        match (info.destructive, verb) {
            (true, StartVerb::Start) => {
                return Err(ApiError::invalid(format!(
                    "{} is started with the destroy verb (<prefix>.api.v1[.<tenant>].destroy), which NATS permissions give to admins",
                    request.workflow_type
                )))
            }
            (false, StartVerb::Destroy) => {
                return Err(ApiError::invalid(format!(
                    "destroy starts a destroying workflow type ({}), not {}",
                    self.catalog.destructive_names().join(", "),
                    request.workflow_type
                )))
            }
            _ => {}
        }
        if has_sealed_secret(&request.input, &info.secret_pointers) {
            return self.sealed_resubmission(caller, &request).await;
        }
        let id = match &request.workflow_id {
            Some(id) => id.clone(),
            None => generated_id(),
        };
        let tenant = self.check_child_claims(caller, verb, &id, &request).await?;
        (info.validate)(&request.input)
            .map_err(|problems| ApiError::invalid(problems.join("; ")))?;
        let beyond = self.admission.check(&request.workflow_type, &request.input);
        if !beyond.is_empty() {
            return Err(ApiError::invalid(beyond.join("; ")));
        }
        let mut not_granted =
            self.secret_refs
                .check(tenant.as_str(), &request.workflow_type, &request.input);
        not_granted.extend(self.aws_accounts.check(
            tenant.as_str(),
            &request.workflow_type,
            &request.input,
        ));
        if !not_granted.is_empty() {
            return Err(ApiError::new(ErrorCode::Forbidden, not_granted.join("; ")));
        }
        let concurrency_key = match &info.concurrency_key_pointer {
            Some(pointer) => Some(
                request
                    .input
                    .pointer(pointer)
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ApiError::invalid(format!("input{pointer}: a string is required"))
                    })?
                    .to_owned(),
            ),
            None => None,
        };
        if let (true, Some(name)) = (info.claims_cluster_name, &concurrency_key) {
            self.check_name_is_free(&tenant, name, &id).await?;
        }
        if let (true, Some(name)) = (info.acts_on_cluster_name, &concurrency_key) {
            self.check_cluster_is_the_tenants(&tenant, name).await?;
        }
        // One keyring for the digest and the seal, even if the keys reload meanwhile.
        let keyring = self.seal_keys.as_ref().map(|keys| keys.current());
        let digest = digest(keyring.as_deref(), &request.workflow_type, &request.input);
        let input = seal_fields(
            request.input,
            &info.secret_pointers,
            keyring.as_deref(),
            &id,
        )?;

        let started = WorkflowStarted {
            workflow_type: request.workflow_type.clone(),
            input,
            concurrency_key: concurrency_key.clone(),
            parent: request.parent.clone(),
        };
        let now = chrono::Utc::now().trunc_subsecs(3);
        let write = self.first_step(&id, started, concurrency_key.is_some(), now);
        let workflow = NewWorkflow {
            workflow_type: request.workflow_type,
            status: WorkflowStatus::Running,
            concurrency_key,
            parent_id: request.parent.map(|p| p.workflow_id),
            input_digest: Some(digest.clone()),
            events_subject: Some(self.journal.outgoing.subjects.events(&tenant, id.as_str())),
            tenant: tenant.clone(),
        };
        match self.journal.create(&workflow, &id, write, now).await {
            Ok(()) => Ok((id, StartStatus::Started)),
            // Another tenant's workflow: say no more than that the id is taken.
            Err(hcpflow_eventstore::Error::AlreadyExists { tenant: owner, .. })
                if owner != tenant.as_str() =>
            {
                Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!("workflow id {id} is taken"),
                ))
            }
            Err(hcpflow_eventstore::Error::AlreadyExists { input_digest, .. })
                if input_digest.as_deref() == Some(&digest) =>
            {
                Ok((id, StartStatus::AlreadyStarted))
            }
            Err(hcpflow_eventstore::Error::AlreadyExists { .. }) => Err(ApiError::new(
                ErrorCode::Conflict,
                format!("workflow {id} already exists with another type or input"),
            )),
            Err(other) => Err(store_error(other)),
        }
    }

    /// A create of a name whose cluster is live is refused, unless it is this same
    /// create again (an idempotent resubmission). Two creates racing past this check
    /// are still serialized by the concurrency key, and the loser's registration fails.
    async fn check_name_is_free(
        &self,
        tenant: &TenantId,
        name: &str,
        id: &WorkflowId,
    ) -> Result<(), ApiError> {
        match self.journal.store.live_cluster(name).await.map_err(store_error)? {
            // Another tenant's cluster: nothing about it but that the name is taken.
            Some(live) if &live.tenant != tenant => Err(ApiError::new(
                ErrorCode::Conflict,
                format!("cluster name {name} is taken"),
            )),
            Some(live) if &live.create_workflow_id != id => Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "cluster {name} already exists (infra id {}, state {}, created by workflow {}); destroy it first",
                    live.infra_id,
                    live.state.as_str(),
                    live.create_workflow_id
                ),
            )),
            _ => Ok(()),
        }
    }

    /// A workflow acting on a cluster (scale, destroy) acts only on its tenant's: another
    /// tenant's cluster is as good as absent.
    async fn check_cluster_is_the_tenants(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<(), ApiError> {
        match self
            .journal
            .store
            .live_cluster(name)
            .await
            .map_err(store_error)?
        {
            Some(live) if &live.tenant != tenant => Err(ApiError::new(
                ErrorCode::NotFound,
                format!("cluster {name} not found"),
            )),
            _ => Ok(()),
        }
    }

    /// The start's events. Where this process runs workflow code and no concurrency key
    /// can hold the start back, the workflow's first commands are recorded with the
    /// start (one commit, no extra hop); otherwise a workflow task wakes a worker.
    fn first_step(
        &self,
        id: &WorkflowId,
        started: WorkflowStarted,
        keyed: bool,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Write {
        let mut write = Write {
            events: vec![started.into()],
            ..Write::default()
        };
        if let (Some(catalog), false) = (&self.journal.catalog, keyed) {
            let history = [HistoryEvent {
                seq: Seq::FIRST,
                recorded_at: Timestamp::from_millis(
                    u64::try_from(now.timestamp_millis()).unwrap_or(0),
                ),
                event: write.events[0].clone(),
            }];
            if let Ok(outcome) =
                run_workflow_task(catalog.registry(), id, &history, Box::new(OsEntropy))
            {
                write.status = Some(outcome.status);
                add_commands(&self.journal.outgoing, id, &history, &outcome, &mut write);
                return write;
            }
            // Blocked from the start: let the workflow worker record why.
        }
        write
            .messages
            .push(self.journal.outgoing.workflow_task(id, Seq::FIRST));
        write
    }

    /// A start that says it is a child must be the one its parent's history started
    /// (`ChildStarted` at that seq, with this id, type and input); a start that does not
    /// say so may not take an id a parent's history reserved for its child. Neither claim
    /// is taken on trust, whatever subject the start came on.
    ///
    /// Returns the tenant the workflow belongs to: the caller's, or for a child its
    /// parent's.
    async fn check_child_claims(
        &self,
        caller: &TenantId,
        verb: StartVerb,
        id: &WorkflowId,
        request: &StartRequest,
    ) -> Result<TenantId, ApiError> {
        match (verb, &request.parent) {
            (StartVerb::Child, None) => {
                return Err(ApiError::invalid("a child start names its parent"))
            }
            (StartVerb::Start | StartVerb::Destroy, Some(_)) => return Err(ApiError::invalid(
                "parent: only a parent workflow starts its children (the server sets this field)",
            )),
            _ => {}
        }
        let Some(link) = &request.parent else {
            // Whether or not its parent exists yet: taken first, it would be the
            // result of a child its parent starts later.
            if reserved_for_children(id) {
                return Err(ApiError::invalid(format!(
                    "workflow_id {id}: ids ending in -c<number> are reserved for child workflows"
                )));
            }
            return Ok(caller.clone());
        };
        let (parent, seq) = (link.workflow_id.clone(), link.seq);
        // Only the event at `seq` matters: one row, not the parent's whole history.
        let page = match self.journal.store.read_history(&parent, seq, 1).await {
            Ok(page) => page.events,
            Err(hcpflow_eventstore::Error::NotFound(_)) => Vec::new(),
            Err(error) => return Err(store_error(error)),
        };
        let event = page
            .first()
            .filter(|e| e.seq == seq)
            .map(|e| e.to_history_event())
            .transpose()
            .map_err(store_error)?;
        let started = match &event {
            Some(HistoryEvent {
                event: Event::ChildStarted(started),
                ..
            }) if started.child_id == *id => Some(started),
            _ => None,
        };
        match started {
            Some(started)
                if started.workflow_type == request.workflow_type
                    && started.input_digest == hcpflow_engine::event::digest(&request.input) =>
            {
                // A child belongs to its parent's tenant.
                match self.journal.store.get_workflow(&parent).await {
                    Ok(summary) => Ok(summary.tenant),
                    Err(error) => Err(store_error(error)),
                }
            }
            _ => Err(ApiError::invalid(format!(
                "parent: workflow {parent} did not start {id} at seq {seq} with this type and input"
            ))),
        }
    }

    /// A start whose secret field already holds a sealed value. Clients send secrets,
    /// never sealed values (they could only have copied one from a history, perhaps
    /// another cluster's); the one exception is the identical resubmission of a start
    /// already recorded — same id, type and input, sealed bytes included — which is
    /// answered `already_started`.
    async fn sealed_resubmission(
        &self,
        caller: &TenantId,
        request: &StartRequest,
    ) -> Result<(WorkflowId, StartStatus), ApiError> {
        let refused = || {
            ApiError::invalid(
                "input: a secret field holds a sealed value; send the secret itself (the server seals it for this workflow)",
            )
        };
        let id = request.workflow_id.clone().ok_or_else(refused)?;
        match self.journal.store.get_workflow(&id).await {
            Ok(summary) if &summary.tenant == caller => {}
            Ok(_) | Err(hcpflow_eventstore::Error::NotFound(_)) => return Err(refused()),
            Err(error) => return Err(store_error(error)),
        }
        let page = match self.journal.store.read_history(&id, Seq::FIRST, 1).await {
            Ok(page) => page,
            Err(hcpflow_eventstore::Error::NotFound(_)) => return Err(refused()),
            Err(error) => return Err(store_error(error)),
        };
        let first = page.events.first().map(|event| event.to_history_event());
        match first {
            Some(Ok(HistoryEvent {
                event: Event::WorkflowStarted(started),
                ..
            })) if started.workflow_type == request.workflow_type
                && started.input == request.input =>
            {
                Ok((id, StartStatus::AlreadyStarted))
            }
            _ => Err(refused()),
        }
    }
}

/// Whether `id` has the form of a child's id (`hcpflow_engine::child_id`: `<parent>-c<seq>`,
/// or for a long parent id a hashed prefix before `-c<seq>`).
fn reserved_for_children(id: &WorkflowId) -> bool {
    id.as_str()
        .rsplit_once("-c")
        .is_some_and(|(parent, seq)| !parent.is_empty() && seq.parse::<u64>().is_ok_and(|n| n >= 1))
}

/// Whether a secret field of `input` holds a value in sealed form.
fn has_sealed_secret(input: &Value, pointers: &[String]) -> bool {
    pointers.iter().any(|pointer| {
        input
            .pointer(pointer)
            .and_then(Value::as_str)
            .is_some_and(Sealed::<String>::looks_sealed)
    })
}

/// Digest of type and plaintext input, keyed when a seal key is configured so a digest of
/// a secret-bearing input reveals nothing.
fn digest(keyring: Option<&Keyring>, workflow_type: &str, input: &Value) -> String {
    let bytes = canonical::to_vec(&json!({"workflow_type": workflow_type, "input": input}));
    match keyring {
        Some(keyring) => keyring.keyed_digest(&bytes),
        None => hcpflow_engine::lower_hex::lower_hex(&Sha256::digest(&bytes)),
    }
}

/// Replaces the string at each JSON pointer with its wire form sealed for workflow `id`
/// and that field, so that it opens nowhere else; absent or null fields are skipped; a
/// value already in sealed form, or anything but a string, is an `invalid_request`.
pub fn seal_fields(
    mut input: Value,
    pointers: &[String],
    keyring: Option<&Keyring>,
    id: &WorkflowId,
) -> Result<Value, ApiError> {
    for pointer in pointers {
        let Some(field) = input.pointer_mut(pointer) else {
            continue;
        };
        let Value::String(secret) = field else {
            if field.is_null() {
                continue;
            }
            return Err(ApiError::invalid(format!(
                "input{pointer}: a string is required"
            )));
        };
        if Sealed::<String>::looks_sealed(secret) {
            return Err(ApiError::invalid(format!(
                "input{pointer}: a sealed value is not accepted; send the secret itself"
            )));
        }
        let keyring = keyring.ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unavailable,
                "no seal key is configured (HCPFLOW_SEAL_KEY); secrets cannot be accepted",
            )
        })?;
        let sealed = keyring
            .seal(&*secret, &Binding::new(id, &input_purpose(pointer)))
            .map_err(|e| ApiError::internal(format!("sealing input{pointer}: {e}")))?;
        *field = Value::String(sealed.to_wire());
    }
    Ok(input)
}

fn generated_id() -> WorkflowId {
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    WorkflowId::new(format!(
        "wf-{}",
        hcpflow_engine::lower_hex::lower_hex(&bytes)
    ))
    .unwrap_or_else(|_| unreachable!("hex ids are valid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_child_id_is_reserved() {
        let short = WorkflowId::new("p1").unwrap();
        let long = WorkflowId::new("p".repeat(120)).unwrap();
        for parent in [short, long] {
            let child = hcpflow_engine::child_id(&parent, Seq::new(7).unwrap());
            assert!(reserved_for_children(&child), "{child}");
        }
        for free in ["wf-c", "c12", "x-c0", "x-cx1", "create-foo-20261125-ab12"] {
            assert!(
                !reserved_for_children(&WorkflowId::new(free).unwrap()),
                "{free}"
            );
        }
    }

    const KEY: &str = "dev:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    fn id() -> WorkflowId {
        WorkflowId::new("create-demo").unwrap()
    }

    #[test]
    fn secret_fields_are_sealed_for_their_workflow_and_open_only_with_the_key() {
        let keyring = Keyring::parse(KEY).unwrap();
        let input = json!({"name": "demo", "pull_secret": "canary-value", "nested": {"ssh": "key-canary"}, "none": null});
        let pointers = vec![
            "/pull_secret".to_owned(),
            "/nested/ssh".to_owned(),
            "/none".to_owned(),
            "/absent".to_owned(),
        ];
        let sealed = seal_fields(input, &pointers, Some(&keyring), &id()).unwrap();
        assert!(!sealed.to_string().contains("canary"), "{sealed}");
        assert_eq!(sealed["name"], "demo");
        let wire: Sealed<String> = serde_json::from_value(sealed["pull_secret"].clone()).unwrap();
        let here = input_purpose("/pull_secret");
        assert_eq!(
            keyring.open(&wire, &Binding::new(&id(), &here)).unwrap(),
            "canary-value"
        );
        let elsewhere = WorkflowId::new("create-other").unwrap();
        assert!(keyring
            .open(&wire, &Binding::new(&elsewhere, &here))
            .is_err());
    }

    #[test]
    fn a_sealed_value_from_a_client_is_refused() {
        // Copied from another cluster's history: sealing it "again" would keep it, and
        // the create's activity would unseal another cluster's pull secret.
        let keyring = Keyring::parse(KEY).unwrap();
        let pointers = vec!["/pull_secret".to_owned()];
        let other = WorkflowId::new("create-other").unwrap();
        let theirs = seal_fields(
            json!({"pull_secret": "their-secret"}),
            &pointers,
            Some(&keyring),
            &other,
        )
        .unwrap();
        assert!(has_sealed_secret(&theirs, &pointers));
        let refused = seal_fields(theirs, &pointers, Some(&keyring), &id()).unwrap_err();
        assert_eq!(refused.code, ErrorCode::InvalidRequest);
        assert!(refused.message.contains("sealed value"), "{refused}");
    }

    #[test]
    fn secrets_without_a_key_or_of_the_wrong_type_are_refused() {
        let pointers = vec!["/pull_secret".to_owned()];
        let no_key = seal_fields(json!({"pull_secret": "x"}), &pointers, None, &id()).unwrap_err();
        assert_eq!(no_key.code, ErrorCode::Unavailable);
        let keyring = Keyring::parse(KEY).unwrap();
        let wrong =
            seal_fields(json!({"pull_secret": 7}), &pointers, Some(&keyring), &id()).unwrap_err();
        assert_eq!(wrong.code, ErrorCode::InvalidRequest);
    }
}
