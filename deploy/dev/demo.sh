#!/usr/bin/env bash
# The demo until the HyperShift workflows land: start `hcpflow server` against the local
# stack, run noop_chain workflows through the NATS API, show one history, stop the server.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
dev=${HCPFLOW_DEV_DIR:-$repo/.dev}
bin=${CARGO_TARGET_DIR:-$repo/target}/debug/hcpflow
set -a; . "$dev/env"; set +a

"$bin" migrate >/dev/null
"$bin" server >> "$dev/logs/server.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
echo "hcpflow server running (pid $server, log $dev/logs/server.log)"
sleep 2

echo
echo "Running 3 noop_chain workflows of 5 steps through the NATS API:"
"$bin" bench --workflow noop_chain --steps 5 --count 3 --concurrency 3
echo
echo "Starting one that fails at step 3, so its compensations run:"
"$bin" bench --workflow noop_chain --steps 5 --count 1 --concurrency 1 --fail-at 3 || true
echo
echo "Stack: $("$here/stack.sh" status | tr '\n' ' ')"
echo "Stop it with: make dev-down"
