//! LISTEN/NOTIFY: how relays and timer services learn that an append wrote work for
//! them, without polling Postgres on the hot path.

use sqlx::postgres::PgListener;

use crate::error::Result;
use crate::store::EventStore;

/// A dedicated connection listening on some channels.
#[derive(Debug)]
pub struct Listener {
    inner: PgListener,
}

impl Listener {
    /// Waits for the next notification and returns its channel. After a lost
    /// connection it reconnects and returns the error once; callers then check for
    /// work they may have missed.
    pub async fn recv(&mut self) -> Result<String> {
        let notification = self.inner.recv().await?;
        Ok(notification.channel().to_owned())
    }
}

impl EventStore {
    pub async fn listen(&self, channels: &[&str]) -> Result<Listener> {
        let mut inner = PgListener::connect_with(&self.pool).await?;
        inner.listen_all(channels.iter().copied()).await?;
        Ok(Listener { inner })
    }
}
