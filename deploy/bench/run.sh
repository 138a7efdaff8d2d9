#!/usr/bin/env bash
# `make bench`: hcpflow's throughput and latency on a durable Postgres (fsync and
# synchronous_commit on), release build, in two deployments:
#
#   all-in-one  `hcpflow server` (every role in one process)
#   split       `hcpflow worker --role api,workflow,relay,timer` + `hcpflow worker --role activity`
#   scale-out   `hcpflow worker --role api` + two `--role workflow,relay,timer` + two
#               `--role activity` (what workers/tests/it/scale_out.rs runs; not in the
#               default BENCH_CONFIGS)
#
# It runs a stack of its own (Postgres and NATS only, on ports apart from the dev
# stack's, a fresh database every time, in $HCPFLOW_BENCH_DIR), the settings below
# $RUNS times each, and prints every report, then one table of medians. It stops
# whatever it started. The peers: deploy/bench/restate/run.sh runs Restate on the same
# workload.
#
#   RUNS=3                   runs of each setting
#   BENCH_CONFIGS="all-in-one split"
#   BENCH_IN_FLIGHT=1000     workflows in flight at once in the memory run (0: none)
#   HCPFLOW_BIN=path         a binary built already (default: build the release binary)
#   HCPFLOW_BENCH_PG_CONNECTION=socket  how the servers reach Postgres: its Unix socket
#                            (default), or tcp (127.0.0.1 with TLS); see stack.sh
#   BENCH_PEERS=restate      also run Restate (deploy/bench/restate) in every round,
#                            print its medians in the same table, then each round's
#                            ratio of hcpflow to it and their median
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
runs=${RUNS:-3}
configs=${BENCH_CONFIGS:-all-in-one split}
in_flight=${BENCH_IN_FLIGHT:-1000}
peers=${BENCH_PEERS:-}

# The durable stack, the binary, the servers and start_config: shared with soak.sh.
# shellcheck source=deploy/bench/stack.sh
. "$here/stack.sh"

# One figure of a report: the number after the label $2 in file $1.
figure() { awk -v label="$2" 'index($0, label) == 3 { sub("^  " label " *", ""); print $1; exit }' "$1"; }

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'; }

results=$HCPFLOW_DEV_DIR/results
mkdir -p "$results"

# Runs one setting once; keeps the report (round $3).
run_setting() {
  local config=$1 name=$2 round=$3; shift 3
  "$hcpflow" bench "$@" | tee "$results/$config-$name-$round.txt"
}

# The configurations take turns, round after round, so that the machine's slow spells
# (shared cores vary by tens of percent from minute to minute) fall on all of them.
for round in $(seq 1 "$runs"); do
  for config in $configs; do
    log "== round $round of $runs: $config"
    start_config "$config"
    "$hcpflow" bench --steps 10 --count 300 --concurrency 16 >/dev/null   # warm-up
    run_setting "$config" m10c1 "$round" --steps 10 --count 300 --concurrency 1
    run_setting "$config" m10c32 "$round" --steps 10 --count 1000 --concurrency 32
    run_setting "$config" m1c32 "$round" --steps 1 --count 2000 --concurrency 32
    if (( in_flight > 0 && round == runs )); then
      run_setting "$config" inflight 1 --steps 10 --count "$in_flight" --concurrency "$in_flight" --timeout-secs 300
    fi
    echo "$(peak_rss)" >> "$results/$config-rss.txt"
    stop_servers
  done
  for peer in $peers; do
    log "== round $round of $runs: $peer"
    RUNS=1 "$here/$peer/run.sh" | tee "$results/peer-$peer-$round.txt"
  done
done

settings() {
  local config=$1 setting=$2 label=$3
  for file in "$results/$config-$setting"-*.txt; do [[ -f $file ]] && figure "$file" "$label"; done | median
}

