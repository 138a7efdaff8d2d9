//! Group commit: appends of different workflows that are ready at the same moment go to
//! Postgres as one statement, one commit — each still succeeding or failing on its own
//! optimistic check (`statement.rs`).
//!
//! An append that finds a writer free and nothing queued is written at once, by its
//! own task: under light load a step costs what it did alone. Otherwise it queues for a
//! dispatcher, which starts a group with everything queued (up to [`MAX_GROUP`])
//! whenever one of the `writers` is free: under load the groups grow by themselves, and
//! the commits per step fall.
//!
//! Guarantees: an append's answer is sent only after its group committed (or failed);
//! a group that fails as a whole (a unique violation, a lost connection) is retried
//! one append at a time, so one bad batch cannot fail its neighbours.

pub(crate) mod statement;

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::append::statement::write_start;
use crate::append::{verdict_result, write_one, AppendBatch, Appended, IndexAt, NewWorkflow};
use crate::error::{is_claim_lost, Error, Result};
use hcpflow_engine::WorkflowStatus;
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
    index: GroupIndex,
    chained: Appended,
    reply: oneshot::Sender<Result<Appended>>,
}

/// What a member does with its workflow's index row.
#[derive(Debug, Clone)]
pub(crate) enum GroupIndex {
    /// Moves it from where the batch was decided.
    Move(IndexAt),
    /// Inserts it with this status (a start with neither a concurrency key nor ledger
    /// rows); a workflow with this id already there fails the member alone, as a
    /// conflict.
    Create(NewWorkflow, WorkflowStatus),
}

/// Counts of what the group writer did, for metrics.
#[derive(Debug, Default)]
pub struct GroupStats {
    /// Statements written (groups, an append written at once counting as one).
    pub groups: AtomicU64,
    /// Appends written in them.
    pub appends: AtomicU64,
    /// Groups that failed as a whole and were written again one append at a time (a
    /// lost claim; anything else is worth a look: the warning says what).
    pub fallbacks: AtomicU64,
}

impl GroupStats {
    fn count(&self, appends: usize) {
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.appends.fetch_add(appends as u64, Ordering::Relaxed);
    }
}

/// The handle appends are sent through; the dispatcher ends when it is dropped.
#[derive(Debug)]
pub(crate) struct GroupCommit {
    pool: PgPool,
    requests: mpsc::UnboundedSender<Request>,
    /// The writers: one held by each group being written, the dispatcher's or an
    /// append's own.
    writers: Arc<Semaphore>,
    /// Appends sent to the dispatcher and not yet taken into a group.
    queued: Arc<AtomicUsize>,
    pub(crate) stats: Arc<GroupStats>,
}

impl GroupCommit {
    /// Starts the dispatcher on the current Tokio runtime.
    pub(crate) fn start(pool: PgPool, writers: usize) -> Self {
        let (requests, queue) = mpsc::unbounded_channel();
        let dispatcher = Dispatcher {
            pool: pool.clone(),
            writers: Arc::new(Semaphore::new(writers.max(1))),
            queued: Arc::new(AtomicUsize::new(0)),
            stats: Arc::new(GroupStats::default()),
        };
        let handle = Self {
            pool,
            requests,
            writers: dispatcher.writers.clone(),
            queued: dispatcher.queued.clone(),
            stats: dispatcher.stats.clone(),
        };
        tokio::spawn(dispatcher.run(queue));
        handle
    }

