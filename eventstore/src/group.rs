//! Group commit: appends of different workflows that are ready at the same moment go to
//! Postgres as one statement, one commit — each still succeeding or failing on its own
//! optimistic check (`statement.rs`).
//!
//! A dispatcher per store takes the appends as they come. While fewer than `writers`
//! groups are being written it starts a new one with everything queued (up to
//! [`MAX_GROUP`]); otherwise appends queue until a writer is free. Under light load a
//! group is one append and costs what it did alone, plus a hop between tasks; under load
//! the groups grow by themselves, and the commits per step fall.
//!
//! Guarantees: an append's answer is sent only after its group committed (or failed);
//! a group that fails as a whole (a unique violation, a lost connection) is retried
//! one append at a time, so one bad batch cannot fail its neighbours.

pub(crate) mod statement;

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::append::{verdict_result, write_one, AppendBatch, Appended, IndexAt};
use crate::error::{Error, Result};
use statement::{write_group, Member};

/// Appends of one group at most: the statement's arrays grow with it, and a group
/// holds its workflows' index rows locked until it commits.
pub const MAX_GROUP: usize = 64;

/// How many groups a store writes at once, by default: one being written while the
/// next one fills.
pub const DEFAULT_WRITERS: usize = 2;

/// One append waiting for its group.
struct Request {
    batch: AppendBatch,
    index: IndexAt,
    chained: Appended,
    reply: oneshot::Sender<Result<(Appended, Option<String>)>>,
}

/// Counts of what the group writer did, for metrics.
#[derive(Debug, Default)]
pub struct GroupStats {
    /// Statements written (groups).
    pub groups: AtomicU64,
    /// Appends written in them.
    pub appends: AtomicU64,
}

/// The handle appends are sent through; the dispatcher ends when it is dropped.
#[derive(Debug)]
pub(crate) struct GroupCommit {
    requests: mpsc::UnboundedSender<Request>,
    pub(crate) stats: Arc<GroupStats>,
}

impl GroupCommit {
    /// Starts the dispatcher on the current Tokio runtime.
    pub(crate) fn start(pool: PgPool, writers: usize) -> Self {
        let (requests, queue) = mpsc::unbounded_channel();
        let stats = Arc::new(GroupStats::default());
        tokio::spawn(dispatch(pool, queue, writers.max(1), stats.clone()));
        Self { requests, stats }
    }

    /// Appends `batch` (already chained) with the next group.
    pub(crate) async fn append(
        &self,
        batch: AppendBatch,
        index: IndexAt,
        chained: Appended,
    ) -> Result<(Appended, Option<String>)> {
        let (reply, answer) = oneshot::channel();
        let request = Request {
            batch,
            index,
            chained,
            reply,
        };
        self.requests
            .send(request)
            .map_err(|_| Error::InvalidInput("the group commit writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| Error::InvalidInput("the group commit writer dropped an append".into()))?
    }
}

/// Forms groups of different workflows and hands each to a writer.
async fn dispatch(
    pool: PgPool,
    mut queue: mpsc::UnboundedReceiver<Request>,
    writers: usize,
    stats: Arc<GroupStats>,
) {
    let slots = Arc::new(Semaphore::new(writers));
    // Appends that met another of their workflow in the group being formed.
    let mut later: VecDeque<Request> = VecDeque::new();
    loop {
        let first = match later.pop_front() {
            Some(request) => request,
            None => match queue.recv().await {
                Some(request) => request,
                None => return,
            },
        };
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut workflows = BTreeSet::from([first.batch.workflow_id.clone()]);
        let mut group = vec![first];
        let mut again = VecDeque::new();
        let waiting = std::mem::take(&mut later);
        for request in waiting
            .into_iter()
            .chain(std::iter::from_fn(|| queue.try_recv().ok()))
        {
            if group.len() < MAX_GROUP && workflows.insert(request.batch.workflow_id.clone()) {
                group.push(request);
            } else {
                again.push_back(request);
            }
            if group.len() == MAX_GROUP {
                break;
            }
        }
        later = again;
        stats.groups.fetch_add(1, Ordering::Relaxed);
        stats
            .appends
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        let pool = pool.clone();
        tokio::spawn(async move {
            write(&pool, group).await;
            drop(permit);
        });
    }
}

/// Writes a group in id order and answers each append; a group that fails as a whole
/// is written again one append at a time.
async fn write(pool: &PgPool, mut group: Vec<Request>) {
    group.sort_by(|a, b| a.batch.workflow_id.cmp(&b.batch.workflow_id));
    if group.len() > 1 {
        let members: Vec<Member<'_>> = group
            .iter()
            .map(|request| Member {
                batch: &request.batch,
                index: Some(&request.index),
                chained: &request.chained,
            })
            .collect();
        let written = match pool.acquire().await {
            Ok(mut conn) => write_group(&mut conn, &members).await,
            Err(error) => Err(error.into()),
        };
        match written {
            Ok(verdicts) => {
                for (request, verdict) in group.into_iter().zip(verdicts) {
                    let _ = request.reply.send(verdict_result(&request.batch, verdict));
                }
                return;
            }
            Err(error) => {
                tracing::debug!(%error, appends = group.len(), "a grouped append failed; writing its appends one by one");
            }
        }
    }
    for request in group {
        let result = match pool.acquire().await {
            Ok(mut conn) => {
                write_one(
                    &mut conn,
                    &request.batch,
                    Some(&request.index),
                    &request.chained,
                )
                .await
            }
            Err(error) => Err(error.into()),
        };
        let _ = request.reply.send(result);
    }
}
