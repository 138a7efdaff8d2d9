#!/usr/bin/env bash
# `make demo`: run `hcpflow server` against the local stack, then do what a platform
# team does with hcpflow, through the NATS API and the `hcpflow` command: create a 3-AZ
# PublicAndPrivate hosted cluster, scale a NodePool, audit the histories, destroy it,
# and show from outside hcpflow (moto and the Kubernetes emulator) that nothing is left.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
dev=${HCPFLOW_DEV_DIR:-$repo/.dev}
cache=${HCPFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hcpflow}
python=$cache/venv/bin/python
hcpflow=${CARGO_TARGET_DIR:-$repo/target}/debug/hcpflow
set -a; . "$dev/env"; set +a

name=${HCPFLOW_DEMO_CLUSTER:-demo}
bucket=hcpflow-demo-oidc
base_domain=hcpflow-demo.example.com
namespace=clusters

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }
field() { "$python" -c 'import json, sys; d = json.load(sys.stdin); print(eval("d" + sys.argv[1]))' "$1"; }

"$hcpflow" migrate >/dev/null
"$hcpflow" server >> "$dev/logs/server.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
echo "hcpflow server running (pid $server, log $dev/logs/server.log)"

step "1. Prerequisites in moto (they exist before any hosted cluster, as in HyperShift)"
"$python" "$here/demo_aws.py" prerequisites "$dev/demo" "$name"

# An interrupted earlier demo may have left the cluster: destroy it first.
if state=$("$hcpflow" cluster status "$name" -o json 2>/dev/null | field '["cluster"]["state"]' 2>/dev/null) \
   && [[ $state != destroyed ]]; then
  echo "an earlier demo left cluster $name ($state); destroying it first"
  "$hcpflow" cluster destroy "$name" >/dev/null
fi

step "2. Create the hosted cluster"
show "$hcpflow" cluster create -f "$dev/demo/cluster.yaml"
infra_id=$("$hcpflow" cluster status "$name" -o json | field '["cluster"]["infra_id"]')

echo
echo "PrivateLink, made by the HyperShift operators (hcpflow checked the zones before and"
echo "observed each zone's endpoint interfaces after), as moto holds it:"
"$python" "$here/demo_aws.py" privatelink "$infra_id" "$name"
echo
echo "What moto and the Kubernetes emulator hold of $infra_id (asked directly, not through hcpflow):"
"$python" "$here/demo_aws.py" holdings "$infra_id" "$name" "$bucket" "$base_domain" "$namespace"

step "3. Scale one NodePool to 4 replicas"
show "$hcpflow" cluster scale "$name" --node-pool "$name-us-east-1a" --replicas 4
echo
show "$hcpflow" cluster status "$name"

step "4. Audit: hash-chained histories, signed heads, an offline check"
show "$hcpflow" audit verify --cluster "$name"
create_id=$("$hcpflow" cluster status "$name" -o json | field '["cluster"]["create_workflow_id"]')
public_key=$("$hcpflow" audit public-key 2>/dev/null)
echo
show "$hcpflow" audit export "$create_id" --out "$dev/demo/create-audit.jsonl"
echo '$ hcpflow audit verify-file '"$dev/demo/create-audit.jsonl"' --public-key '"$public_key"' | head -2'
"$hcpflow" audit verify-file "$dev/demo/create-audit.jsonl" --public-key "$public_key" | sed -n '1,2p'

step "5. Destroy the hosted cluster"
show "$hcpflow" cluster destroy "$name"

step "6. Nothing is left"
echo "What moto and the Kubernetes emulator hold of $infra_id now:"
left=$("$python" "$here/demo_aws.py" holdings "$infra_id" "$name" "$bucket" "$base_domain" "$namespace")
echo "$left"
echo
show "$hcpflow" audit verify --cluster "$name"
echo
show "$hcpflow" cluster status "$name"
if ! grep -q "total: 0 object" <<<"$left"; then
  echo "demo: something of $infra_id was left behind" >&2
  exit 1
fi
echo
echo "Done. The stack keeps running (make dev-down stops it); the server log is $dev/logs/server.log."
