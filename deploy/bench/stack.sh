# Sourced by run.sh and soak.sh (which set $here and $repo): a stack of its own for
# figures — Postgres (durable: fsync and synchronous_commit on) and NATS only, on ports
# apart from the dev stack's, a fresh database every time, in $HCPFLOW_BENCH_DIR — the
# release binary ($HCPFLOW_BIN, or built here), and start_config, which starts the
# processes of a deployment. Whatever it started is stopped on exit.
#
#   HCPFLOW_BENCH_METRICS_PORT=29464   the first server's --metrics-addr port (the next
#                                      servers take the ports after it); the addresses
#                                      are in $metrics_addrs (comma-separated)
#   HCPFLOW_BENCH_PG_SETTINGS="shared_buffers=2GB max_wal_size=8GB checkpoint_timeout=15min autovacuum_naptime=10s"
#                                      Postgres's settings beyond durability (empty:
#                                      Postgres's defaults)
#   HCPFLOW_BENCH_PG_CONNECTION=socket   how the servers reach Postgres: `socket`, its Unix
#                                      socket (Postgres shares their host here, as it
#                                      would be reached in production on one host), or
#                                      `tcp`, 127.0.0.1 with TLS (as from another host,
#                                      without the network's own latency)
export HCPFLOW_DEV_DIR=${HCPFLOW_BENCH_DIR:-$repo/.bench}
export HCPFLOW_DEV_PG_PORT=${HCPFLOW_BENCH_PG_PORT:-55632}
export HCPFLOW_DEV_NATS_PORT=${HCPFLOW_BENCH_NATS_PORT:-54422}
export HCPFLOW_DEV_NATS_MONITOR_PORT=${HCPFLOW_BENCH_NATS_MONITOR_PORT:-58422}
export HCPFLOW_DEV_SERVERS="postgres nats"
export HCPFLOW_DEV_PG_DURABLE=1
# Sized as a production Postgres would be (Postgres's defaults are for a small machine):
# with 128 MB of shared buffers and a checkpoint every 1 GB of WAL, a long run's event
# indexes outgrow the buffers and every checkpoint writes each page an append touches
# whole to the WAL again (full-page writes), a cost that grows with the log.
export HCPFLOW_DEV_PG_SETTINGS=${HCPFLOW_BENCH_PG_SETTINGS-shared_buffers=2GB max_wal_size=8GB checkpoint_timeout=15min autovacuum_naptime=10s}
stack=$repo/deploy/dev/stack.sh

log() { printf 'bench: %s\n' "$*" >&2; }

case ${HCPFLOW_BENCH_PG_CONNECTION:=socket} in
  socket | tcp) ;;
  *) log "HCPFLOW_BENCH_PG_CONNECTION is socket or tcp, not $HCPFLOW_BENCH_PG_CONNECTION"; exit 2 ;;
esac

hcpflow=${HCPFLOW_BIN:-}
if [[ -z $hcpflow ]]; then
  log "building the release binary"
  (cd "$repo" && cargo build --release --locked --quiet -p hcpflow-workers --bin hcpflow)
  hcpflow=${CARGO_TARGET_DIR:-$repo/target}/release/hcpflow
fi

# A fresh database and streams: a database full of earlier runs measures its sweeps too.
"$stack" down >/dev/null 2>&1 || true
if [[ -d $HCPFLOW_DEV_DIR ]]; then
  rm -rf "$(readlink -f "$HCPFLOW_DEV_DIR/postgres" 2>/dev/null || echo /nonexistent)" "$HCPFLOW_DEV_DIR"
fi
servers=()
stop_servers() {
  local pid
  for pid in "${servers[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${servers[@]}"; do wait "$pid" 2>/dev/null || true; done
  servers=()
}
cleanup() {
  stop_servers
  "$stack" down 2>> /dev/null >&2 || true
}
trap cleanup EXIT
"$stack" up
set -a
# shellcheck disable=SC1091
. "$HCPFLOW_DEV_DIR/env"
set +a
export HCPFLOW_LOG=${HCPFLOW_LOG:-warn}
export HCPFLOW_BUILTIN_WORKFLOWS=true
"$hcpflow" migrate >/dev/null
if [[ $HCPFLOW_BENCH_PG_CONNECTION == socket ]]; then
  if [[ -z ${HCPFLOW_DATABASE_SOCKET_URL:-} ]]; then
    log "Postgres has no Unix socket here (its path, beside the data directory of $HCPFLOW_DEV_DIR, is too long or holds a character other than A-Z a-z 0-9 / . _ -): set HCPFLOW_BENCH_DIR, or HCPFLOW_BENCH_PG_CONNECTION=tcp"
    exit 2
  fi
  export HCPFLOW_DATABASE_URL=$HCPFLOW_DATABASE_SOCKET_URL
fi

# Below Linux's ephemeral range (32768-60999): a port in it may be, at the moment a
# server binds it, the local end of one of the hundreds of connections a run holds
# (a server then fails to start: "Address already in use").
metrics_port=${HCPFLOW_BENCH_METRICS_PORT:-29464}
metrics_addrs=
# Starts one server process: log file $1, then the command's arguments; it serves its
# metrics on the next port.
start_server() {
  local log_file=$1; shift
  local addr=127.0.0.1:$((metrics_port + ${#servers[@]}))
  "$hcpflow" "$@" --metrics-addr "$addr" >> "$HCPFLOW_DEV_DIR/logs/$log_file" 2>&1 &
  servers+=($!)
  metrics_addrs=${metrics_addrs:+$metrics_addrs,}$addr
}

# Starts the processes of configuration $1 and waits until the API answers.
start_config() {
  local logs=$HCPFLOW_DEV_DIR/logs
  metrics_addrs=
  case $1 in
    all-in-one)
      start_server server.log server ;;
    split)
      start_server workflow.log worker --role api,workflow,relay,timer
      start_server activity.log worker --role activity ;;
    scale-out)
      start_server api.log worker --role api
      local n
      for n in 1 2; do
        start_server "engine-$n.log" worker --role workflow,relay,timer
        start_server "activity-$n.log" worker --role activity
      done ;;
    *) log "unknown configuration $1"; exit 2 ;;
  esac
  for _ in $(seq 1 100); do
    "$hcpflow" workflow list --limit 1 >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  log "the $1 processes did not answer; see $logs"
  exit 1
}

# The highest resident set size of the running servers, in MiB.
peak_rss() {
  local pid total=0 kb
  for pid in "${servers[@]}"; do
    kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    total=$((total + kb))
  done
  echo $((total / 1024))
}

