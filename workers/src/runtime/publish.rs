//! Publishing after the commit: what an append wrote to the outbox goes to NATS right
//! after the commit (its events follow in batches, `event_batches.rs`), and what NATS
//! acknowledged is marked published in the next append's transaction, or by a periodic
//! flush — so marking costs no commit of its own. A failure is only logged: the relay
//! publishes whatever is left.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_nats::jetstream;
use async_nats::jetstream::message::PublishMessage;
use hcpflow_engine::history::ActivityTask;
use hcpflow_engine::WorkflowId;
use hcpflow_eventstore::{Appended, OutboxMessage, PublishedRange, PublishedRuns};

use crate::runtime::eager::{claim_of, LocalTask};
use crate::runtime::journal::Journal;
use crate::runtime::metrics::Metrics;

/// What this process published and has not marked yet.
#[derive(Debug, Default)]
pub(super) struct Published {
    pub(super) outbox_ids: Vec<i64>,
    events: BTreeMap<WorkflowId, PublishedRuns>,
}

impl Published {
    /// The earliest unmarked run of `id`'s events (the only one that can move its mark).
    pub(super) fn take_first_run(&mut self, id: &WorkflowId) -> Option<PublishedRange> {
        let runs = self.events.get_mut(id)?;
        let first = runs.take_first();
        if runs.is_empty() {
            self.events.remove(id);
        }
        first
    }

    pub(super) fn give_back(
        &mut self,
        ids: Vec<i64>,
        events: Option<(WorkflowId, PublishedRange)>,
    ) {
        self.outbox_ids.extend(ids);
        if let Some((id, range)) = events {
            self.events.entry(id).or_default().add(range);
        }
    }
}

/// What one append took from [`Published`] to mark in its own transaction. Dropped,
/// it gives all of it back, to be marked by a later append or the periodic flush —
/// unless the append committed ([`TakenMarks::committed`]). So whatever way an append
/// fails (a conflict, a duplicate start, an outage, a decision made again), nothing it
/// took is lost to the relay, which would publish it once more. Marking again what a
/// commit hidden by a lost connection marked changes nothing: outbox marks need
/// `published_at IS NULL`, and the events' watermark only moves forward.
#[derive(Debug)]
pub(crate) struct TakenMarks {
    published: Arc<Mutex<Published>>,
    outbox_ids: Vec<i64>,
    events: Option<(WorkflowId, PublishedRange)>,
}

impl TakenMarks {
    /// Takes what is to be marked with an append to `id`: every published outbox row,
    /// and the earliest run of `id`'s own events.
    pub(super) fn take(
        published: &Arc<Mutex<Published>>,
        id: &WorkflowId,
    ) -> (Self, Vec<i64>, Option<PublishedRange>) {
        let (outbox_ids, run) = match published.lock() {
            Ok(mut published) => (
                std::mem::take(&mut published.outbox_ids),
                published.take_first_run(id),
            ),
            Err(_) => (Vec::new(), None),
        };
        let taken = Self {
            published: Arc::clone(published),
            outbox_ids: outbox_ids.clone(),
            events: run.map(|range| (id.clone(), range)),
        };
        (taken, outbox_ids, run)
    }

    /// The append that carried these marks committed: they are marked.
    pub(crate) fn committed(mut self) {
        self.outbox_ids.clear();
        self.events = None;
    }
}

impl Drop for TakenMarks {
    fn drop(&mut self) {
        if self.outbox_ids.is_empty() && self.events.is_none() {
            return;
        }
        if let Ok(mut published) = self.published.lock() {
            published.give_back(std::mem::take(&mut self.outbox_ids), self.events.take());
        }
    }
}

impl Journal {
    /// After an append committed (its events queued, `event_batches.rs`): hands the
    /// activity tasks this process claimed to its activity workers, then publishes the
    /// append's outbox rows and remembers what NATS acknowledged. A failure is only
    /// logged: the relay publishes whatever is left.
    pub async fn publish_committed(&self, appended: &Appended, eager: Vec<LocalTask>) {
        let refused = self.hand_over_here(eager);
        self.publish_rest(appended, refused).await;
    }

    /// Hands the activity tasks this process claimed to its activity workers, without
    /// waiting for anything; returns those no worker here took (one that is gone,
    /// shutting down), which go to NATS ([`Self::publish_rest`]).
    pub(super) fn hand_over_here(&self, eager: Vec<LocalTask>) -> Vec<LocalTask> {
        eager
            .into_iter()
            .filter_map(|local| match self.eager.get() {
                Some(dispatch) => dispatch.hand_over(local).err().map(|refused| *refused),
                None => Some(local),
            })
            .collect()
    }