echo
first_report=$(ls "$results"/*.txt | head -n 1)
echo "hcpflow, release, Postgres $(awk '/^  postgres/ {$1=""; print; exit}' "$first_report" | sed 's/^ //'), writers over $(awk '/^  pg writers/ {$1=$2=$3=""; print; exit}' "$first_report" | sed 's/^ *//') (HCPFLOW_BENCH_PG_CONNECTION=$HCPFLOW_BENCH_PG_CONNECTION), medians of $runs runs"
printf '%-11s | %-22s | %-14s | %-14s | %-16s | %-18s | %s\n' configuration "M=10 C=1 p50 (p99)" "M=10 C=32 st/s" "M=1 C=32 wf/s" "write txns/step" "in flight: failed" "peak RSS"
for config in $configs; do
  p50=$(settings "$config" m10c1 "latency p50")
  p99=$(settings "$config" m10c1 "latency p99")
  steps=$(settings "$config" m10c32 "steps/s")
  wfs=$(settings "$config" m1c32 "workflows/s")
  txns=$(for file in "$results/$config-m10c32"-*.txt; do awk '/pg write txns/ { gsub(/[()]/, ""); print $5 }' "$file"; done | median)
  txns1=$(for file in "$results/$config-m10c1"-*.txt; do awk '/pg write txns/ { gsub(/[()]/, ""); print $5 }' "$file"; done | median)
  failed=-
  if [[ -f $results/$config-inflight-1.txt ]]; then
    failed=$(awk '/completed/ { gsub(/[()]/, ""); print $3 " failed of " $2 + $3; exit }' "$results/$config-inflight-1.txt")
  fi
  rss=$(sort -n "$results/$config-rss.txt" | tail -n 1)
  printf '%-11s | %-22s | %-14s | %-14s | %-16s | %-18s | %s MiB\n' "$config" "$p50 ms ($p99 ms)" "$steps" "$wfs" "$txns (C=1: $txns1)" "$failed" "$rss"
done
# A peer's headline: "headline: p50 at M=10 C=1 X ms | steps/s at M=10 C=32 Y | workflows/s at M=1 C=32 Z".
# The figure of setting $2 (say "M=10 C=1") in the peer report $1.
peer_figure() { sed -n "s/^headline: .*$2 \([0-9.]*\).*/\1/p" "$1" 2>/dev/null || true; }
for peer in $peers; do
  headline() { for file in "$results/peer-$peer"-*.txt; do peer_figure "$file" "$1"; done | median; }
  printf '%-11s | %-22s | %-14s | %-14s | %-16s | %-18s | %s\n' "$peer" "$(headline 'M=10 C=1') ms" "$(headline 'M=10 C=32')" "$(headline 'M=1 C=32')" - - -
done
# Each round's ratio to each peer, and their median: the runs of one round are minutes
# apart, those of different rounds further, so a ratio taken within a round holds better
# on a machine whose speed drifts than a ratio of medians.
for peer in $peers; do
  echo
  echo "against $peer, round by round (median): p50 is hcpflow's over $peer's, lower is better; throughput is hcpflow's over $peer's, higher is better"
  for config in $configs; do
    for spec in "m10c1|latency p50|M=10 C=1|p50 M=10 C=1" "m10c32|steps/s|M=10 C=32|steps/s M=10 C=32" "m1c32|workflows/s|M=1 C=32|workflows/s M=1 C=32"; do
      IFS='|' read -r setting label peer_label title <<<"$spec"
      ratios=()
      for round in $(seq 1 "$runs"); do
        ours=$(figure "$results/$config-$setting-$round.txt" "$label" 2>/dev/null || true)
        theirs=$(peer_figure "$results/peer-$peer-$round.txt" "$peer_label")
        if [[ -n $ours && -n $theirs ]]; then
          ratios+=("$(awk -v a="$ours" -v b="$theirs" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')")
        else
          ratios+=("-")
        fi
      done
      printf '%-11s | %-22s | %s (%s)\n' "$config" "$title" "${ratios[*]}" "$(printf '%s\n' "${ratios[@]}" | grep -v '^-$' | median)"
    done
  done
done
