//! The activity worker: runs one attempt of an activity with its idempotency key,
//! heartbeats while it runs, records the outcome, then acks.
//!
//! Guarantees: an attempt runs what the history scheduled, never what a message says;
//! one runner at a time holds an attempt (a claim under a lease it extends while it
//! runs; a second runner backs off until the lease runs out) and only the holder's
//! outcome is recorded, once. An activity may still run more than once over time (a
//! runner that dies mid-attempt stops extending its claim, and the task comes back),
//! which its idempotency key makes safe.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use hcpflow_engine::event::{
    ActivityCompleted, ActivityFailed, ResourceCreated, ResourceDeleted, ResourceObserved,
};
use hcpflow_engine::history::{accepts_activity_outcome, awaited_attempt, ActivityTask};
use hcpflow_engine::{ActivityFailure, Event, Noted, RetryDecision, Seq, Timestamp};
use hcpflow_eventstore::{
    AttemptClaim, Claimed, LedgerAction, LedgerEntry, NewTimer, OutboxMessage, TimerKind,
};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use crate::catalog::activities::{ActivityInput, ActivityRegistry, Ledger};
use crate::runtime::dead_letter::DeadLetters;
use crate::runtime::eager::{
    claim_of, LocalTask, Place, BACKLOG_EXTEND_BELOW, BACKLOG_TICK, LOCAL_LEASE,
};
use crate::runtime::journal::{to_datetime, Journal, Write};
use crate::runtime::nats::ACK_WAIT;
use crate::runtime::nats::{serve_tasks, Deliveries, SHUTDOWN_GRACE};
use crate::runtime::task_error::{settle, TaskError};
use hcpflow_protocol::ActivityTaskMessage;

#[derive(Debug)]
pub struct ActivityWorker {
    pub journal: Arc<Journal>,
    pub activities: Arc<ActivityRegistry>,
    pub concurrency: usize,
    /// The worker's slots, shared by tasks from NATS and eager runs (`eager.rs`).
    pub slots: Arc<Semaphore>,
    /// Names the runs of tasks from NATS, for their claims.
    pub runners: Runners,
    /// The longest a local task waits in the backlog for a slot.
    pub backlog_wait: Duration,
}

/// Names for runs: unique per run, so two runs of one attempt in one process are told
/// apart as well as runs in different processes.
#[derive(Debug)]
pub struct Runners {
    prefix: String,
    next: AtomicU64,
}

impl Runners {
    pub fn new(prefix: String) -> Self {
        Self {
            prefix,
            next: AtomicU64::new(1),
        }
    }

    fn claim(&self, task: &ActivityTaskMessage) -> AttemptClaim {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        AttemptClaim {
            workflow_id: task.workflow_id.clone(),
            scheduled_seq: task.scheduled_seq,
            attempt: task.attempt,
            runner: format!("{}-{n}", self.prefix),
        }
    }
}

/// How soon a task that failed for a passing reason is tried again.
const TASK_RETRY: Duration = Duration::from_secs(1);

/// Puts a task back for NATS to deliver again after `pause`.
async fn defer(message: &async_nats::jetstream::Message, pause: Duration) {
    let _ = message
        .ack_with(async_nats::jetstream::AckKind::Nak(Some(pause)))
        .await;
}

/// A heartbeat task, stopped when its run ends — however it ends, a panic included
/// (a heartbeat left running would hold the attempt's claim for ever).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long until `at`, if it is still ahead.
fn not_yet(at: hcpflow_engine::Timestamp) -> Option<Duration> {
    let now = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    (at.as_millis() > now).then(|| Duration::from_millis(at.as_millis() - now))
}

/// What a run whose claim was taken over ends with (its outcome is not recorded).
fn lost_claim(task: &ActivityTask) -> TaskError {
    TaskError::LostClaim {
        id: task.workflow_id.clone(),
        seq: task.scheduled_seq.get(),
        attempt: task.attempt,
    }
}

/// A local task in the backlog, waiting for a slot.
struct Waiting {
    task: ActivityTask,
    message: OutboxMessage,
    /// Its weight in the backlog's budget, given back when it leaves.
    _room: OwnedSemaphorePermit,
    since: tokio::time::Instant,
    /// Until when its claim is held, at the latest (as this process last extended it).
    leased_until: tokio::time::Instant,
}

