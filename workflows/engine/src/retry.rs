//! Activity options: retry policy and timeouts, chosen per call.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ActivityFailure;

/// When and how often a failed activity attempt is tried again.
///
/// The delay before attempt `n + 1` is `initial_interval × backoff_coefficient^(n-1)`,
/// capped at `max_interval`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    pub initial_interval_ms: u64,
    pub backoff_coefficient: f64,
    pub max_interval_ms: u64,
    /// Total attempts, the first included; 0 means unlimited.
    pub max_attempts: u32,
    /// Failure kinds that are never retried, whatever the failure says.
    pub non_retryable: Vec<String>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            initial_interval_ms: 1_000,
            backoff_coefficient: 2.0,
            max_interval_ms: 60_000,
            max_attempts: 10,
            non_retryable: Vec::new(),
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Run attempt `attempt + 1` after `delay`.
    RetryAfter(Duration),
    /// Give up: the failure is final.
    GiveUp,
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn no_retry() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The decision after attempt `attempt` (1-based) failed with `failure`.
    pub fn decide(&self, attempt: u32, failure: &ActivityFailure) -> RetryDecision {
        let exhausted = self.max_attempts != 0 && attempt >= self.max_attempts;
        if !failure.retryable || exhausted || self.non_retryable.contains(&failure.kind) {
            return RetryDecision::GiveUp;
        }
        RetryDecision::RetryAfter(self.delay_after(attempt))
    }

    /// [`decide`](Self::decide) with jitter: the delay is drawn from its upper half by
    /// `fraction` (in `[0, 1)`, random), so that many activities failing together — all
    /// throttled by one API, say — do not all retry at the same moment.
    pub fn decide_jittered(
        &self,
        attempt: u32,
        failure: &ActivityFailure,
        fraction: f64,
    ) -> RetryDecision {
        match self.decide(attempt, failure) {
            RetryDecision::RetryAfter(delay) => {
                let fraction = if fraction.is_finite() {
                    fraction.clamp(0.0, 1.0)
                } else {
                    0.0
                };
                RetryDecision::RetryAfter(delay.mul_f64(0.5 + fraction / 2.0))
            }
            RetryDecision::GiveUp => RetryDecision::GiveUp,
        }
    }

    /// The backoff after attempt `attempt` (1-based) failed.
    pub fn delay_after(&self, attempt: u32) -> Duration {
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let coefficient = if self.backoff_coefficient.is_finite() && self.backoff_coefficient >= 1.0
        {
            self.backoff_coefficient
        } else {
            1.0
        };
        let millis = (self.initial_interval_ms as f64) * coefficient.powi(exponent);
        let capped = millis.min(self.max_interval_ms.max(self.initial_interval_ms) as f64);
        Duration::from_millis(capped as u64)
    }
}

/// Per-call options of an activity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityOptions {
    pub retry: RetryPolicy,
    /// Longest a single attempt may run.
    pub start_to_close_timeout_ms: u64,
    /// Longest an attempt may go without a heartbeat; `None` for no heartbeat check.
    pub heartbeat_timeout_ms: Option<u64>,
    /// The task queue the activity is dispatched to.
    pub task_queue: String,
}

impl Default for ActivityOptions {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            start_to_close_timeout_ms: 5 * 60 * 1000,
            heartbeat_timeout_ms: None,
            task_queue: "default".to_owned(),
        }
    }
}

impl ActivityOptions {
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    #[must_use]
    pub fn with_task_queue(mut self, queue: impl Into<String>) -> Self {
        self.task_queue = queue.into();
        self
    }

    #[must_use]
    pub fn with_start_to_close(mut self, timeout: Duration) -> Self {
        self.start_to_close_timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self
    }

    #[must_use]
    pub fn with_heartbeat(mut self, timeout: Duration) -> Self {
        self.heartbeat_timeout_ms = Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let policy = RetryPolicy {
            initial_interval_ms: 100,
            backoff_coefficient: 2.0,
            max_interval_ms: 1_000,
            max_attempts: 0,
            non_retryable: vec![],
        };
        let delays: Vec<u128> = (1..=6).map(|n| policy.delay_after(n).as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1000, 1000]);
    }

    #[test]
    fn gives_up_on_permanent_listed_or_exhausted() {
        let policy = RetryPolicy {
            max_attempts: 3,
            non_retryable: vec!["InvalidInput".into()],
            ..RetryPolicy::default()
        };
        let throttled = ActivityFailure::retryable("Throttling", "slow down");
        assert!(matches!(
            policy.decide(1, &throttled),
            RetryDecision::RetryAfter(_)
        ));
        assert_eq!(policy.decide(3, &throttled), RetryDecision::GiveUp);
        let listed = ActivityFailure::retryable("InvalidInput", "bad");
        assert_eq!(policy.decide(1, &listed), RetryDecision::GiveUp);
        let permanent = ActivityFailure::permanent("AccessDenied", "no");
        assert_eq!(policy.decide(1, &permanent), RetryDecision::GiveUp);
        assert_eq!(
            RetryPolicy::no_retry().decide(1, &throttled),
            RetryDecision::GiveUp
        );
    }

    #[test]
    fn jitter_draws_from_the_upper_half_of_the_backoff() {
        let policy = RetryPolicy::default();
        let throttled = ActivityFailure::retryable("Throttling", "slow down");
        let full = policy.delay_after(3);
        for (fraction, expected) in [(0.0, full / 2), (0.5, full.mul_f64(0.75)), (1.0, full)] {
            assert_eq!(
                policy.decide_jittered(3, &throttled, fraction),
                RetryDecision::RetryAfter(expected)
            );
        }
        let permanent = ActivityFailure::permanent("AccessDenied", "no");
        assert_eq!(
            policy.decide_jittered(1, &permanent, 0.3),
            RetryDecision::GiveUp
        );
    }
}
