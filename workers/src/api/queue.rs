//! Backpressure at the API: a bounded number of requests handled at once, a bounded
//! number waiting for their turn, and a bounded wait. A request beyond either bound is
//! answered `overloaded` at once, with a suggested pause, instead of waiting until its
//! client gives up: the client then knows it was not looked at, and sends it again.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hcpflow_protocol::ApiError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bounds (`--api-concurrency`, `--api-queue`, `--api-queue-wait-ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Requests handled at once.
    pub concurrency: usize,
    /// Requests waiting for one of those places.
    pub waiting: usize,
    /// The longest a request waits for a place; well under a client's timeout (30 s for
    /// `hcpflow` itself), so that the answer arrives while someone still listens.
    pub max_wait: Duration,
}

impl Default for QueueLimits {
    fn default() -> Self {
        Self {
            concurrency: 256,
            waiting: 4096,
            max_wait: Duration::from_secs(10),
        }
    }
}

#[derive(Debug)]
pub struct RequestQueue {
    limits: QueueLimits,
    places: Arc<Semaphore>,
    waiting: AtomicUsize,
    /// How long a request has held its place, on average (µs, moving average).
    mean_hold_micros: AtomicU64,
}

/// A place to handle one request; given back when dropped.
#[derive(Debug)]
pub struct Place<'q> {
    queue: &'q RequestQueue,
    _permit: OwnedSemaphorePermit,
    taken: Instant,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let held = u64::try_from(self.taken.elapsed().as_micros()).unwrap_or(u64::MAX);
        let mean = self.queue.mean_hold_micros.load(Ordering::Relaxed);
        // One eighth of the new sample: a moving average over the last few dozen.
        let updated = mean - mean / 8 + held / 8;
        self.queue
            .mean_hold_micros
            .store(updated, Ordering::Relaxed);
    }
}

impl RequestQueue {
    pub fn new(limits: QueueLimits) -> Self {
        let limits = QueueLimits {
            concurrency: limits.concurrency.max(1),
            ..limits
        };
        Self {
            places: Arc::new(Semaphore::new(limits.concurrency)),
            limits,
            waiting: AtomicUsize::new(0),
            mean_hold_micros: AtomicU64::new(1_000),
        }
    }

    /// A place for one request, at once or after waiting in line; `overloaded` when the
    /// line is full or the wait runs out.
    pub async fn enter(&self) -> Result<Place<'_>, ApiError> {
        if let Ok(permit) = self.places.clone().try_acquire_owned() {
            return Ok(self.place(permit));
        }
        let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _leave = LeaveLine(&self.waiting);
        if ahead >= self.limits.waiting {
            return Err(self.overloaded(ahead, "its line of waiting requests is full"));
        }
        match tokio::time::timeout(self.limits.max_wait, self.places.clone().acquire_owned()).await
        {
            Ok(Ok(permit)) => Ok(self.place(permit)),
            Ok(Err(_closed)) => Err(ApiError::new(
                hcpflow_protocol::ErrorCode::Unavailable,
                "the server is shutting down",
            )),
            Err(_elapsed) => Err(self.overloaded(
                self.waiting.load(Ordering::Acquire),
                "the request waited its longest for a turn",
            )),
        }
    }

    /// Waits until every place is free again (every request answered), for at most
    /// `grace`; whether they all were.
    pub async fn drain(&self, grace: Duration) -> bool {
        let all = u32::try_from(self.limits.concurrency).unwrap_or(u32::MAX);
        tokio::time::timeout(grace, self.places.acquire_many(all))
            .await
            .is_ok()
    }

    fn place(&self, permit: OwnedSemaphorePermit) -> Place<'_> {
        Place {
            queue: self,
            _permit: permit,
            taken: Instant::now(),
        }
    }

    /// `overloaded`, suggesting the time the requests in line ahead take to be handled
    /// (between 50 ms and 10 s).
    fn overloaded(&self, ahead: usize, why: &str) -> ApiError {
        let mean = Duration::from_micros(self.mean_hold_micros.load(Ordering::Relaxed));
        let rounds = (ahead / self.limits.concurrency + 1) as u32;
        let pause = (mean * rounds).clamp(Duration::from_millis(50), Duration::from_secs(10));
        ApiError::overloaded(
            format!(
                "the server is overloaded ({why}: {} handled at once, {} may wait, for {} ms at most); this request was not looked at: send it again after retry_after_ms",
                self.limits.concurrency,
                self.limits.waiting,
                self.limits.max_wait.as_millis()
            ),
            pause,
        )
    }
}

/// Counts a request out of the line however it leaves it.
struct LeaveLine<'a>(&'a AtomicUsize);

impl Drop for LeaveLine<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcpflow_protocol::ErrorCode;

    fn limits(concurrency: usize, waiting: usize, max_wait_ms: u64) -> QueueLimits {
        QueueLimits {
            concurrency,
            waiting,
            max_wait: Duration::from_millis(max_wait_ms),
        }
    }

    #[tokio::test]
    async fn a_full_line_is_answered_overloaded_at_once_with_a_pause() {
        let queue = Arc::new(RequestQueue::new(limits(1, 1, 60_000)));
        let held = queue.enter().await.unwrap();
        let waiter = {
            let queue = queue.clone();
            tokio::spawn(async move { queue.enter().await.map(|_| ()) })
        };
        while queue.waiting.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        let started = Instant::now();
        let refused = queue.enter().await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(refused.code, ErrorCode::Overloaded);
        let pause = refused.retry_after_ms.unwrap();
        assert!((50..=10_000).contains(&pause), "{pause}");
        drop(held);
        waiter.await.unwrap().unwrap();
        assert_eq!(queue.waiting.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn a_wait_that_runs_out_is_overloaded_and_leaves_the_line() {
        let queue = RequestQueue::new(limits(1, 10, 50));
        let _held = queue.enter().await.unwrap();
        let refused = queue.enter().await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::Overloaded);
        assert!(refused.message.contains("longest"), "{}", refused.message);
        assert_eq!(queue.waiting.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn drain_waits_for_every_place() {
        let queue = RequestQueue::new(limits(2, 0, 10));
        let held = queue.enter().await.unwrap();
        assert!(!queue.drain(Duration::from_millis(20)).await);
        drop(held);
        assert!(queue.drain(Duration::from_millis(20)).await);
    }
}
