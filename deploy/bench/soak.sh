#!/usr/bin/env bash
# `make soak`: hcpflow under a mixed load for a long time, on the bench's durable stack
# (stack.sh), release build. `hcpflow soak` first measures the capacity (its own mix,
# 256 in flight), then starts noop chains, fan-outs, timer-and-signal workflows, parents
# with children and chains that fail and compensate at SOAK_LOAD of it; it prints a line
# every minute and, at the end, a verdict: nothing failed, and the servers' memory, the
# p99 and the storage per workflow did not grow over the last half. It exits non-zero
# when the soak fails. Not part of `make test`.
#
#   SOAK_MINUTES=20           how long the load runs
#   SOAK_LOAD=0.7             the fraction of the measured capacity
#   SOAK_CONFIG=all-in-one    or split, scale-out (stack.sh's start_config)
#   SOAK_RETENTION_SECS=120   the servers' --done-retention-secs: well inside half the
#                             soak, so that the purged tables are seen to stop growing
#   HCPFLOW_BIN=path          a binary built already (default: build the release binary)
#   HCPFLOW_BENCH_PG_CONNECTION=socket  the servers reach Postgres over its Unix socket
#                             (default), or tcp (127.0.0.1 with TLS); see stack.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=deploy/bench/stack.sh
. "$here/stack.sh"

export HCPFLOW_DONE_RETENTION_SECS=${SOAK_RETENTION_SECS:-120}
start_config "${SOAK_CONFIG:-all-in-one}"
"$hcpflow" soak --minutes "${SOAK_MINUTES:-20}" --load "${SOAK_LOAD:-0.7}" \
  --server-metrics "$metrics_addrs" | tee "$HCPFLOW_DEV_DIR/soak.txt"
