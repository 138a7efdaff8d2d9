//! The append statement: the decided batches of one or several workflows in one
//! statement, so that they share one commit (group commit), yet each succeeds or fails
//! on its own check.
//!
//! A batch whose index moved since it was decided fails alone: the statement locks its
//! members' index rows in id order (as the checkpoints do, so that they lock alike),
//! moves those that stand where their batches expect, and writes only those batches — their events, outbox
//! rows, published marks, attempt claims and timers. It answers what became of each.
//! An outcome whose runner lost its attempt's claim (rare: its lease ran out) fails the
//! whole statement, and the group is written again one batch at a time.

use std::sync::OnceLock;

use hcpflow_engine::WorkflowStatus;
use sqlx::PgConnection;

use crate::append::{AppendBatch, Appended};
use crate::error::{Error, Result};
use crate::group::GroupIndex;
use crate::outbox::OutboxRow;
use crate::shape::{column, part, Shape, SHAPES};
use crate::timers::to_i64;

/// One batch of a group, already chained (`chained`): an append decided on an index it
/// moves, or a start that inserts its index row.
#[derive(Debug)]
pub(crate) struct Member<'a> {
    pub batch: &'a AppendBatch,
    pub index: &'a GroupIndex,
    pub chained: &'a Appended,
}

/// What became of one member. (A batch whose runner lost its claim fails the whole
/// statement: [`is_claim_lost`](crate::error::is_claim_lost).)
#[derive(Debug)]
pub(crate) enum Verdict {
    Written(Appended),
    /// The index moved since the batch was decided (or, for a start, a workflow with
    /// its id exists): nothing of it was written.
    Conflict,
}

/// The outbox ids written, the members written, and each written member's events
/// watermark (the two notify columns and the claim guard are ignored).
type GroupRow = (
    Vec<i64>,
    Vec<i64>,
    Vec<Option<i64>>,
    Option<String>,
    Option<String>,
    i32,
);

/// The statement's parameters: one entry per member, then the members' events, outbox
/// rows, published marks, claimed attempts and timers, each row with its member's number
/// (from 1, as `WITH ORDINALITY` counts).
#[derive(Default)]
struct Columns<'a> {
    ids: Vec<&'a str>,
    expected: Vec<Option<i64>>,
    expected_status: Vec<Option<&'a str>>,
    next_seq: Vec<i64>,
    head_hash: Vec<&'a [u8]>,
    status: Vec<Option<&'a str>>,
    output: Vec<Option<&'a serde_json::Value>>,
    error: Vec<Option<&'a serde_json::Value>>,
    published_first: Vec<Option<i64>>,
    published_last: Vec<Option<i64>>,
    claim_runner: Vec<Option<&'a str>>,
    claim_seq: Vec<Option<i64>>,
    claim_attempt: Vec<Option<i32>>,
    claimer: Vec<Option<&'a str>>,
    lease: Vec<Option<f64>>,
    created: CreatedColumns<'a>,
    events: Rows<EventColumns<'a>>,
    outbox: Rows<OutboxColumns<'a>>,
    marks: Rows<Vec<i64>>,
    attempts: Rows<(Vec<i64>, Vec<i32>)>,
    timers: Rows<TimerColumns<'a>>,
}

/// Rows of several members: each row's member number, and the rows' own columns.
#[derive(Default)]
struct Rows<T> {
    member: Vec<i32>,
    columns: T,
}

/// The index rows that starts insert: `None` for a member that moves its row.
#[derive(Default)]
struct CreatedColumns<'a> {
    workflow_type: Vec<Option<&'a str>>,
    status: Vec<Option<&'a str>>,
    parent_id: Vec<Option<&'a str>>,
    input_digest: Vec<Option<&'a str>>,
    events_subject: Vec<Option<&'a str>>,
    tenant: Vec<Option<&'a str>>,
}

impl<'a> CreatedColumns<'a> {
    fn push(&mut self, index: &'a GroupIndex) {
        let created = match index {
            GroupIndex::Create(workflow, status) => Some((workflow, *status)),
            GroupIndex::Move(_) => None,
        };
        self.workflow_type
            .push(created.map(|(w, _)| w.workflow_type.as_str()));
        self.status.push(created.map(|(_, status)| status.as_str()));
        self.parent_id
            .push(created.and_then(|(w, _)| w.parent_id.as_ref().map(|id| id.as_str())));
        self.input_digest
            .push(created.and_then(|(w, _)| w.input_digest.as_deref()));
        self.events_subject
            .push(created.and_then(|(w, _)| w.events_subject.as_deref()));
        self.tenant.push(created.map(|(w, _)| w.tenant.as_str()));
    }
}

