//! The sweeper: Postgres, not NATS, is the truth. A live workflow that has not moved
//! for a while is checked against its history, and whatever work it still has — a
//! workflow task, an activity attempt, a child to start — is enqueued again. Message
//! ids make a task that was not lost a duplicate that JetStream drops.

use std::sync::Arc;
use std::time::Duration;

use hcpflow_engine::event::{ChildStarted, Event};
use hcpflow_engine::history::pending_work;
use hcpflow_engine::WorkflowStatus;
use hcpflow_engine::{Seq, WorkflowId};
use hcpflow_eventstore::{Error as StoreError, WorkflowFilter};
use tokio::sync::watch;

use crate::runtime::journal::Journal;

#[derive(Debug)]
pub struct Sweeper {
    pub journal: Arc<Journal>,
    /// How long a workflow must be idle before it is checked.
    pub idle: Duration,
    pub every: Duration,
}

impl Sweeper {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        if let Err(error) = self.retry_blocked().await {
            tracing::warn!(%error, "waking blocked workflows failed");
        }
        loop {
            if let Err(error) = self.sweep().await {
                tracing::warn!(%error, "sweep failed");
            }
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                _ = tokio::time::sleep(self.every) => {}
            }
        }
    }

    /// A blocked workflow waits for fixed code. At start — when new code may have been
    /// deployed — every blocked workflow gets a workflow task: if the code replays its
    /// history now, it runs on; if not, it stays blocked with the report.
    /// Only types this process runs are woken.
    pub async fn retry_blocked(&self) -> anyhow::Result<usize> {
        let types = self
            .journal
            .catalog
            .as_ref()
            .map(|c| c.names())
            .unwrap_or_default();
        let mut woken = 0;
        for workflow_type in types {
            woken += self.retry_blocked_of(workflow_type).await?;
        }
        if woken > 0 {
            tracing::info!(woken, "retrying blocked workflows with this code");
        }
        Ok(woken)
    }

    async fn retry_blocked_of(&self, workflow_type: String) -> anyhow::Result<usize> {
        let filter = WorkflowFilter {
            status: Some(WorkflowStatus::Blocked),
            workflow_type: Some(workflow_type),
            concurrency_key: None,
            events_prefix: Some(self.events_prefix()),
            tenant: None,
        };
        let mut cursor = None;
        let mut woken = 0;
        loop {
            let page = self
                .journal
                .store
                .list_workflows(&filter, 500, cursor.as_deref())
                .await?;
            for workflow in &page.workflows {
                let wake = self
                    .journal
                    .outgoing
                    .workflow_task(&workflow.workflow_id, workflow.next_seq);
                self.journal.publish(&wake).await?;
                woken += 1;
            }
            match page.cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        Ok(woken)
    }

    /// `<prefix>.events.`: deployments sharing a database each sweep their own.
    fn events_prefix(&self) -> String {
        format!("{}.events.", self.journal.outgoing.subjects.prefix())
    }

    /// Publishes the pending work of the live workflows that have an attempt whose
    /// claim lapsed (its runner died; again after `idle` if nobody took it over), and
    /// of those idle for `idle`.
    pub async fn sweep(&self) -> anyhow::Result<usize> {
        let store = &self.journal.store;
        let prefix = self.events_prefix();
        let mut ids = store.sweep_lapsed_claims(&prefix, self.idle, 200).await?;
        for id in store.idle_live_workflows(&prefix, self.idle, 200).await? {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let mut enqueued = 0;
        for id in ids {
            match self.recover(&id).await {
                Ok(n) => enqueued += n,
                Err(error) => {
                    tracing::warn!(workflow_id = %id, %error, "sweeping a workflow failed")
                }
            }
        }
        if enqueued > 0 {
            tracing::info!(enqueued, "sweeper re-enqueued lost work");
        }
        Ok(enqueued)
    }

    async fn recover(&self, id: &WorkflowId) -> anyhow::Result<usize> {
        let history = match self.journal.load(id).await {
            Ok(history) => history,
            Err(error @ (StoreError::Decode { .. } | StoreError::Corrupt { .. })) => {
                // A history this code cannot read: make it visible, never guess.
                self.journal.metrics.blocked.inc();
                self.journal
                    .store
                    .set_blocked(id, &error.to_string())
                    .await?;
                return Ok(0);
            }
            Err(error) => return Err(error.into()),
        };
        let work = pending_work(id, &history);
        let mut messages = Vec::new();
        if work.workflow_task {
            messages.push(
                self.journal
                    .outgoing
                    .workflow_task(id, Seq::FIRST.advance(history.len() as u64 - 1)),
            );
        }
        for activity in work.activities.iter().filter(|a| a.not_before.is_none()) {
            messages.push(self.journal.outgoing.activity_message(activity));
        }
        let mut child_ended = false;
        for child in &work.children {
            match self.journal.store.get_workflow(&child.child_id).await {
                Err(StoreError::NotFound(_)) => {
                    if let Some(Event::ChildStarted(started)) = history
                        .get(child.started_seq.get() as usize - 1)
                        .map(|e| &e.event)
                    {
                        let started: &ChildStarted = started;
                        messages.push(self.journal.outgoing.child_start(
                            id,
                            child.started_seq,
                            started,
                        ));
                    }
                }
                // Ended, and its parent never heard (a lost wake-up): a workflow task
                // lets the parent read the outcome.
                Ok(summary) if summary.status.is_terminal() => child_ended = true,
                _ => {}
            }
        }
        if child_ended && !work.workflow_task {
            messages.push(
                self.journal
                    .outgoing
                    .workflow_task(id, Seq::FIRST.advance(history.len() as u64 - 1)),
            );
        }
        for message in &messages {
            self.journal.publish(message).await?;
        }
        self.journal.store.touch(id).await?;
        self.journal
            .metrics
            .swept
            .add(u64::from(!messages.is_empty()));
        Ok(messages.len())
    }
}
