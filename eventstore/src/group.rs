//! Group commit: appends of different workflows that are ready at the same moment go to
//! Postgres as one statement, one commit — each still succeeding or failing on its own
//! optimistic check (`statement.rs`).
//!
//! An append that finds no write in flight and nothing queued is written at once, by
//! its own task: under light load a step costs what it did alone. Otherwise it queues
//! for a dispatcher, which starts a group with everything queued (up to [`MAX_GROUP`])
//! as soon as the write in flight ends: under load the groups grow by themselves, and
//! the commits per step fall. One write is in flight at a time; the other `writers` are
//! spares, taken only when every write in flight has run for [`STALLED_AFTER`] (one
//! waiting on a row lock, say), so that a stalled write holds up no other workflow for
//! long.
//!
//! Guarantees: an append's answer is sent only after its group committed (or failed);
//! a group that fails as a whole (a unique violation, a lost connection) is retried
//! one append at a time, so one bad batch cannot fail its neighbours.

pub(crate) mod statement;

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgPool, Postgres};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::append::statement::write_start;
use crate::append::{verdict_result, write_one, AppendBatch, Appended, IndexAt, NewWorkflow};
use crate::error::{is_claim_lost, Error, Result};
use crate::store::IDLE_BEFORE_PING;
use hcpflow_engine::WorkflowStatus;
use statement::{write_group, Member};

/// Appends of one group at most: the statement's arrays grow with it, and a group
/// holds its workflows' index rows locked until it commits.
pub const MAX_GROUP: usize = 64;

/// How many writers a store has by default: one that writes, and a spare for when its
/// write stalls.
pub const DEFAULT_WRITERS: usize = 2;

/// How long every write in flight must have run before the next group starts beside
/// them on a spare writer: several times a group's usual write (1–3 ms on a durable
/// disk), so that under steady load one write is in flight at a time. Two writers
/// taking turns halved the groups, and each group costs Postgres a statement's setup
/// and a commit whatever its size (measured: a fifth more CPU per step at M=10 C=32).
pub const STALLED_AFTER: Duration = Duration::from_millis(10);

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
    /// Groups started on a spare writer, beside writes that had run for
    /// [`STALLED_AFTER`].
    pub spares: AtomicU64,
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
    connections: Arc<WriterConnections>,
    requests: mpsc::UnboundedSender<Request>,
    writers: Arc<Writers>,
    /// Appends sent to the dispatcher and not yet taken into a group.
    queued: Arc<AtomicUsize>,
    pub(crate) stats: Arc<GroupStats>,
}

impl GroupCommit {
    /// Starts the dispatcher on the current Tokio runtime, with `writers` (at least
    /// one) writing on `pool`'s connections.
    pub(crate) fn start(pool: PgPool, writers: usize) -> Self {
        let (requests, queue) = mpsc::unbounded_channel();
        let connections = Arc::new(WriterConnections {
            pool,
            kept: Mutex::new(Vec::new()),
        });
        let dispatcher = Dispatcher {
            connections: connections.clone(),
            writers: Arc::new(Writers::new(writers)),
            queued: Arc::new(AtomicUsize::new(0)),
            stats: Arc::new(GroupStats::default()),
        };
        let handle = Self {
            connections,
            requests,
            writers: dispatcher.writers.clone(),
            queued: dispatcher.queued.clone(),
            stats: dispatcher.stats.clone(),
        };
        tokio::spawn(dispatcher.run(queue));
        handle
    }

    /// The writers' own pool.
    pub(crate) fn writers_pool(&self) -> &PgPool {
        &self.connections.pool
    }

