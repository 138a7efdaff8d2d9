#!/usr/bin/env bash
# Side-by-side reference: Restate 1.7.12 on hcpflow's noop_chain workload.
#
# Installs the pinned npm packages once into a cache outside the repo, starts
# restate-server (all listeners on 127.0.0.1, fresh data dir, default
# durability: its log fsyncs), starts the NoopChain service, registers it,
# warms up, then runs three settings RUNS times each and prints every report
# plus a table of medians. Every process it starts is stopped on exit.
#
# Environment (all optional):
#   RUNS=3                      rounds; each round runs the three settings once
#   COUNT_C1=300                workflows for steps 10, concurrency 1
#   COUNT_C32=1000              workflows for steps 10, concurrency 32
#   COUNT_M1=2000               workflows for steps 1,  concurrency 32
#   WARMUP_COUNT=200            warm-up workflows (steps 10, concurrency 32); 0 skips it
#   IDEMPOTENCY=0               1: send a unique idempotency-key with every call
#   HCPFLOW_CACHE_DIR           cache root (default $HOME/.cache/hcpflow)
#   RESTATE_BENCH_INGRESS_PORT=18080  RESTATE_BENCH_ADMIN_PORT=19070
#   RESTATE_BENCH_NODE_PORT=15122     RESTATE_BENCH_SERVICE_PORT=19080
#   KEEP_DATA=0                 1: keep the run's data dir and logs
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${HCPFLOW_CACHE_DIR:-$HOME/.cache/hcpflow}/restate-bench"

RUNS="${RUNS:-3}"
COUNT_C1="${COUNT_C1:-300}"
COUNT_C32="${COUNT_C32:-1000}"
COUNT_M1="${COUNT_M1:-2000}"
WARMUP_COUNT="${WARMUP_COUNT:-200}"
IDEMPOTENCY="${IDEMPOTENCY:-0}"
KEEP_DATA="${KEEP_DATA:-0}"
INGRESS_PORT="${RESTATE_BENCH_INGRESS_PORT:-18080}"
ADMIN_PORT="${RESTATE_BENCH_ADMIN_PORT:-19070}"
NODE_PORT="${RESTATE_BENCH_NODE_PORT:-15122}"
SERVICE_PORT="${RESTATE_BENCH_SERVICE_PORT:-19080}"
HOST=127.0.0.1

log() { echo "run.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

for tool in node npm curl; do
  command -v "$tool" >/dev/null || die "$tool is not installed"
done
for v in RUNS COUNT_C1 COUNT_C32 COUNT_M1 WARMUP_COUNT INGRESS_PORT ADMIN_PORT NODE_PORT SERVICE_PORT; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, not '${!v}'"
done
(( RUNS >= 1 )) || die "RUNS must be at least 1"

# --- install (once; again only when package.json or the lock change) --------
mkdir -p "$CACHE"
export SCARF_ANALYTICS=false   # restate-server depends on @scarf/scarf; never let it report
if ! cmp -s "$HERE/package.json" "$CACHE/package.json" \
  || ! cmp -s "$HERE/package-lock.json" "$CACHE/package-lock.json" \
  || [[ ! -d "$CACHE/node_modules" ]]; then
  log "installing npm packages into $CACHE"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$CACHE/"
  (cd "$CACHE" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
fi
# Compile the two TypeScript files (a second or two; always, so edits are picked up).
cp "$HERE/service.ts" "$HERE/driver.ts" "$HERE/tsconfig.json" "$CACHE/"
(cd "$CACHE" && rm -rf dist && ./node_modules/.bin/tsc -p tsconfig.json) >&2

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform=linux-x64 ;;
  Linux-aarch64 | Linux-arm64) platform=linux-arm64 ;;
  Darwin-x86_64) platform=darwin-x64 ;;
  Darwin-arm64) platform=darwin-arm64 ;;
  *) die "no restate-server package for $(uname -s)-$(uname -m)" ;;
esac
SERVER_BIN="$CACHE/node_modules/@restatedev/restate-server-$platform/bin/restate-server"
[[ -x "$SERVER_BIN" ]] || die "restate-server binary missing at $SERVER_BIN"

