//! Waiting on AWS: look, and while the answer is "not yet", look again after a pause
//! that doubles up to 15 s, until a limit. Past the limit the caller fails retryably,
//! and the next attempt finds the resource and waits on.

use std::time::Duration;

use tokio::time::Instant;

const FIRST_PAUSE: Duration = Duration::from_millis(500);
const LONGEST_PAUSE: Duration = Duration::from_secs(15);

#[derive(Debug)]
pub struct Poll {
    deadline: Instant,
    pause: Duration,
    longest: Duration,
}

impl Poll {
    pub fn new(limit: Duration) -> Self {
        Self::with_longest_pause(limit, LONGEST_PAUSE)
    }

    /// Pauses grow to `longest` at most: for waits on someone else's work (the
    /// operators'), where the answer comes at any moment and a look is cheap.
    pub fn with_longest_pause(limit: Duration, longest: Duration) -> Self {
        Self {
            deadline: Instant::now() + limit,
            pause: FIRST_PAUSE,
            longest,
        }
    }

    /// Pauses before the next look; `false` (at once) when the limit has passed.
    pub async fn again(&mut self) -> bool {
        if Instant::now() >= self.deadline {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(self.longest);
        true
    }
}
