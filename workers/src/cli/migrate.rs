//! `hcpflow migrate`: the database (migrations and grants) and the NATS streams.

use anyhow::Context;

use hcpflow_protocol::subjects::Subjects;
use hcpflow_protocol::NatsConfig;

use crate::runtime::nats;

/// Applies the migrations with the owner's URL and grants the application role of
/// `application_url` its rights.
pub async fn database(
    owner_url: &str,
    application_url: Option<&str>,
) -> anyhow::Result<Option<String>> {
    let role = application_url
        .map(hcpflow_eventstore::migrate::role_of_url)
        .transpose()
        .context("reading the application role from the database URL")?;
    hcpflow_eventstore::migrate::run_with_url(owner_url, role.as_deref())
        .await
        .context("migrating the database")?;
    Ok(role)
}

/// Creates the streams if missing, and brings their limits to `limits`.
pub async fn streams(
    config: &NatsConfig,
    prefix: &str,
    limits: nats::StreamLimits,
) -> anyhow::Result<()> {
    let subjects = Subjects::new(prefix)?;
    let client = hcpflow_protocol::connect(config, "hcpflow-migrate").await?;
    let js = async_nats::jetstream::new(client);
    nats::ensure_streams(&js, &subjects, limits).await
}
