//! Claims on activity attempts: at most one runner runs an attempt at a time.
//!
//! A runner claims (workflow, seq, attempt) under a lease and extends it while the
//! attempt runs; another runner finds the claim held and backs off until the lease runs
//! out (a crashed runner stops extending, so its attempt is taken over). The append that
//! records the outcome names the claim ([`crate::AppendBatch::attempt_claim`]): it
//! deletes the claim in the same statement and fails with [`Error::ClaimLost`] when the
//! runner no longer holds it, so only the current holder's result is recorded.

use std::time::Duration;

use hcpflow_engine::{Seq, WorkflowId};

use crate::error::{Error, Result};
use crate::index::stored_workflow_id;
use crate::store::EventStore;
use crate::timers::to_i64;

/// One runner's claim on one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptClaim {
    pub workflow_id: WorkflowId,
    pub scheduled_seq: Seq,
    pub attempt: u32,
    /// Who runs it: unique per run, so that two runs in one process are told apart.
    pub runner: String,
}

/// What a claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimed {
    /// The runner holds the attempt now.
    Taken,
    /// Another runner holds it; its lease runs out in this long (unless extended).
    HeldElsewhere { expires_in: Duration },
}

impl EventStore {
    /// Claims the attempt for `claim.runner` for `lease`: taken when nobody holds it,
    /// its holder's lease ran out, or the runner holds it already (then extended).
    pub async fn claim_attempt(&self, claim: &AttemptClaim, lease: Duration) -> Result<Claimed> {
        let (taken, expires_in): (bool, f64) = sqlx::query_as(
            "WITH taken AS (
                 INSERT INTO attempt_claims (workflow_id, scheduled_seq, attempt, runner, lease_until)
                 VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::float8))
                 ON CONFLICT (workflow_id, scheduled_seq, attempt) DO UPDATE
                    SET runner = EXCLUDED.runner, lease_until = EXCLUDED.lease_until
                  WHERE attempt_claims.lease_until <= now()
                     OR attempt_claims.runner = EXCLUDED.runner
                 RETURNING 1)
             SELECT EXISTS (SELECT 1 FROM taken),
                    COALESCE((SELECT extract(epoch FROM lease_until - now())::float8
                                FROM attempt_claims
                               WHERE workflow_id = $1 AND scheduled_seq = $2 AND attempt = $3), 0)",
        )
        .bind(claim.workflow_id.as_str())
        .bind(to_i64(claim.scheduled_seq))
        .bind(attempt_i32(claim.attempt)?)
        .bind(&claim.runner)
        .bind(lease.as_secs_f64())
        .fetch_one(&self.pool)
        .await?;
        Ok(if taken {
            Claimed::Taken
        } else {
            Claimed::HeldElsewhere {
                expires_in: Duration::from_secs_f64(expires_in.max(0.0)),
            }
        })
    }

    /// Extends `runner`'s claims on `attempts` to `lease` from now, in one statement;
    /// for each, whether the runner still held it (one taken over once lapsed is not).
    /// For claims whose attempts wait for a slot: nothing runs yet, so the workflows are
    /// not marked fresh.
    pub async fn extend_waiting_claims(
        &self,
        runner: &str,
        attempts: &[AttemptClaim],
        lease: Duration,
    ) -> Result<Vec<bool>> {
        let mut ids = Vec::with_capacity(attempts.len());
        let mut seqs = Vec::with_capacity(attempts.len());
        let mut numbers = Vec::with_capacity(attempts.len());
        for claim in attempts {
            ids.push(claim.workflow_id.as_str().to_owned());
            seqs.push(to_i64(claim.scheduled_seq));
            numbers.push(attempt_i32(claim.attempt)?);
        }
        let extended: Vec<i64> = sqlx::query_scalar(
            "UPDATE attempt_claims c SET lease_until = now() + make_interval(secs => $5::float8)
               FROM UNNEST($1::text[], $2::bigint[], $3::int[])
                    WITH ORDINALITY AS a(workflow_id, scheduled_seq, attempt, position)
              WHERE c.workflow_id = a.workflow_id AND c.scheduled_seq = a.scheduled_seq
                AND c.attempt = a.attempt AND c.runner = $4
             RETURNING a.position",
        )
        .bind(&ids)
        .bind(&seqs)
        .bind(&numbers)
        .bind(runner)
        .bind(lease.as_secs_f64())
        .fetch_all(&self.pool)
        .await?;
        let mut held = vec![false; attempts.len()];
        for position in extended {
            if let Some(slot) = usize::try_from(position - 1)
                .ok()
                .and_then(|i| held.get_mut(i))
            {
                *slot = true;
            }
        }
        Ok(held)
    }

    /// Extends the runner's claim to `lease` from now, and marks the workflow fresh (the
    /// sweeper leaves a workflow alone while one of its attempts runs); false when the
    /// runner no longer holds it.
    pub async fn extend_attempt_claim(
        &self,
        claim: &AttemptClaim,
        lease: Duration,
    ) -> Result<bool> {
        let extended: bool = sqlx::query_scalar(
            "WITH extended AS (
                 UPDATE attempt_claims SET lease_until = now() + make_interval(secs => $5::float8)
                  WHERE workflow_id = $1 AND scheduled_seq = $2 AND attempt = $3 AND runner = $4
                 RETURNING 1),
             touched AS (
                 UPDATE workflows SET updated_at = now()
                  WHERE workflow_id = $1 AND EXISTS (SELECT 1 FROM extended))
             SELECT EXISTS (SELECT 1 FROM extended)",
        )
        .bind(claim.workflow_id.as_str())
        .bind(to_i64(claim.scheduled_seq))
        .bind(attempt_i32(claim.attempt)?)
        .bind(&claim.runner)
        .bind(lease.as_secs_f64())
        .fetch_one(&self.pool)
        .await?;
        Ok(extended)
    }

    /// Live workflows of one deployment (their events go to `events_prefix`) with an
    /// attempt whose claim lapsed: its runner died or gave up. The task of an attempt a
    /// process ran itself (eager dispatch) is in no outbox row and was never on NATS,
    /// so nothing else brings it back; the sweeper publishes these workflows' pending
    /// work without waiting for them to be idle.
    ///
    /// Each lapse is returned once, to one caller (the claims are marked swept as they
    /// are taken), and again after `resweep` if no runner has taken the claim over by
    /// then (the publish may have failed). Whatever else moves the workflow meanwhile
    /// — a sibling activity's steps, timers, signals — does not hide it.
    pub async fn sweep_lapsed_claims(
        &self,
        events_prefix: &str,
        resweep: Duration,
        limit: u32,
    ) -> Result<Vec<WorkflowId>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "WITH lapsed AS (
                 SELECT c.workflow_id, c.scheduled_seq, c.attempt
                   FROM attempt_claims c JOIN workflows w ON w.workflow_id = c.workflow_id
                  WHERE c.lease_until < now()
                    AND (c.swept_at IS NULL OR c.swept_at < c.lease_until
                         OR c.swept_at < now() - make_interval(secs => $2))
                    AND w.events_open AND w.status IN ('running', 'compensating')
                    AND left(w.events_subject, length($1)) = $1
                  LIMIT $3
                    FOR UPDATE OF c SKIP LOCKED),
             swept AS (
                 UPDATE attempt_claims c SET swept_at = now()
                   FROM lapsed l
                  WHERE c.workflow_id = l.workflow_id AND c.scheduled_seq = l.scheduled_seq
                    AND c.attempt = l.attempt
                 RETURNING c.workflow_id)
             SELECT DISTINCT workflow_id FROM swept",
        )
        .bind(events_prefix)
        .bind(resweep.as_secs_f64())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        ids.into_iter().map(stored_workflow_id).collect()
    }

    /// Gives the claim up (the runner could not record its outcome): another runner may
    /// take the attempt at once.
    pub async fn release_attempt_claim(&self, claim: &AttemptClaim) -> Result<()> {
        sqlx::query(
            "DELETE FROM attempt_claims
              WHERE workflow_id = $1 AND scheduled_seq = $2 AND attempt = $3 AND runner = $4",
        )
        .bind(claim.workflow_id.as_str())
        .bind(to_i64(claim.scheduled_seq))
        .bind(attempt_i32(claim.attempt)?)
        .bind(&claim.runner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

pub(crate) fn attempt_i32(attempt: u32) -> Result<i32> {
    i32::try_from(attempt)
        .map_err(|_| Error::InvalidInput(format!("attempt {attempt} is out of range")))
}