    /// Appends `batch` (already chained): at once when a writer is free and nothing
    /// waits, else with the next group.
    pub(crate) async fn append(
        &self,
        batch: AppendBatch,
        index: GroupIndex,
        chained: Appended,
    ) -> Result<Appended> {
        if self.queued.load(Ordering::Acquire) == 0 {
            if let Ok(_writer) = self.writers.try_acquire() {
                self.stats.count(1);
                let mut conn = self.pool.acquire().await?;
                return write_alone(&mut conn, &batch, &index, chained).await;
            }
        }
        let (reply, answer) = oneshot::channel();
        let request = Request {
            batch,
            index,
            chained,
            reply,
        };
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.requests
            .send(request)
            .map_err(|_| Error::InvalidInput("the group commit writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| Error::InvalidInput("the group commit writer dropped an append".into()))?
    }
}

/// Forms groups of different workflows and hands each to a free writer.
struct Dispatcher {
    pool: PgPool,
    writers: Arc<Semaphore>,
    queued: Arc<AtomicUsize>,
    stats: Arc<GroupStats>,
}

impl Dispatcher {
    async fn run(self, mut queue: mpsc::UnboundedReceiver<Request>) {
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
            let Ok(writer) = self.writers.clone().acquire_owned().await else {
                return;
            };
            let group = Self::form(first, &mut later, &mut queue);
            // What is left (in `later` or the channel) keeps later appends queueing.
            self.queued.fetch_sub(group.len(), Ordering::AcqRel);
            self.stats.count(group.len());
            let pool = self.pool.clone();
            let stats = self.stats.clone();
            tokio::spawn(async move {
                write(&pool, &stats, group).await;
                drop(writer);
            });
        }
    }

    /// A group: `first`, then what waits, at most one append of each workflow; the
    /// others wait for the next group.
    fn form(
        first: Request,
        later: &mut VecDeque<Request>,
        queue: &mut mpsc::UnboundedReceiver<Request>,
    ) -> Vec<Request> {
        let mut workflows = BTreeSet::from([first.batch.workflow_id.clone()]);
        let mut group = vec![first];
        let mut again = VecDeque::new();
        let mut take = |request: Request, group: &mut Vec<Request>| {
            if group.len() < MAX_GROUP && workflows.insert(request.batch.workflow_id.clone()) {
                group.push(request);
            } else {
                again.push_back(request);
            }
        };
        for request in std::mem::take(later) {
            take(request, &mut group);
        }
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(request) => take(request, &mut group),
                Err(_) => break,
            }
        }
        *later = again;
        group
    }
}

/// Writes a group in id order and answers each append; a group that fails as a whole
/// is written again one append at a time.
async fn write(pool: &PgPool, stats: &GroupStats, mut group: Vec<Request>) {
    group.sort_by(|a, b| a.batch.workflow_id.cmp(&b.batch.workflow_id));
    if group.len() > 1 {
        let members: Vec<Member<'_>> = group
            .iter()
            .map(|request| Member {
                batch: &request.batch,
                index: &request.index,
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
                stats.fallbacks.fetch_add(1, Ordering::Relaxed);
                if is_claim_lost_error(&error) {
                    tracing::debug!(
                        appends = group.len(),
                        "a runner lost its claim in a group; writing its appends one by one"
                    );
                } else {
                    tracing::warn!(%error, appends = group.len(), "a grouped append failed; writing its appends one by one");
                }
            }
        }
    }
    for request in group {
        let result = match pool.acquire().await {
            Ok(mut conn) => {
                let chained = request.chained.clone();
                write_alone(&mut conn, &request.batch, &request.index, chained).await
            }
            Err(error) => Err(error.into()),
        };
        let _ = request.reply.send(result);
    }
}

/// Writes one member with the single statement: an append moves its index row, a start
/// inserts it.
async fn write_alone(
    conn: &mut sqlx::PgConnection,
    batch: &AppendBatch,
    index: &GroupIndex,
    chained: Appended,
) -> Result<Appended> {
    match index {
        GroupIndex::Move(at) => write_one(conn, batch, Some(at), &chained)
            .await
            .map(|(appended, _)| appended),
        GroupIndex::Create(workflow, status) => {
            write_start(conn, batch, workflow, *status, chained).await
        }
    }
}

fn is_claim_lost_error(error: &Error) -> bool {
    matches!(error, Error::Database(source) if is_claim_lost(source))
}