# --- processes and cleanup ----------------------------------------------------
RUN_DIR="$(mktemp -d "$CACHE/run.XXXXXX")"
SERVER_PID=""
SERVICE_PID=""
DRIVER_PID=""

stop_pid() { # pid name
  local pid="$1" name="$2" i
  [[ -n "$pid" ]] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do # up to 15 s for a clean shutdown
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name ($pid) did not stop in 15 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$DRIVER_PID" "driver"
  stop_pid "$SERVICE_PID" "service"
  stop_pid "$SERVER_PID" "restate-server"
  if (( rc != 0 )); then
    for f in restate-server.log service.log; do
      if [[ -s "$RUN_DIR/$f" ]]; then
        log "last lines of $f:"
        tail -n 20 "$RUN_DIR/$f" >&2 || true
      fi
    done
  fi
  if [[ "$KEEP_DATA" == 1 ]]; then
    log "data and logs kept in $RUN_DIR"
  else
    rm -rf "$RUN_DIR"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_in_use() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }
for port in "$INGRESS_PORT" "$ADMIN_PORT" "$NODE_PORT" "$SERVICE_PORT"; do
  port_in_use "$port" && die "port $HOST:$port is already in use (set RESTATE_BENCH_*_PORT)"
done

wait_for() { # description seconds command...
  local what="$1" deadline=$((SECONDS + $2))
  shift 2
  while ((SECONDS < deadline)); do
    "$@" >/dev/null 2>&1 && return 0
    [[ -n "$SERVER_PID" ]] && ! kill -0 "$SERVER_PID" 2>/dev/null && die "restate-server exited"
    [[ -n "$SERVICE_PID" ]] && ! kill -0 "$SERVICE_PID" 2>/dev/null && die "the service exited"
    sleep 0.1
  done
  die "timed out waiting for $what"
}

# restate-server: every listener on 127.0.0.1 (TCP only, no unix sockets),
# telemetry off, a fresh base dir, everything else default (fsync on).
log "starting restate-server $("$SERVER_BIN" --version | awk '{print $2}') in $RUN_DIR"
(
  cd "$RUN_DIR"
  exec env \
    RESTATE_LISTEN_MODE=tcp \
    RESTATE_BIND_IP="$HOST" \
    RESTATE_BIND_ADDRESS="$HOST:$NODE_PORT" \
    RESTATE_ADVERTISED_ADDRESS="http://$HOST:$NODE_PORT/" \
    RESTATE_INGRESS__BIND_ADDRESS="$HOST:$INGRESS_PORT" \
    RESTATE_INGRESS__ADVERTISED_INGRESS_ENDPOINT="http://$HOST:$INGRESS_PORT/" \
    RESTATE_ADMIN__BIND_ADDRESS="$HOST:$ADMIN_PORT" \
    RESTATE_ADMIN__ADVERTISED_ADMIN_ENDPOINT="http://$HOST:$ADMIN_PORT/" \
    RESTATE_DISABLE_TELEMETRY=true \
    RESTATE_LOG_DISABLE_ANSI_CODES=true \
    "$SERVER_BIN" --no-logo --node-name bench --base-dir "$RUN_DIR/data"
) >"$RUN_DIR/restate-server.log" 2>&1 &
SERVER_PID=$!

wait_for "the admin API" 60 curl -fsS --max-time 5 "http://$HOST:$ADMIN_PORT/health"
wait_for "the ingress" 60 curl -fsS --max-time 5 "http://$HOST:$INGRESS_PORT/restate/health"

log "starting the NoopChain service on $HOST:$SERVICE_PORT"
SERVICE_PORT="$SERVICE_PORT" RESTATE_LOGGING=WARN \
  node "$CACHE/dist/service.js" >"$RUN_DIR/service.log" 2>&1 &
SERVICE_PID=$!
wait_for "the service port" 30 port_in_use "$SERVICE_PORT"