    /// What follows the hand-over: the tasks refused here to NATS, then the append's
    /// outbox rows.
    pub(super) async fn publish_rest(&self, appended: &Appended, refused: Vec<LocalTask>) {
        for local in refused {
            self.hand_to_nats(&local.task, &local.message).await;
        }
        let rows = &appended.outbox;
        if !rows.is_empty() {
            let messages: Vec<OutboxMessage> = rows.iter().map(|row| row.message.clone()).collect();
            let acked = self.publish_all(&messages).await;
            let outbox_ids: Vec<i64> = rows
                .iter()
                .zip(acked)
                .filter(|(_, acked)| *acked)
                .map(|(row, _)| row.id)
                .collect();
            self.return_published(outbox_ids, None);
        }
        if let (Some(refused), Some(first)) =
            (appended.events_range_refused, appended.events.first())
        {
            self.return_published(Vec::new(), Some((first.workflow_id.clone(), refused)));
        }
    }

    /// Gives up an activity task this process claimed for itself (it is stopping, or
    /// could not record the outcome): the task is published for any activity worker,
    /// then the attempt's claim released. In that order: should the publish fail or the
    /// process die before the release, the claim lapses and the sweeper publishes the
    /// task; a runner that gets it meanwhile waits for the claim.
    pub async fn hand_to_nats(&self, task: &ActivityTask, message: &OutboxMessage) {
        let workflow_id = &task.workflow_id;
        if let Err(error) = self.publish(message).await {
            tracing::warn!(%workflow_id, %error, "publishing a local activity's task failed; the sweeper will once its claim lapses");
            return;
        }
        if let Some(runner) = self.eager_claimer() {
            let claim = claim_of(task, runner);
            if let Err(error) = self.store.release_attempt_claim(&claim).await {
                tracing::warn!(%workflow_id, %error, "releasing a local attempt's claim failed; it lapses");
            }
        }
    }

    /// Publishes messages with their `Nats-Msg-Id` (see [`publish_messages`]); returns
    /// which ones JetStream acknowledged.
    pub async fn publish_all(&self, messages: &[OutboxMessage]) -> Vec<bool> {
        publish_messages(&self.js, &self.metrics, messages).await
    }

    /// Publishes one message now, outside any append (sweeper, timers, promotions).
    pub async fn publish(&self, message: &OutboxMessage) -> anyhow::Result<()> {
        self.send(message).await?.await?;
        Ok(())
    }

    async fn send(
        &self,
        message: &OutboxMessage,
    ) -> Result<jetstream::context::PublishAckFuture, jetstream::context::PublishError> {
        send(&self.js, message).await
    }

    pub(super) fn return_published(
        &self,
        ids: Vec<i64>,
        events: Option<(WorkflowId, PublishedRange)>,
    ) {
        if let Ok(mut published) = self.published.lock() {
            published.give_back(ids, events);
        }
    }

    /// Marks, every [`MARK_FLUSH_EVERY`], what this process published and no append of
    /// the same workflow marked (the last step of a workflow, or its next step ran
    /// elsewhere).
    pub async fn mark_published_until(
        self: Arc<Self>,
        mut shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let mut tick = tokio::time::interval(MARK_FLUSH_EVERY);
        // After a stall (a slow Postgres), one flush, not the missed ones back to back.
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                _ = tick.tick() => self.flush_published().await,
            }
        }
    }

    /// Marks whatever was published but not yet marked (when no append came along).
    pub async fn flush_published(&self) {
        let (ids, events) = match self.published.lock() {
            Ok(mut published) => {
                let ids = std::mem::take(&mut published.outbox_ids);
                let workflows: Vec<WorkflowId> = published.events.keys().cloned().collect();
                let events: Vec<(WorkflowId, PublishedRange)> = workflows
                    .into_iter()
                    .filter_map(|id| published.take_first_run(&id).map(|run| (id, run)))
                    .collect();
                (ids, events)
            }
            Err(_) => return,
        };
        if !ids.is_empty() {
            if let Err(error) = self.store.mark_published_unclaimed(&ids).await {
                tracing::warn!(%error, "marking published outbox rows failed; will retry");
                self.return_published(ids, None);
            }
        }
        if !events.is_empty() {
            let ranges = events;
            let keep = match self.store.mark_events_published(&ranges).await {
                // Ranges ahead of a run still being published here: kept for next time.
                Ok(pending) => pending.into_iter().collect(),
                Err(error) => {
                    tracing::warn!(%error, "marking published events failed; will retry");
                    ranges.iter().map(|(id, _)| id.clone()).collect()
                }
            };
            let keep: std::collections::BTreeSet<WorkflowId> = keep;
            for range in ranges.into_iter().filter(|(id, _)| keep.contains(id)) {
                self.return_published(Vec::new(), Some(range));
            }
        }
    }
}