impl ActivityWorker {
    /// Runs tasks from NATS and the `local` tasks steps of this process hand over, until
    /// shutdown; then waits for every run in flight.
    pub async fn run(
        self: Arc<Self>,
        consumer: async_nats::jetstream::consumer::PullConsumer,
        local: mpsc::UnboundedReceiver<LocalTask>,
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let deliveries = Deliveries::new(consumer, "activity tasks");
        let eager = tokio::spawn(self.clone().run_local(local, shutdown.clone()));
        let slots = (self.slots.clone(), self.concurrency);
        let served = serve_tasks(
            deliveries,
            slots,
            shutdown,
            DeadLetters::new(
                self.journal.js.clone(),
                &self.journal.outgoing.subjects,
                crate::runtime::dead_letter::TASKS,
                self.journal.metrics.clone(),
            ),
            move |message, task| {
                let worker = self.clone();
                async move { worker.handle(message, task).await }
            },
        )
        .await;
        if let Err(error) = eager.await {
            tracing::warn!(%error, "the runner of local activities ended abnormally");
        }
        served
    }

    /// Runs the tasks steps of this process keep for themselves until shutdown: one with
    /// a slot at once; one from the backlog once a slot frees, in the order they came,
    /// or — after `backlog_wait` without one — through NATS. Only running tasks have a
    /// task (and its future's memory) of their own: thousands waiting cost their
    /// messages.
    async fn run_local(
        self: Arc<Self>,
        mut local: mpsc::UnboundedReceiver<LocalTask>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut running = tokio::task::JoinSet::new();
        let mut backlog: VecDeque<Waiting> = VecDeque::new();
        // One wait for a slot at a time, kept across turns of the loop so that it keeps
        // its place among the waiters (tasks from NATS wait for the same slots).
        let mut next_slot: Option<
            Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>,
        > = None;
        let mut tick = tokio::time::interval(BACKLOG_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if next_slot.is_none() && !backlog.is_empty() {
                let slots = self.slots.clone();
                next_slot = Some(Box::pin(async move { slots.acquire_owned().await.ok() }));
            }
            tokio::select! {
                _ = shutdown.changed() => break,
                Some(_) = running.join_next(), if !running.is_empty() => {}
                task = local.recv() => {
                    let Some(LocalTask { task, message, place }) = task else { break };
                    match place {
                        Place::Slot(slot) => {
                            let worker = self.clone();
                            running.spawn(async move { worker.handle_local(task, message, slot).await });
                        }
                        Place::Backlog(room) => {
                            // The step's commit took the claim a moment ago.
                            let now = tokio::time::Instant::now();
                            backlog.push_back(Waiting {
                                task,
                                message,
                                _room: room,
                                since: now,
                                leased_until: now + LOCAL_LEASE,
                            });
                        }
                    }
                }
                slot = async {
                    match next_slot.as_mut() {
                        Some(wait) => wait.await,
                        None => std::future::pending().await,
                    }
                }, if next_slot.is_some() => {
                    next_slot = None;
                    let Some(slot) = slot else { continue };
                    // Every slot free now goes to the backlog's oldest, in one turn: a turn
                    // of this loop per slot would make it the bottleneck of a busy process.
                    let free = std::iter::from_fn(|| self.slots.clone().try_acquire_owned().ok());
                    for slot in std::iter::once(slot).chain(free) {
                        let Some(waiting) = backlog.pop_front() else { break };
                        // Its room in the backlog is given back; the slot is its place now.
                        let Waiting { task, message, .. } = waiting;
                        let worker = self.clone();
                        running.spawn(async move { worker.handle_local(task, message, slot).await });
                    }
                }
                _ = tick.tick(), if !backlog.is_empty() => {
                    self.keep_backlog_claimed(&mut backlog, &mut running).await;
                }
            }
        }
        // Tasks still waiting go to NATS for another process; the runs in flight finish
        // and record their outcomes within the deadline the tasks from NATS have (one
        // still running then is dropped: its claim lapses, and the sweeper publishes
        // its task).
        local.close();
        let waiting = backlog.into_iter().map(|w| (w.task, w.message));
        let queued = std::iter::from_fn(|| local.try_recv().ok()).map(|l| (l.task, l.message));
        for (task, message) in waiting.chain(queued) {
            self.journal.hand_to_nats(&task, &message).await;
        }
        let finished = async { while running.join_next().await.is_some() {} };
        if tokio::time::timeout(SHUTDOWN_GRACE, finished)
            .await
            .is_err()
        {
            tracing::warn!(
                running = running.len(),
                "local activities still running at the shutdown deadline are left to other workers"
            );
        }
    }