log "registering http://$HOST:$SERVICE_PORT with the admin API"
curl -fsS --max-time 30 -X POST "http://$HOST:$ADMIN_PORT/deployments" \
  -H 'content-type: application/json' \
  -d "{\"uri\": \"http://$HOST:$SERVICE_PORT\"}" >"$RUN_DIR/registration.json" \
  || die "registration failed"

# The ingress learns the new service shortly after registration.
wait_for "NoopChain at the ingress" 30 curl -fsS --max-time 10 -X POST \
  "http://$HOST:$INGRESS_PORT/NoopChain/run" -H 'content-type: application/json' -d '{"steps": 1}'

# --- runs -----------------------------------------------------------------------
DRIVER=(node "$CACHE/dist/driver.js" --ingress "http://$HOST:$INGRESS_PORT")
[[ "$IDEMPOTENCY" == 1 ]] && DRIVER+=(--idempotency)
RESULTS="$RUN_DIR/results.tsv" # setting, workflows/s, steps/s, p50, p99, failed
: >"$RESULTS"
any_failed=0

bench() { # label count concurrency steps
  local label="$1" out rc=0
  # In the background + wait, so that a signal stops the run at once.
  "${DRIVER[@]}" --count "$2" --concurrency "$3" --steps "$4" >"$RUN_DIR/driver.out" &
  DRIVER_PID=$!
  wait "$DRIVER_PID" || rc=$?
  DRIVER_PID=""
  out="$(cat "$RUN_DIR/driver.out")"
  echo "$out"
  [[ -n "$out" ]] || die "the driver printed nothing (exit $rc)"
  (( rc == 0 )) || any_failed=1
  [[ "$label" == warmup ]] && return 0
  awk -v label="$label" '
    /^  completed/    { failed = $3; sub(/^\(/, "", failed) }
    /^  workflows\/s/ { wps = $2 }
    /^  steps\/s/     { sps = $2 }
    /^  latency p50/  { p50 = $3 }
    /^  latency p99/  { p99 = $3 }
    END { printf "%s\t%s\t%s\t%s\t%s\t%s\n", label, wps, sps, p50, p99, failed }
  ' <<<"$out" >>"$RESULTS"
}

if (( WARMUP_COUNT > 0 )); then
  echo "== warm-up"
  bench warmup "$WARMUP_COUNT" 32 10
  echo
fi

for ((round = 1; round <= RUNS; round++)); do
  echo "== round $round of $RUNS"
  bench m10c1 "$COUNT_C1" 1 10
  bench m10c32 "$COUNT_C32" 32 10
  bench m1c32 "$COUNT_M1" 32 1
  echo
done

# --- medians ----------------------------------------------------------------------
median() { # setting column
  awk -F'\t' -v s="$1" -v c="$2" '$1 == s { print $c }' "$RESULTS" | sort -g | awk '
    { v[NR] = $1 }
    END {
      if (NR == 0) { print "-"; exit }
      if (NR % 2) printf "%.1f\n", v[(NR + 1) / 2]
      else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
    }'
}

echo "== summary: medians of $RUNS run(s), restate-server $("$SERVER_BIN" --version | awk '{print $2}')"
printf '%-22s %12s %12s %10s %10s %8s\n' setting workflows/s steps/s "p50 ms" "p99 ms" failed
for row in "m10c1:steps 10, conc 1" "m10c32:steps 10, conc 32" "m1c32:steps 1,  conc 32"; do
  key="${row%%:*}"
  printf '%-22s %12s %12s %10s %10s %8s\n' "${row#*:}" \
    "$(median "$key" 2)" "$(median "$key" 3)" "$(median "$key" 4)" "$(median "$key" 5)" \
    "$(awk -F'\t' -v s="$key" '$1 == s { n += $6 } END { print n + 0 }' "$RESULTS")"
done
echo
echo "headline: p50 at M=10 C=1 $(median m10c1 4) ms | steps/s at M=10 C=32 $(median m10c32 3) | workflows/s at M=1 C=32 $(median m1c32 2)"

(( any_failed == 0 )) || die "some calls failed (see the reports above)"
