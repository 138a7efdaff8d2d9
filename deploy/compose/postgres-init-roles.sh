#!/bin/sh
# Runs once, when the postgres service first initialises its volume: the migration owner
# (owns the schema; only `migrate` logs in as it) and the application role (append-only
# on the event log; the grants are `hcpflow migrate`'s). psql reads the passwords from
# the secrets itself (never in a command line), and an empty one stops the setup.
set -eu
for secret in postgres-owner-password postgres-app-password; do
  if [ ! -s "/run/secrets/$secret" ]; then
    echo "hcpflow roles: /run/secrets/$secret is missing or empty" >&2
    exit 1
  fi
done
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
\set owner_password `cat /run/secrets/postgres-owner-password`
\set app_password `cat /run/secrets/postgres-app-password`
CREATE ROLE hcpflow_owner LOGIN PASSWORD :'owner_password';
CREATE ROLE hcpflow_app LOGIN PASSWORD :'app_password';
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
ALTER SCHEMA public OWNER TO hcpflow_owner;
SQL