/// How often what was published and not marked by an append is marked. Often, so that
/// each flush is one short statement: a flush rewrites the index row of every workflow
/// it marks (an ended workflow's leaves the relay's open set, which no step's update
/// can do in place), and twice a second at a hundred workflows ending a second that was
/// a statement of 3-6 ms beside the steps.
const MARK_FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// How many messages one call sends before it awaits their acknowledgements. Each
/// message sent holds one of the JetStream context's acknowledgement permits (5,000,
/// async-nats's default) until its acknowledgement is awaited, and a send waits for a
/// permit: a call that sent more than the context has before awaiting any would wait
/// for itself, and hold up every other publish of the process (seen with a batch of
/// events from 1,000 workflows in flight). Far under the permits, far over a step's
/// messages.
const PUBLISH_WINDOW: usize = 256;

/// Publishes messages with their `Nats-Msg-Id`, a window at a time: the window's
/// messages all sent before their acknowledgements are awaited. Returns which ones
/// JetStream acknowledged.
pub(super) async fn publish_messages(
    js: &jetstream::Context,
    metrics: &Metrics,
    messages: &[OutboxMessage],
) -> Vec<bool> {
    // One warning per batch, not per message: a NATS outage fails them all alike.
    let mut first_failure: Option<(String, String)> = None;
    let mut acked = Vec::with_capacity(messages.len());
    for window in messages.chunks(PUBLISH_WINDOW) {
        let mut pending = Vec::with_capacity(window.len());
        for message in window {
            match send(js, message).await {
                Ok(ack) => pending.push(Some(ack)),
                Err(error) => {
                    first_failure.get_or_insert((message.subject.clone(), error.to_string()));
                    pending.push(None);
                }
            }
        }
        for (ack, message) in pending.into_iter().zip(window) {
            acked.push(match ack {
                Some(ack) => match ack.await {
                    Ok(_) => true,
                    Err(error) => {
                        first_failure.get_or_insert((message.subject.clone(), error.to_string()));
                        false
                    }
                },
                None => false,
            });
        }
    }
    let published = acked.iter().filter(|acked| **acked).count();
    if let Some((subject, error)) = first_failure {
        let failed = acked.len() - published;
        tracing::warn!(failed, %subject, %error, "publishing failed; the relay will retry");
    }
    metrics.published.add(published as u64);
    acked
}

async fn send(
    js: &jetstream::Context,
    message: &OutboxMessage,
) -> Result<jetstream::context::PublishAckFuture, jetstream::context::PublishError> {
    let publish = PublishMessage::build()
        .payload(message.payload.clone().into())
        .message_id(&message.msg_id);
    js.send_publish(message.subject.clone(), publish).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcpflow_engine::Seq;

    fn published_with(id: &WorkflowId) -> Arc<Mutex<Published>> {
        let mut published = Published::default();
        let run = PublishedRange {
            first: Seq::new(1).unwrap(),
            last: Seq::new(4).unwrap(),
        };
        published.give_back(vec![7, 8], Some((id.clone(), run)));
        Arc::new(Mutex::new(published))
    }

    fn held(published: &Arc<Mutex<Published>>, id: &WorkflowId) -> (Vec<i64>, bool) {
        let published = published.lock().unwrap();
        (
            published.outbox_ids.clone(),
            published.events.contains_key(id),
        )
    }

    #[test]
    fn marks_of_an_append_that_fails_are_given_back() {
        let id = WorkflowId::new("wf-1").unwrap();
        let published = published_with(&id);
        let (taken, outbox_ids, run) = TakenMarks::take(&published, &id);
        assert_eq!(outbox_ids, vec![7, 8]);
        assert!(run.is_some());
        assert_eq!(held(&published, &id), (Vec::new(), false));
        drop(taken);
        assert_eq!(held(&published, &id), (vec![7, 8], true));
    }

    #[test]
    fn marks_of_a_committed_append_are_kept_marked() {
        let id = WorkflowId::new("wf-1").unwrap();
        let published = published_with(&id);
        let (taken, _, _) = TakenMarks::take(&published, &id);
        taken.committed();
        assert_eq!(held(&published, &id), (Vec::new(), false));
    }
}