    /// Appends `batch` (already chained): at once when nothing is being written and
    /// nothing waits, else with the next group.
    pub(crate) async fn append(
        &self,
        batch: AppendBatch,
        index: GroupIndex,
        chained: Appended,
    ) -> Result<Appended> {
        if self.queued.load(Ordering::Acquire) == 0 {
            if let Some(_writer) = self.writers.idle() {
                self.stats.count(1);
                let mut kept = self.connections.take().await?;
                let written = write_alone(&mut kept.conn, &batch, &index, chained).await;
                self.connections.give_back(kept, &written);
                return written;
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

/// Forms groups of different workflows and hands each to a writer.
struct Dispatcher {
    connections: Arc<WriterConnections>,
    writers: Arc<Writers>,
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
            let (writer, spare) = self.writers.turn().await;
            let group = Self::form(first, &mut later, &mut queue);
            // What is left (in `later` or the channel) keeps later appends queueing.
            self.queued.fetch_sub(group.len(), Ordering::AcqRel);
            self.stats.count(group.len());
            if spare {
                self.stats.spares.fetch_add(1, Ordering::Relaxed);
            }
            let connections = self.connections.clone();
            let stats = self.stats.clone();
            tokio::spawn(async move {
                write(&connections, &stats, group).await;
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

/// The writers: how many there are, when each write in flight started, and a
/// wake-up for the dispatcher whenever one ends.
#[derive(Debug)]
struct Writers {
    count: usize,
    in_flight: Mutex<Vec<Instant>>,
    ended: Notify,
}

/// A writer held by one write, from its start to its end.
struct Writer {
    writers: Arc<Writers>,
    started: Instant,
}

impl Drop for Writer {
    fn drop(&mut self) {
        {
            let mut in_flight = self.writers.lock();
            if let Some(at) = in_flight.iter().position(|s| *s == self.started) {
                in_flight.swap_remove(at);
            }
        }
        // After the write is off the list: the dispatcher, woken, finds it gone. With
        // the dispatcher not waiting yet, the wake-up is kept for its next wait.
        self.writers.ended.notify_one();
    }
}

impl Writers {
    fn new(count: usize) -> Self {
        assert!(count >= 1, "a group commit needs a writer");
        Self {
            count,
            in_flight: Mutex::new(Vec::with_capacity(count)),
            ended: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Instant>> {
        // Nothing panics while it is held.
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn start(self: &Arc<Self>, in_flight: &mut Vec<Instant>) -> Writer {
        let started = Instant::now();
        in_flight.push(started);
        Writer {
            writers: self.clone(),
            started,
        }
    }

    /// A writer, if nothing is being written.
    fn idle(self: &Arc<Self>) -> Option<Writer> {
        let mut in_flight = self.lock();
        in_flight.is_empty().then(|| self.start(&mut in_flight))
    }

    /// The dispatcher's next writer: at once when nothing is being written, else a
    /// spare once every write in flight has run for [`STALLED_AFTER`]. Says whether it
    /// is a spare.
    async fn turn(self: &Arc<Self>) -> (Writer, bool) {
        loop {
            let stalled_at = {
                let mut in_flight = self.lock();
                let newest = in_flight.iter().max().copied();
                match newest {
                    None => return (self.start(&mut in_flight), false),
                    Some(newest) if in_flight.len() < self.count => {
                        let stalled_at = newest + STALLED_AFTER;
                        if Instant::now() >= stalled_at {
                            return (self.start(&mut in_flight), true);
                        }
                        Some(stalled_at)
                    }
                    // Every writer is writing.
                    Some(_) => None,
                }
            };
            match stalled_at {
                Some(at) => {
                    tokio::select! {
                        () = self.ended.notified() => {}
                        () = tokio::time::sleep_until(at.into()) => {}
                    }
                }
                None => self.ended.notified().await,
            }
        }
    }
}

/// Writes a group in id order and answers each append; a group that fails as a whole
/// is written again one append at a time.
async fn write(connections: &WriterConnections, stats: &GroupStats, mut group: Vec<Request>) {
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
        let written = match connections.take().await {
            Ok(mut kept) => {
                let written = write_group(&mut kept.conn, &members).await;
                connections.give_back(kept, &written);
                written
            }
            Err(error) => Err(error),
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
        let result = match connections.take().await {
            Ok(mut kept) => {
                let chained = request.chained.clone();
                let written =
                    write_alone(&mut kept.conn, &request.batch, &request.index, chained).await;
                connections.give_back(kept, &written);
                written
            }
            Err(error) => Err(error),
        };
        let _ = request.reply.send(result);
    }
}

/// What ends the application name of the writers' connections (`<name>-writer`), by
/// which `pg_stat_activity` tells them from the store's others.
pub(crate) const WRITER_NAME_SUFFIX: &str = "-writer";

/// Opens the pool the writers write with: `options` (the store's, sized to the
/// writers), to the database of `store` with its connect options and the application
/// name `<name>-writer` (`hcpflow-writer` when it has none: they stand out in
/// `pg_stat_activity`), each connection told at connect to plan by key
/// ([`KEYED_PLANS_ONLY`]). One connection is opened now, so that a database that
/// refuses them fails the process's start, not its first write.
pub(crate) async fn open_writers_pool(options: PgPoolOptions, store: &PgPool) -> Result<PgPool> {
    let connect = store.connect_options();
    let name = format!(
        "{}{WRITER_NAME_SUFFIX}",
        connect.get_application_name().unwrap_or("hcpflow")
    );
    let pool = options
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::query(KEYED_PLANS_ONLY).execute(conn).await?;
                Ok(())
            })
        })
        .connect_with((*connect).clone().application_name(&name))
        .await?;
    Ok(pool)
}

/// Set on each of the writers' connections when it is opened: their statements look
/// rows up by key only, and must keep doing so as the tables grow. Postgres plans a
/// prepared statement once per connection and may keep a generic plan until the table
/// is analyzed (or vacuumed, or altered) again; planned on the near-empty tables of a
/// new database, the writers' statements scanned `workflows` and `attempt_claims`
/// whole, and kept doing so, at thousands of rows, for as long as autovacuum left the
/// tables unanalyzed (measured: three quarters of the group statement's time). With
/// sequential scans discouraged the planner takes the primary keys whatever the
/// tables' size. Only the writers use these connections.
const KEYED_PLANS_ONLY: &str = "SET enable_seqscan = off";

/// The connections the writers write with, kept between writes rather than handed
/// back to their pool: sqlx tests a connection on its way back with a round trip, which
/// at one write per step would be a second round trip (and a Postgres wakeup) per step.
/// At most one per writer is kept: each is taken and given back by a writer's holder.
#[derive(Debug)]
struct WriterConnections {
    /// The writers' own pool ([`open_writers_pool`]): one connection per writer.
    pool: PgPool,
    kept: Mutex<Vec<Kept>>,
}

/// A connection taken by a writer, and kept between writes.
#[derive(Debug)]
struct Kept {
    conn: PoolConnection<Postgres>,
    /// When the writers took it from the pool.
    taken_at: Instant,
    last_used: Instant,
    /// Its last write was answered ([`WriterConnections::give_back`]). Dropped before
    /// that (its write given up midway), it is closed: handed back, sqlx would first
    /// wait for the statement in flight, however long a lock holds it, and its pool
    /// would lend nothing meanwhile.
    settled: bool,
}

impl Drop for Kept {
    fn drop(&mut self) {
        if !self.settled {
            self.conn.close_on_drop();
        }
    }
}

/// How long a connection is kept at most before it goes back to the pool, which then
/// applies its own rules (its lifetime, its idle timeout) to it.
const KEEP_AT_MOST: Duration = Duration::from_secs(60);

impl WriterConnections {
    /// A kept connection, checked first if it sat idle (as the pool checks its own:
    /// Postgres may have restarted meanwhile), or one from the pool.
    async fn take(&self) -> Result<Kept> {
        let kept = self.kept.lock().ok().and_then(|mut kept| kept.pop());
        if let Some(mut kept) = kept {
            kept.settled = false;
            if kept.last_used.elapsed() < IDLE_BEFORE_PING {
                return Ok(kept);
            }
            // Bounded as the pool's own check is: a connection to a host that went
            // silent must not hold a writer for as long as TCP takes to give up.
            let timeout = self.pool.options().get_acquire_timeout();
            if let Ok(Ok(())) = tokio::time::timeout(timeout, kept.conn.ping()).await {
                return Ok(kept);
            }
            // Dropped unsettled: closed.
        }
        let now = Instant::now();
        Ok(Kept {
            conn: self.pool.acquire().await?,
            taken_at: now,
            last_used: now,
            settled: false,
        })
    }

    /// Keeps the connection for the next write, unless its write failed in a way that
    /// may have left it broken (then it is closed, and the pool opens another) or it was
    /// kept long enough (then it goes back to the pool).
    fn give_back<T>(&self, mut kept: Kept, written: &Result<T>) {
        let sound = matches!(
            written,
            Ok(_) | Err(Error::Conflict { .. } | Error::ClaimLost { .. })
        );
        if !sound {
            return;
        }
        kept.settled = true;
        if kept.taken_at.elapsed() < KEEP_AT_MOST {
            kept.last_used = Instant::now();
            if let Ok(mut connections) = self.kept.lock() {
                connections.push(kept);
            }
        }
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
