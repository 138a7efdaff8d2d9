#!/bin/sh
# Runs once, when the postgres service first initialises its volume: the migration owner
# (owns the schema; only `migrate` logs in as it) and the application role (append-only
# on the event log; the grants are `hcpflow migrate`'s). Passwords come from the secrets.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v owner_password="$(cat /run/secrets/postgres-owner-password)" \
  -v app_password="$(cat /run/secrets/postgres-app-password)" <<'SQL'
CREATE ROLE hcpflow_owner LOGIN PASSWORD :'owner_password';
CREATE ROLE hcpflow_app LOGIN PASSWORD :'app_password';
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
ALTER SCHEMA public OWNER TO hcpflow_owner;
SQL
