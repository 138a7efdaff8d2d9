//! Embedded migrations, and the grants that make the application role append-only.
//!
//! Run with the migration owner's connection (`HCPFLOW_DATABASE_ADMIN_URL`). Safe to run
//! any number of times and from several processes at once: sqlx serialises the
//! migrations with an advisory lock, and the grants take one of their own.

use sqlx::migrate::Migrator;
use sqlx::PgPool;

use crate::error::{Error, Result};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// What the application role may do: read and append the event log, never change it.
const APPLICATION_GRANTS: &[&str] = &[
    "GRANT USAGE ON SCHEMA public TO {role}",
    "REVOKE ALL ON events FROM {role}",
    "GRANT SELECT, INSERT ON events TO {role}",
    "GRANT SELECT, INSERT, UPDATE ON workflows TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON outbox, timers, attempt_claims TO {role}",
    "GRANT SELECT, INSERT ON resource_ledger TO {role}",
    "GRANT SELECT, INSERT, UPDATE ON cluster_registry TO {role}",
    "REVOKE ALL ON audit_checkpoints FROM {role}",
    "GRANT SELECT, INSERT ON audit_checkpoints TO {role}",
    "GRANT SELECT, INSERT ON seal_key_checks TO {role}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}",
    // Readiness: a process reports whether the schema is at the version it was built for.
    "GRANT SELECT ON _sqlx_migrations TO {role}",
];

/// Applies every embedded migration not yet applied, then grants `application_role`
/// (when given) exactly the rights the application needs.
pub async fn run(owner_pool: &PgPool, application_role: Option<&str>) -> Result<()> {
    MIGRATOR.run(owner_pool).await?;
    if let Some(role) = application_role {
        grant_application_role(owner_pool, role).await?;
    }
    Ok(())
}

/// The version of the newest migration this build carries: a database at an older one
/// is not ready for it.
pub fn expected_version() -> i64 {
    MIGRATOR
        .iter()
        .map(|migration| migration.version)
        .max()
        .unwrap_or(0)
}

/// The newest migration applied to the database, if any (`None` for a database no
/// migration ran on).
pub async fn applied_version(pool: &PgPool) -> Result<Option<i64>> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await?;
    if !exists {
        return Ok(None);
    }
    let version = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
        .fetch_one(pool)
        .await?;
    Ok(version)
}

/// Whether the database's schema serves this build: at its newest migration, or newer
/// (a later release's, migrated ahead of a rolling restart: migrations only add, so this
/// build still runs on it). `Err` says why not, in words an operator acts on.
pub async fn schema_serves_this_build(pool: &PgPool) -> std::result::Result<i64, String> {
    let expected = expected_version();
    match applied_version(pool).await {
        Ok(Some(applied)) if applied >= expected => Ok(applied),
        Ok(Some(applied)) => Err(format!(
            "schema at migration {applied}, this build needs {expected}: run `hcpflow migrate`"
        )),
        Ok(None) => Err("no migration has run: run `hcpflow migrate`".to_owned()),
        Err(error) => Err(format!("reading the schema's version failed: {error}")),
    }
}

/// Connects with the owner's URL and runs [`run`].
pub async fn run_with_url(owner_url: &str, application_role: Option<&str>) -> Result<()> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(owner_url)
        .await?;
    let outcome = run(&pool, application_role).await;
    pool.close().await;
    outcome
}

/// The role name in a Postgres connection URL, e.g. the application role of
/// `HCPFLOW_DATABASE_URL`.
pub fn role_of_url(url: &str) -> Result<String> {
    let options: sqlx::postgres::PgConnectOptions = url
        .parse()
        .map_err(|error| Error::InvalidInput(format!("not a Postgres URL: {error}")))?;
    Ok(options.get_username().to_owned())
}

async fn grant_application_role(owner_pool: &PgPool, role: &str) -> Result<()> {
    let quoted = quote_role(role)?;
    let mut tx = owner_pool.begin().await?;
    // Concurrent GRANTs on one table fail with "tuple concurrently updated": serialise them.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('hcpflow.migrate.grants'))")
        .execute(&mut *tx)
        .await?;
    for grant in APPLICATION_GRANTS {
        sqlx::query(&grant.replace("{role}", &quoted))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Role names are identifiers spliced into GRANT statements: accept only plain ones.
fn quote_role(role: &str) -> Result<String> {
    let plain = !role.is_empty()
        && role.len() <= 63
        && role.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && role
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        Ok(format!("\"{role}\""))
    } else {
        Err(Error::InvalidInput(format!(
            "application role {role:?} must be 1-63 characters of a-z, 0-9 and _, not starting with a digit"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_role_names_are_spliced() {
        assert_eq!(quote_role("hcpflow_app").unwrap(), "\"hcpflow_app\"");
        assert!(quote_role("app\"; DROP TABLE events; --").is_err());
        assert!(quote_role("1app").is_err());
        assert!(quote_role("").is_err());
    }
}