#[derive(Default)]
struct EventColumns<'a> {
    seq: Vec<i64>,
    event_type: Vec<&'a str>,
    recorded_at: Vec<chrono::DateTime<chrono::Utc>>,
    body: Vec<&'a [u8]>,
    prev_hash: Vec<&'a [u8]>,
    hash: Vec<&'a [u8]>,
}

#[derive(Default)]
struct OutboxColumns<'a> {
    subject: Vec<&'a str>,
    msg_id: Vec<&'a str>,
    payload: Vec<&'a [u8]>,
}

#[derive(Default)]
struct TimerColumns<'a> {
    seq: Vec<i64>,
    kind: Vec<&'a str>,
    due_at: Vec<chrono::DateTime<chrono::Utc>>,
}

fn to_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl<'a> Columns<'a> {
    fn new(members: &[Member<'a>]) -> Self {
        let mut columns = Self::default();
        for (n, member) in members.iter().enumerate() {
            columns.add(i32::try_from(n + 1).unwrap_or(i32::MAX), member);
        }
        columns
    }

    fn add(&mut self, n: i32, member: &Member<'a>) {
        let batch = member.batch;
        let chained = member.chained;
        self.ids.push(batch.workflow_id.as_str());
        let moved_from = match member.index {
            GroupIndex::Move(at) => Some(at),
            GroupIndex::Create(..) => None,
        };
        self.expected.push(moved_from.map(|at| at.next_seq));
        self.expected_status.push(
            moved_from
                .and_then(|at| at.status)
                .map(WorkflowStatus::as_str),
        );
        self.created.push(member.index);
        self.next_seq.push(to_i64(chained.next_seq));
        self.head_hash.push(chained.head_hash.as_bytes().as_slice());
        self.status.push(batch.status.map(WorkflowStatus::as_str));
        self.output.push(batch.output.as_ref());
        self.error.push(batch.error.as_ref());
        self.published_first
            .push(batch.events_published.map(|range| to_i64(range.first)));
        self.published_last
            .push(batch.events_published.map(|range| to_i64(range.last)));
        let ending = batch.attempt_claim.as_ref();
        self.claim_runner
            .push(ending.map(|claim| claim.runner.as_str()));
        self.claim_seq
            .push(ending.map(|claim| to_i64(claim.scheduled_seq)));
        self.claim_attempt
            .push(ending.map(|claim| to_i32(claim.attempt)));
        let claim = batch.claimed_attempts.as_ref();
        self.claimer.push(claim.map(|claim| claim.runner.as_str()));
        self.lease
            .push(claim.map(|claim| claim.lease.as_secs_f64()));
        for event in &chained.events {
            let events = &mut self.events;
            events.member.push(n);
            events.columns.seq.push(to_i64(event.seq));
            events.columns.event_type.push(event.event_type.as_str());
            events.columns.recorded_at.push(event.recorded_at);
            events.columns.body.push(event.body.as_slice());
            events
                .columns
                .prev_hash
                .push(event.prev_hash.as_bytes().as_slice());
            events.columns.hash.push(event.hash.as_bytes().as_slice());
        }
        for message in &batch.outbox {
            let outbox = &mut self.outbox;
            outbox.member.push(n);
            outbox.columns.subject.push(message.subject.as_str());
            outbox.columns.msg_id.push(message.msg_id.as_str());
            outbox.columns.payload.push(message.payload.as_slice());
        }
        for id in &batch.mark_published {
            self.marks.member.push(n);
            self.marks.columns.push(*id);
        }
        for (seq, attempt) in claim.iter().flat_map(|claim| claim.attempts.iter()) {
            self.attempts.member.push(n);
            self.attempts.columns.0.push(to_i64(*seq));
            self.attempts.columns.1.push(to_i32(*attempt));
        }
        for timer in &batch.timers {
            self.timers.member.push(n);
            self.timers.columns.seq.push(to_i64(timer.seq));
            self.timers.columns.kind.push(timer.kind.as_str());
            self.timers.columns.due_at.push(timer.due_at);
        }
    }
}

/// Writes every member whose index and claim still hold, in one statement.
///
/// The members must be of different workflows (the statement locks their rows in id
/// order itself, whatever their order here). Ledger rows and
/// the promotion of a waiting workflow are the caller's (in the same transaction).
pub(crate) async fn write_group(
    conn: &mut PgConnection,
    members: &[Member<'_>],
) -> Result<Vec<Verdict>> {
    let c = Columns::new(members);
    let (events, outbox, timers) = (&c.events.columns, &c.outbox.columns, &c.timers.columns);

    let shape = Shape {
        outbox: !c.outbox.member.is_empty(),
        marks: !c.marks.member.is_empty(),
        claims: !c.attempts.member.is_empty(),
        claim_end: c.claim_runner.iter().any(Option::is_some),
        timers: !c.timers.member.is_empty(),
        index: true,
        create: c.created.workflow_type.iter().any(Option::is_some),
    };
    let (outbox_ids, written, marks, _, _, _): GroupRow =
        sqlx::query_as(shape.text(&GROUP_STATEMENTS, group_statement))
            .bind(&c.ids)
            .bind(&c.expected)
            .bind(&c.expected_status)
            .bind(&c.next_seq)
            .bind(&c.head_hash)
            .bind(&c.status)
            .bind(&c.output)
            .bind(&c.error)
            .bind(&c.published_first)
            .bind(&c.published_last)
            .bind(&c.claim_runner)
            .bind(&c.claim_seq)
            .bind(&c.claim_attempt)
            .bind(&c.claimer)
            .bind(&c.lease)
            .bind(&c.events.member)
            .bind(&events.seq)
            .bind(&events.event_type)
            .bind(&events.recorded_at)
            .bind(&events.body)
            .bind(&events.prev_hash)
            .bind(&events.hash)
            .bind(&c.outbox.member)
            .bind(&outbox.subject)
            .bind(&outbox.msg_id)
            .bind(&outbox.payload)
            .bind(&c.marks.member)
            .bind(&c.marks.columns)
            .bind(&c.attempts.member)
            .bind(&c.attempts.columns.0)
            .bind(&c.attempts.columns.1)
            .bind(&c.timers.member)
            .bind(&timers.seq)
            .bind(&timers.kind)
            .bind(&timers.due_at)
            .bind(&c.created.workflow_type)
            .bind(&c.created.status)
            .bind(&c.created.parent_id)
            .bind(&c.created.input_digest)
            .bind(&c.created.events_subject)
            .bind(&c.created.tenant)
            .fetch_one(&mut *conn)
            .await?;
    verdicts(members, &outbox_ids, &written, marks)
}

/// Hands each member its verdict. The outbox ids ascend in member order (the rows were
/// inserted in that order), so each written member takes as many as it wrote messages;
/// `marks` has each written member's events watermark, in order.
fn verdicts(
    members: &[Member<'_>],
    outbox_ids: &[i64],
    written: &[i64],
    marks: Vec<Option<i64>>,
) -> Result<Vec<Verdict>> {
    let mut ids = outbox_ids.iter().copied();
    let mut marks = marks.into_iter();
    let mut verdicts = Vec::with_capacity(members.len());
    for (n, member) in members.iter().enumerate() {
        let n = i64::try_from(n + 1).unwrap_or(i64::MAX);
        if !written.contains(&n) {
            verdicts.push(Verdict::Conflict);
            continue;
        }
        let mark = marks.next().flatten();
        let batch = member.batch;
        let mut rows = Vec::with_capacity(batch.outbox.len());
        for message in &batch.outbox {
            let id = ids.next().ok_or_else(|| Error::Corrupt {
                workflow_id: batch.workflow_id.to_string(),
                seq: 0,
                reason: "the grouped append returned fewer outbox ids than it wrote rows".into(),
            })?;
            rows.push(OutboxRow {
                id,
                message: message.clone(),
            });
        }
        let events_range_refused = batch
            .events_published
            .filter(|range| mark.unwrap_or(0) < to_i64(range.last));
        // A start answers the status its index row was inserted with.
        let status = match member.index {
            GroupIndex::Create(_, status) => Some(*status),
            GroupIndex::Move(_) => batch.status,
        };
        let appended = Appended {
            outbox: rows,
            status,
            promoted: None,
            events_range_refused,
            ..member.chained.clone()
        };
        verdicts.push(Verdict::Written(appended));
    }
    Ok(verdicts)
}

pub(crate) static GROUP_STATEMENTS: [OnceLock<String>; SHAPES] =
    [const { OnceLock::new() }; SHAPES];

/// The statement of [`write_group`] in `shape` (which always moves index rows, and
/// inserts those of starts when `shape.create`). Its parameters keep their numbers in
/// every shape; those of an absent part are bound and unused.
pub(crate) fn group_statement(shape: Shape) -> String {
    let claim_end = part(
        shape.claim_end,
        ",
          cl AS (
              DELETE FROM attempt_claims c USING ok
               WHERE ok.claim_runner IS NOT NULL AND c.workflow_id = ok.id AND c.scheduled_seq = ok.claim_seq
                 AND c.attempt = ok.claim_attempt AND c.runner = ok.claim_runner
              RETURNING ok.n)",
    );
    let outbox = part(
        shape.outbox,
        ",
          ob AS (
              INSERT INTO outbox (workflow_id, subject, msg_id, payload)
              SELECT ok.id, o.subject, o.msg_id, o.payload
                FROM UNNEST($23::int[], $24::text[], $25::text[], $26::bytea[])
                     WITH ORDINALITY AS o(member, subject, msg_id, payload, k)
                JOIN ok ON ok.n = o.member
               ORDER BY o.k
              RETURNING id)",
    );
    let marks = part(
        shape.marks,
        ",
          mk AS (
              UPDATE outbox SET published_at = now(), claim_expires_at = NULL
               WHERE id IN (SELECT m.id FROM UNNEST($27::int[], $28::bigint[]) AS m(member, id)
                              JOIN ok ON ok.n = m.member)
                 AND published_at IS NULL)",
    );
    let claims = part(
        shape.claims,
        ",
          ac AS (
              INSERT INTO attempt_claims (workflow_id, scheduled_seq, attempt, runner, lease_until)
              SELECT ok.id, a.seq, a.attempt, ok.claimer, now() + make_interval(secs => ok.lease)
                FROM UNNEST($29::int[], $30::bigint[], $31::int[]) AS a(member, seq, attempt)
                JOIN ok ON ok.n = a.member
              ON CONFLICT DO NOTHING)",
    );
    let timers = part(
        shape.timers,
        ",
          tm AS (
              INSERT INTO timers (workflow_id, seq, kind, due_at)
              SELECT ok.id, t.seq, t.kind, t.due_at
                FROM UNNEST($32::int[], $33::bigint[], $34::text[], $35::timestamptz[])
                     AS t(member, seq, kind, due_at)
                JOIN ok ON ok.n = t.member)",
    );
    let outbox_ids = column(
        shape.outbox,
        "COALESCE((SELECT array_agg(id ORDER BY id) FROM ob), '{}'::bigint[])",
        "'{}'::bigint[]",
    );
    // As the single append: the relay is woken only for outbox rows, the timer service
    // only for new timers (one notification per workflow, its id as the payload).
    let wake_relay = column(
        shape.outbox,
        "(SELECT count(pg_notify('hcpflow_outbox', ok.id)) FROM ok WHERE ok.n = ANY($23::int[]))::text",
        "NULL::text",
    );
    let wake_timers = column(
        shape.timers,
        "(SELECT pg_notify('hcpflow_timers', '')
            WHERE EXISTS (SELECT 1 FROM UNNEST($32::int[]) AS t(member) JOIN ok ON ok.n = t.member))::text",
        "NULL::text",
    );
    // An outcome whose runner lost its claim fails the whole statement (the group is
    // then written again one batch at a time).
    let claim_held = column(
        shape.claim_end,
        "CASE WHEN EXISTS (SELECT 1 FROM ok WHERE claim_runner IS NOT NULL
                              AND n NOT IN (SELECT n FROM cl))
              THEN hcpflow_attempt_claim_lost() ELSE 1 END",
        "1",
    );
    // Starts insert their index rows; one whose id exists already is not written (its
    // caller is told a conflict), and neither are its events. In id order, as rows are
    // locked: two statements starting the same ids (a start sent twice, to two
    // processes) wait on each other's insert in the same order, never crosswise.
    let create = part(
        shape.create,
        ",
          cr AS (
              INSERT INTO workflows (workflow_id, workflow_type, status, parent_id, next_seq,
                                     head_hash, input_digest, output, error, events_subject, tenant)
              SELECT b.id, c.workflow_type, c.status, c.parent_id, b.next_seq, b.head_hash,
                     c.input_digest, b.output, b.error, c.events_subject, c.tenant
                FROM b JOIN UNNEST($36::text[], $37::text[], $38::text[], $39::text[], $40::text[],
                                   $41::text[])
                     WITH ORDINALITY AS c(workflow_type, status, parent_id, input_digest,
                                          events_subject, tenant, n) ON c.n = b.n
               WHERE c.workflow_type IS NOT NULL
               ORDER BY b.id COLLATE \"C\"
              ON CONFLICT (workflow_id) DO NOTHING
              RETURNING workflow_id)",
    );
    let created = column(shape.create, " OR b.id IN (SELECT workflow_id FROM cr)", "");
    // Only the rows members move are locked: a duplicate start must not wait for (nor
    // hold up) the workflow that has its id.
    let moving = column(
        shape.create,
        "ARRAY(SELECT id FROM b WHERE expected IS NOT NULL)",
        "$1::text[]",
    );
    format!(
        "WITH b AS (
              SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bytea[],
                                   $6::text[], $7::jsonb[], $8::jsonb[], $9::bigint[], $10::bigint[],
                                   $11::text[], $12::bigint[], $13::int[], $14::text[], $15::float8[])
                WITH ORDINALITY AS b(id, expected, expected_status, next_seq, head_hash, status, output,
                                     error, published_first, published_last, claim_runner, claim_seq,
                                     claim_attempt, claimer, lease, n)),
          -- The members' rows are locked first, in id order, as the checkpoints lock
          -- theirs: the UPDATE below locks in its join's order,
          -- which follows the table's pages when the planner scans it whole (a small
          -- table), and two statements that lock in other orders can deadlock.
          lk AS MATERIALIZED (
              SELECT workflow_id FROM workflows WHERE workflow_id = ANY({moving})
               ORDER BY workflow_id COLLATE \"C\" FOR NO KEY UPDATE),
          -- The index moves only where it stands as the batch expects (a row another
          -- appender moved meanwhile is checked again in its newest version).
          up AS (
              UPDATE workflows w
                 SET next_seq = b.next_seq, head_hash = b.head_hash, status = COALESCE(b.status, w.status),
                     output = COALESCE(b.output, w.output), error = COALESCE(b.error, w.error),
                     updated_at = now(),
                     blocked_reason = CASE WHEN b.status IS NULL THEN w.blocked_reason END,
                     events_published_seq = CASE
                         WHEN w.events_published_seq >= b.published_first - 1
                          AND w.events_published_seq < b.published_last THEN b.published_last
                         ELSE w.events_published_seq END
                FROM b
               WHERE w.workflow_id = b.id AND w.next_seq = b.expected
                 AND (b.expected_status IS NULL OR w.status = b.expected_status)
                 AND w.workflow_id IN (SELECT workflow_id FROM lk)
              RETURNING b.n, w.events_published_seq){create},
          ok AS (
              SELECT * FROM b WHERE b.n IN (SELECT n FROM up){created}){claim_end},
          ev AS (
              INSERT INTO events (workflow_id, seq, event_type, recorded_at, body, prev_hash, hash)
              SELECT ok.id, e.seq, e.event_type, e.recorded_at, e.body, e.prev_hash, e.hash
                FROM UNNEST($16::int[], $17::bigint[], $18::text[], $19::timestamptz[], $20::bytea[],
                            $21::bytea[], $22::bytea[])
                     AS e(member, seq, event_type, recorded_at, body, prev_hash, hash)
                JOIN ok ON ok.n = e.member){outbox}{marks}{claims}{timers}
         SELECT {outbox_ids},
                COALESCE((SELECT array_agg(n ORDER BY n) FROM ok), '{{}}'::bigint[]),
                COALESCE((SELECT array_agg(up.events_published_seq ORDER BY ok.n)
                            FROM ok LEFT JOIN up ON up.n = ok.n), '{{}}'::bigint[]),
                {wake_relay},
                {wake_timers},
                {claim_held}"
    )
}
