//! Observing the PrivateLink the HyperShift operators build (hypershift-aws.md §5):
//! before the control plane, whether the management cluster covers each guest zone;
//! after the NodePools, whether each zone has the operator's endpoint interfaces and the
//! records point at the endpoints; after the HostedCluster is deleted, whether the
//! operators removed it all. Nothing here creates or deletes: what is seen is noted in
//! the ledger as observed, owned by HyperShift.

pub mod coverage;
pub mod endpoints;
pub mod records;
pub mod removal;

use hcpflow_engine::ActivityFailure;
use std::future::Future;
use std::time::Duration;

use crate::poll::Poll;

/// The longest pause between two looks at the operators' work.
const LOOK_EVERY: Duration = Duration::from_secs(3);

/// One look: the value, or why not yet.
#[derive(Debug)]
pub enum Look<T> {
    Seen(T),
    NotYet(String),
}

/// Looks until seen; after `timeout_secs`, a permanent `code` failure with `what` and
/// the last reason. (The operators work at their own pace; once the deadline the user
/// chose has passed, the create rolls back or the destroy reports what is left.)
pub async fn until_seen<T, F, Fut>(
    code: &str,
    what: &str,
    timeout_secs: u64,
    mut look: F,
) -> Result<T, ActivityFailure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Look<T>, ActivityFailure>>,
{
    let mut poll = Poll::with_longest_pause(Duration::from_secs(timeout_secs), LOOK_EVERY);
    loop {
        match look().await? {
            Look::Seen(value) => return Ok(value),
            Look::NotYet(why) => {
                if !poll.again().await {
                    return Err(ActivityFailure::permanent(
                        code,
                        format!("{what} after {timeout_secs}s: {why}"),
                    ));
                }
            }
        }
    }
}