    /// The backlog's turn of the clock: a task that waited `backlog_wait`, or whose claim
    /// has less than half a lease left, goes to NATS; the claims of those with less than
    /// three quarters left are extended, all in one statement (a claim found taken over
    /// drops its task: its new holder runs it).
    async fn keep_backlog_claimed(
        &self,
        backlog: &mut VecDeque<Waiting>,
        running: &mut tokio::task::JoinSet<()>,
    ) {
        let Some(runner) = self.journal.eager_claimer() else {
            return;
        };
        let now = tokio::time::Instant::now();
        let (leave, stay): (VecDeque<Waiting>, VecDeque<Waiting>) =
            std::mem::take(backlog).into_iter().partition(|waiting| {
                now.duration_since(waiting.since) >= self.backlog_wait
                    || waiting.leased_until.saturating_duration_since(now) < LOCAL_LEASE / 2
            });
        *backlog = stay;
        for waiting in leave {
            self.journal.metrics.backlog_handed_to_nats.inc();
            let journal = self.journal.clone();
            running.spawn(async move {
                journal.hand_to_nats(&waiting.task, &waiting.message).await;
            });
        }
        let due: Vec<usize> = (0..backlog.len())
            .filter(|&i| {
                backlog[i].leased_until.saturating_duration_since(now) < BACKLOG_EXTEND_BELOW
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let claims: Vec<AttemptClaim> = due
            .iter()
            .map(|&i| claim_of(&backlog[i].task, runner.clone()))
            .collect();
        match self
            .journal
            .store
            .extend_waiting_claims(&runner, &claims, LOCAL_LEASE)
            .await
        {
            Ok(held) => {
                let mut lost = Vec::new();
                for (&i, held) in due.iter().zip(held) {
                    if held {
                        backlog[i].leased_until = now + LOCAL_LEASE;
                    } else {
                        lost.push(i);
                    }
                }
                for i in lost.into_iter().rev() {
                    if let Some(waiting) = backlog.remove(i) {
                        tracing::warn!(workflow_id = %waiting.task.workflow_id, seq = waiting.task.scheduled_seq.get(), "a waiting local activity's claim was taken over; its new holder runs it");
                    }
                }
            }
            // Those claims keep their leases; the next turn sends the tasks to NATS in time.
            Err(error) => {
                tracing::warn!(%error, "extending the claims of waiting local activities failed")
            }
        }
    }

    /// Runs a task a step of this process claimed for itself: the claim on its attempt
    /// is extended while the attempt runs and ends with the append that records the
    /// outcome. If recording fails, the task is published for another runner, then the
    /// claim given up (should the publish fail, the sweeper finds the lapsed claim).
    async fn handle_local(
        &self,
        task: ActivityTask,
        message: OutboxMessage,
        permit: OwnedSemaphorePermit,
    ) {
        let Some(claimer) = self.journal.eager_claimer() else {
            return;
        };
        // The step that scheduled the task claimed its attempt for this process, in its
        // commit.
        let claim = claim_of(&task, claimer);
        let mut beat = AbortOnDrop({
            let journal = self.journal.clone();
            let claim = claim.clone();
            tokio::spawn(async move {
                loop {
                    // A third of a lease: a task from the backlog starts with at least half
                    // a lease left (`BACKLOG_TICK`).
                    tokio::time::sleep(LOCAL_LEASE / 3).await;
                    match journal
                        .store
                        .extend_attempt_claim(&claim, LOCAL_LEASE)
                        .await
                    {
                        Ok(true) => {}
                        Ok(false) => {
                            tracing::warn!(workflow_id = %claim.workflow_id, seq = claim.scheduled_seq.get(), "lost the claim on a local activity attempt; another runner has it, so this run stops");
                            return;
                        }
                        Err(error) => {
                            tracing::warn!(workflow_id = %claim.workflow_id, %error, "extending a local attempt's claim failed")
                        }
                    }
                }
            })
        });
        self.journal.metrics.eager_tasks.inc();
        // The heartbeat ends only when a claim is lost: the attempt is stopped then.
        let outcome = tokio::select! {
            outcome = self.attempt_guarded(&task, Some(claim.clone()), Some(permit)) => outcome,
            _ = &mut beat.0 => Err(lost_claim(&task)),
        };
        drop(beat);
        match outcome {
            // Lost: another runner took the attempt and records it.
            Ok(()) | Err(TaskError::LostClaim { .. }) => {}
            Err(error) => {
                tracing::warn!(workflow_id = %task.workflow_id, seq = task.scheduled_seq.get(), %error, "recording a local activity failed; its task goes to NATS");
                self.journal.hand_to_nats(&task, &message).await;
            }
        }
    }

    async fn handle(&self, message: async_nats::jetstream::Message, named: ActivityTaskMessage) {
        let message = Arc::new(message);
        let Some((task, claim)) = self.claimed_task(&message, &named).await else {
            return;
        };
        let outcome = self.run_while_claimed(&message, &task, &claim).await;
        settle(
            &self.journal,
            &message,
            &task.workflow_id,
            outcome,
            TASK_RETRY,
        )
        .await;
    }

    /// The attempt a message names, claimed for this runner, when it is to run now;
    /// otherwise `None`, with the message settled (deferred, acked or retried).
    ///
    /// It claims first, then reads the history: the other way round, a runner that
    /// recorded the outcome (deleting its claim) between the two would let this one
    /// claim and run an attempt that is already done.
    async fn claimed_task(
        &self,
        message: &async_nats::jetstream::Message,
        named: &ActivityTaskMessage,
    ) -> Option<(ActivityTask, AttemptClaim)> {
        let claim = self.runners.claim(named);
        let claimed = self.journal.store.claim_attempt(&claim, ACK_WAIT).await;
        if let Ok(Claimed::HeldElsewhere { expires_in }) = claimed {
            // Another runner has the attempt. Come back once its lease would have run
            // out: by then it has recorded the outcome, or died and let go.
            tracing::debug!(workflow_id = %named.workflow_id, seq = %named.scheduled_seq, attempt = named.attempt, "attempt held by another runner; deferred");
            defer(message, expires_in.clamp(TASK_RETRY, ACK_WAIT)).await;
            return None;
        }
        let awaited = self.awaited(named).await;
        let error = match (awaited, claimed) {
            (Ok(Some(task)), Ok(_)) => {
                // A retry runs no earlier than its backoff says, whoever publishes it.
                let Some(wait) = task.not_before.and_then(not_yet) else {
                    return Some((task, claim));
                };
                self.release(&claim).await;
                defer(message, wait.min(ACK_WAIT)).await;
                return None;
            }
            (Ok(Some(task)), Err(error)) => TaskError::from_store(&task.workflow_id, error),
            // Not awaited (done, stale, or forged), or the history is unreadable.
            (awaited, claimed) => {
                if claimed.is_ok() {
                    self.release(&claim).await;
                }
                match awaited {
                    Err(error) => error,
                    Ok(_) => {
                        self.journal.metrics.duplicates_dropped.inc();
                        let _ = message.ack().await;
                        return None;
                    }
                }
            }
        };
        settle(
            &self.journal,
            message,
            &named.workflow_id,
            Err(error),
            TASK_RETRY,
        )
        .await;
        None
    }

    /// Runs the claimed attempt with a heartbeat that tells NATS it is alive (so only a
    /// dead worker's task returns) and extends the claim (which keeps the workflow fresh
    /// for the sweeper). The heartbeat ends only when the claim is lost: the attempt is
    /// stopped then, so that it never runs beside the runner that took it over.
    async fn run_while_claimed(
        &self,
        message: &Arc<async_nats::jetstream::Message>,
        task: &ActivityTask,
        claim: &AttemptClaim,
    ) -> Result<(), TaskError> {
        let mut beat = AbortOnDrop({
            let message = message.clone();
            let journal = self.journal.clone();
            let claim = claim.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(ACK_WAIT / 3).await;
                    // If this fails NATS may redeliver the task; the claim, extended
                    // below, keeps a second runner off it.
                    let _ = message
                        .ack_with(async_nats::jetstream::AckKind::Progress)
                        .await;
                    match journal.store.extend_attempt_claim(&claim, ACK_WAIT).await {
                        Ok(true) => {}
                        Ok(false) => return,
                        Err(error) => {
                            tracing::warn!(workflow_id = %claim.workflow_id, seq = %claim.scheduled_seq, %error, "extending an attempt's claim failed; retrying");
                        }
                    }
                }
            })
        });
        let outcome = tokio::select! {
            outcome = self.attempt_guarded(task, Some(claim.clone()), None) => outcome,
            _ = &mut beat.0 => Err(lost_claim(task)),
        };
        // Not recorded (a store error, a panic): the retry takes the attempt at once
        // rather than wait out this runner's lease. A lost claim is another runner's.
        if outcome
            .as_ref()
            .is_err_and(|error| !matches!(error, TaskError::LostClaim { .. }))
        {
            self.release(claim).await;
        }
        outcome
    }

    /// Gives up a claim this runner will not use; a failure only means the next runner
    /// waits for the lease to run out.
    async fn release(&self, claim: &AttemptClaim) {
        if let Err(error) = self.journal.store.release_attempt_claim(claim).await {
            tracing::debug!(%error, "releasing an attempt's claim failed; its lease runs out");
        }
    }

    /// The attempt a message names, as the history recorded it, if the history still
    /// waits for it. A message only names an attempt: what runs is the recorded type,
    /// input and options, so a forged task cannot run anything the workflow did not
    /// schedule. A message may also be stale (published after an eager run's lease ran
    /// out, or redelivered after its outcome was recorded): running a stale create after
    /// the workflow moved on would make a resource nothing undoes, so `None`. A history
    /// that cannot be read or decoded runs nothing: the error says what becomes of the
    /// task (acked for a workflow that is not there, blocked, or retried later).
    async fn awaited(
        &self,
        named: &ActivityTaskMessage,
    ) -> Result<Option<ActivityTask>, TaskError> {
        let id = &named.workflow_id;
        let history = (self.journal.load(id).await).map_err(|e| TaskError::from_store(id, e))?;
        Ok(awaited_attempt(
            id,
            &history,
            named.scheduled_seq,
            named.attempt,
        ))
    }

    /// [`Self::attempt`], with a panic of the runtime's own code (recording the outcome,
    /// say) caught like an activity's: the task is retried, then its workflow blocked.
    async fn attempt_guarded(
        &self,
        task: &ActivityTask,
        claim: Option<AttemptClaim>,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<(), TaskError> {
        AssertUnwindSafe(self.attempt(task, claim, slot))
            .catch_unwind()
            .await
            .unwrap_or_else(|payload| Err(TaskError::panicked(&task.workflow_id, payload.as_ref())))
    }

    /// Runs the attempt and records its outcome — once: a second outcome for the same
    /// attempt is dropped. The workflow's next commands are appended in the same write
    /// (this process runs the workflow code; see `step.rs`).
    ///
    /// `slot`, the activity worker's slot the attempt runs in, is given back once the
    /// activity has run: the write that records it may reserve a slot for the next
    /// activity, and a chain holding two slots at once would fill the worker at half
    /// its concurrency (its next activities would then go through NATS).
    pub async fn attempt(
        &self,
        task: &ActivityTask,
        claim: Option<AttemptClaim>,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<(), TaskError> {
        let (id, seq) = (task.workflow_id.clone(), task.scheduled_seq);
        let ledger = Ledger::default();
        let input = ActivityInput {
            workflow_id: id.clone(),
            scheduled_seq: seq,
            attempt: task.attempt,
            idempotency_key: task.idempotency_key.clone(),
            input: task.input.clone(),
            ledger: ledger.clone(),
        };
        let started = Instant::now();
        let result = match self.activities.get(&task.activity_type) {
            None => Err(ActivityFailure::permanent(
                "UnknownActivity",
                format!("no worker here implements activity {}", task.activity_type),
            )),
            Some(handler) => {
                let limit = Duration::from_millis(task.options.start_to_close_timeout_ms);
                let run = AssertUnwindSafe(tokio::time::timeout(limit, handler(input)));
                match run.catch_unwind().await {
                    Ok(Ok(result)) => result,
                    Ok(Err(_)) => Err(ActivityFailure::retryable(
                        "Timeout",
                        format!("attempt ran longer than its start-to-close timeout of {limit:?}"),
                    )),
                    // A bug, not an outcome: nothing is recorded, the claim is given
                    // up (by `attempt_guarded`), and the task's disposition retries
                    // it, then blocks.
                    Err(payload) => return Err(TaskError::panicked(&id, payload.as_ref())),
                }
            }
        };
        drop(slot);
        self.journal.metrics.activity_tasks.inc();
        self.journal.metrics.activity_time.record(started.elapsed());
        tracing::debug!(workflow_id = %id, seq = %seq, attempt = task.attempt, activity = %task.activity_type, ok = result.is_ok(), "activity attempt ran");
        let resources = ledger.take();

        let mut ended = false;
        let step = self
            .journal
            .step(&id, |summary, history| {
                if !accepts_activity_outcome(history, seq, task.attempt) {
                    ended = summary.status.is_terminal();
                    return None;
                }
                let mut write = outcome_write(seq, task, &result, &resources);
                write.attempt_claim = claim.clone();
                Some(write)
            })
            .await;
        if ended && !resources.is_empty() {
            // The workflow ended (cancelled, say) while this attempt ran: what it made
            // is not in the history; the destroy's sweep by infra id finds it.
            let made: Vec<String> = resources
                .iter()
                .map(|noted| {
                    let action = match noted {
                        Noted::Created(_) => "created",
                        Noted::Deleted(_) => "deleted",
                        Noted::Observed { .. } => "observed",
                    };
                    let r = noted.resource();
                    format!("{action} {} {}", r.kind, r.id)
                })
                .collect();
            tracing::warn!(workflow_id = %id, seq = %seq, activity = %task.activity_type, resources = ?made, "an attempt finished after its workflow ended; its outcome is not recorded");
        }
        match step {
            Ok(step) if step.nothing_to_do => {
                // Nothing recorded (the outcome came already, or the workflow ended):
                // the claim ends here instead of with an append.
                if let Some(claim) = &claim {
                    let _ = self.journal.store.release_attempt_claim(claim).await;
                }
                self.journal.metrics.duplicates_dropped.inc();
                Ok(())
            }
            Ok(_) => Ok(()),
            // A vanished workflow: nothing to record; an undecodable one: blocked.
            Err(error) => Err(TaskError::from_store(&id, error)),
        }
    }
}

/// The events (ledger entries, then the outcome) and the retry timer of one attempt.
fn outcome_write(
    seq: Seq,
    task: &ActivityTask,
    result: &Result<serde_json::Value, ActivityFailure>,
    resources: &[Noted],
) -> Write {
    let attempt = task.attempt;
    let mut write = Write::default();
    for noted in resources {
        let (entry, event) = ledger_record(seq, attempt, noted);
        write.ledger.push(entry);
        write.events.push(event);
    }
    match result {
        Ok(value) => write.events.push(
            ActivityCompleted {
                scheduled_seq: seq,
                attempt,
                result: value.clone(),
            }
            .into(),
        ),
        Err(failure) => {
            // Jittered: the delay is recorded in the history, so replay sees the same one.
            let jitter = rand::random::<f64>();
            let retry_at = match task.options.retry.decide_jittered(attempt, failure, jitter) {
                RetryDecision::RetryAfter(delay) => Some(now().after(delay)),
                RetryDecision::GiveUp => None,
            };
            write.events.push(
                ActivityFailed {
                    scheduled_seq: seq,
                    attempt,
                    failure: failure.clone(),
                    retry_at,
                }
                .into(),
            );
            if let Some(at) = retry_at {
                write.timers.push(NewTimer {
                    seq,
                    kind: TimerKind::Retry,
                    due_at: to_datetime(at),
                });
            }
        }
    }
    write
}

/// One object an attempt noted: its `resource_ledger` row and its history event.
fn ledger_record(seq: Seq, attempt: u32, noted: &Noted) -> (LedgerEntry, Event) {
    let noted_resource = noted.resource();
    let entry = |action, owner: Option<&String>| LedgerEntry {
        seq,
        attempt,
        action,
        provider: noted_resource.provider.clone(),
        kind: noted_resource.kind.clone(),
        resource_id: noted_resource.id.clone(),
        region: noted_resource.region.clone(),
        cluster: noted_resource.cluster.clone(),
        owner: owner.cloned(),
    };
    let resource = noted_resource.clone();
    match noted {
        Noted::Created(_) => (
            entry(LedgerAction::Created, None),
            ResourceCreated {
                activity_seq: seq,
                attempt,
                resource,
            }
            .into(),
        ),
        Noted::Deleted(_) => (
            entry(LedgerAction::Deleted, None),
            ResourceDeleted {
                activity_seq: seq,
                attempt,
                resource,
            }
            .into(),
        ),
        Noted::Observed { owner, .. } => (
            entry(LedgerAction::Observed, Some(owner)),
            ResourceObserved {
                activity_seq: seq,
                attempt,
                resource,
                owner: owner.clone(),
            }
            .into(),
        ),
    }
}

fn now() -> Timestamp {
    Timestamp::from_millis(u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0))
}
