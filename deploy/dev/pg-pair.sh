#!/usr/bin/env bash
# A Postgres primary with a synchronous streaming standby on 127.0.0.1, for the failover
# test (workers/tests/it/pg_failover.rs): what a managed Multi-AZ database or
# CloudNativePG with `minSyncReplicas: 1` runs, in two local servers.
#
#   pg-pair.sh up DIR       initdb a primary (durable: fsync and synchronous_commit on)
#                           with hcpflow's database and its two roles; clone the standby
#                           from it (pg_basebackup); start both; wait until the standby is
#                           the primary's synchronous one. Writes DIR/env: the ports and
#                           the roles' passwords.
#   pg-pair.sh promote DIR  lose the primary (SIGKILL to its whole process group), then
#                           promote the standby and wait until it takes writes
#   pg-pair.sh down DIR     stop both servers and delete their data
#
# Postgres's programs come from HCPFLOW_DEV_PG_BIN (the dev stack's env file names them).
# As root, the servers run as the `postgres` user, as the dev stack's does.
set -euo pipefail

pg_bin=${HCPFLOW_DEV_PG_BIN:?HCPFLOW_DEV_PG_BIN is unset: load the dev stack env (.dev/env)}
standby_name=standby1

log() { printf 'pg-pair: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
is_root() { [[ $(id -u) -eq 0 ]]; }
as_pg_user() {
  if is_root; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi
}
password() { head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Waits up to 60 s for "$@" to succeed.
wait_until() {
  local what=$1; shift
  for _ in $(seq 1 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "$what"
}

# psql as the superuser on port $1, the rest its arguments; prints unaligned rows.
psql_at() {
  local port=$1; shift
  PGPASSWORD=$super_pw "$pg_bin/psql" -X -q -At -v ON_ERROR_STOP=1 \
    -h 127.0.0.1 -p "$port" -U postgres "$@"
}

# Starts the server of data directory $1 on port $2 in a session of its own (its process
# group is the one `promote` kills); $3... are its settings.
start_server() {
  local data=$1 port=$2; shift 2
  setsid bash -c 'exec "$@"' _ $(is_root && echo setpriv --reuid=postgres --regid=postgres --init-groups --) \
    "$pg_bin/postgres" -D "$data" -p "$port" -c listen_addresses=127.0.0.1 \
    -c unix_socket_directories= "$@" >> "$data.log" 2>&1 < /dev/null &
  echo $! > "$data.pid"
  wait_until "the server of $data did not start (see $data.log)" \
    "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$port"
}

stop_server() { # data directory; fast shutdown, then SIGKILL to the group
  local pid
  pid=$(cat "$1.pid" 2>/dev/null) || return 0
  kill -INT "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL -- "-$pid" 2>/dev/null || true
}

up() {
  local dir=$1
  [[ -x $pg_bin/pg_basebackup ]] || die "no pg_basebackup in $pg_bin"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  is_root && chown postgres: "$dir"
  super_pw=$(password)
  local owner_pw app_pw primary_port standby_port pwfile
  owner_pw=$(password)
  app_pw=$(password)
  primary_port=$(free_port)
  standby_port=$(free_port)
  pwfile=$dir/superuser-password
  printf '%s\n' "$super_pw" > "$pwfile"
  is_root && chown postgres: "$pwfile"
  as_pg_user "$pg_bin/initdb" -D "$dir/primary" -U postgres --pwfile="$pwfile" \
    --auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null \
    || die "initdb failed"
  rm -f "$pwfile"
  start_server "$dir/primary" "$primary_port" -c fsync=on -c synchronous_commit=on \
    -c wal_level=replica -c max_wal_senders=4
  # The roles and database as the dev stack makes them (the owner migrates; the app runs).
  psql_at "$primary_port" -d postgres <<SQL
CREATE ROLE hcpflow_owner LOGIN PASSWORD '$owner_pw';
CREATE ROLE hcpflow_app LOGIN PASSWORD '$app_pw';
CREATE DATABASE hcpflow OWNER hcpflow_owner;
SQL
  psql_at "$primary_port" -d hcpflow \
    -c 'REVOKE CREATE ON SCHEMA public FROM PUBLIC; ALTER SCHEMA public OWNER TO hcpflow_owner;'
  # The standby: a base backup that follows the primary, under its own name (the one the
  # primary waits for). Its own synchronous_standby_names is empty: promoted, it has no
  # standby of its own, and waiting for one would stall every commit.
  PGPASSWORD=$super_pw as_pg_user "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" \
    -U postgres -D "$dir/standby" -R -X stream --checkpoint=fast \
    || die "pg_basebackup failed"
  printf "primary_conninfo = 'host=127.0.0.1 port=%s user=postgres password=%s application_name=%s'\n" \
    "$primary_port" "$super_pw" "$standby_name" | as_pg_user tee -a "$dir/standby/postgresql.auto.conf" >/dev/null
  start_server "$dir/standby" "$standby_port" -c fsync=on -c synchronous_commit=on \
    -c hot_standby=on -c wal_level=replica -c max_wal_senders=4
  # Only now does the primary wait for the standby: before it existed, every commit
  # (the roles, the database) would have waited for it.
  psql_at "$primary_port" -d postgres -c "ALTER SYSTEM SET synchronous_standby_names = '$standby_name'" \
    -c 'SELECT pg_reload_conf()' >/dev/null
  sync_standby() {
    [[ $(psql_at "$primary_port" -d postgres -c \
      "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$standby_name'") == sync ]]
  }
  wait_until "the standby never became synchronous" sync_standby
  umask 077
  cat > "$dir/env" <<ENV
PRIMARY_PORT=$primary_port
STANDBY_PORT=$standby_port
SUPERUSER_PASSWORD=$super_pw
OWNER_PASSWORD=$owner_pw
APP_PASSWORD=$app_pw
ENV
  log "primary :$primary_port, synchronous standby :$standby_port ($dir)"
}

promote() {
  local dir=$1 pid standby_port
  standby_port=$(sed -n 's/^STANDBY_PORT=//p' "$dir/env")
  super_pw=$(sed -n 's/^SUPERUSER_PASSWORD=//p' "$dir/env")
  pid=$(cat "$dir/primary.pid")
  kill -KILL -- "-$pid" 2>/dev/null || die "the primary (pid $pid) is not running"
  log "primary lost (SIGKILL to process group $pid); promoting the standby"
  [[ $(psql_at "$standby_port" -d postgres -c 'SELECT pg_promote(true, 60)') == t ]] \
    || die "the standby did not promote"
  takes_writes() { [[ $(psql_at "$standby_port" -d postgres -c 'SELECT pg_is_in_recovery()') == f ]]; }
  wait_until "the promoted standby still in recovery" takes_writes
  log "the standby on :$standby_port is the primary"
}

down() {
  local dir=$1
  stop_server "$dir/primary"
  stop_server "$dir/standby"
  rm -rf "$dir"
}

case ${1:-} in
  up|promote|down) [[ -n ${2:-} ]] || die "usage: pg-pair.sh $1 DIR"; "$1" "$2" ;;
  *) die "usage: pg-pair.sh up|promote|down DIR" ;;
esac
