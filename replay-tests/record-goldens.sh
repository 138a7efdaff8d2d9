#!/usr/bin/env bash
# Records golden histories into replay-tests/histories/ from real runs on the local
# stack: a server with its own prefix and a signing key of this recording, the
# scenarios run through the `hcpflow` command, each history exported with its signed
# head, and the public key saved under histories/keys/ so the tests can check it.
#
#   replay-tests/record-goldens.sh [CASE...]
#
# Cases: create, scale, destroy, rolled-back, resumed (the default: all five), and
# scale-patched (run after a `patched` change to scale_node_pool), and
# operator-privatelink (a create and destroy since the HyperShift operators own
# PrivateLink; `create` and `destroy` stay the histories recorded before), and
# tagged-main-table (a create with resource_tags, whose public route table is the VPC's
# main one, and its destroy). Needs `make dev-up`
# and a built `hcpflow` (cargo build -p hcpflow-workers). Tests never run this: they
# replay what it recorded.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
dev=${HCPFLOW_DEV_DIR:-$repo/.dev}
cache=${HCPFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hcpflow}
python=$cache/venv/bin/python
hcpflow=${CARGO_TARGET_DIR:-$repo/target}/debug/hcpflow
out=$here/histories
set -a; . "$dev/env"; set +a

cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(create scale destroy rolled-back resumed)
wants() { [[ " ${cases[*]} " == *" $1 "* ]]; }

export HCPFLOW_PREFIX=golden$(date +%s)
HCPFLOW_AUDIT_SIGNING_KEY=$(head -c 32 /dev/urandom | base64)
export HCPFLOW_AUDIT_SIGNING_KEY
mkdir -p "$out/keys" "$dev/golden"
key_id=$("$hcpflow" audit public-key 2>&1 >/dev/null | awk '{print $3}')
"$hcpflow" audit public-key 2>/dev/null > "$out/keys/$key_id.pub"

server=
start_server() {
  "$hcpflow" server >> "$dev/logs/golden.log" 2>&1 &
  server=$!
  for _ in $(seq 1 100); do
    "$hcpflow" cluster list >/dev/null 2>&1 && return
    sleep 0.2
  done
  echo "the server did not start; see $dev/logs/golden.log" >&2
  exit 1
}
stop_server() { [[ -z $server ]] || { kill -TERM "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; }; }
trap stop_server EXIT
start_server

field() { "$python" -c 'import json, sys; d = json.load(sys.stdin); print(eval("d" + sys.argv[1]))' "$1"; }
export_to() { # workflow id, path under histories/
  mkdir -p "$(dirname "$out/$2")"
  "$hcpflow" audit export "$1" --out "$out/$2"
}

name=gold$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')
"$python" "$repo/deploy/dev/demo_aws.py" prerequisites "$dev/golden" "$name" >/dev/null
spec=$dev/golden/cluster.yaml

if wants create || wants scale || wants destroy || wants scale-patched; then
  create=$("$hcpflow" cluster create -f "$spec" -o json | field '["workflow_id"]')
  wants create && export_to "$create" create_hosted_cluster/three-zones-private-link.jsonl
  if wants scale; then
    id=$("$hcpflow" cluster scale "$name" --node-pool "$name-us-east-1a" --replicas 3 -o json | field '["workflow_id"]')
    export_to "$id" scale_node_pool/scale-up.jsonl
  fi
  if wants scale-patched; then
    id=$("$hcpflow" cluster scale "$name" --node-pool "$name-us-east-1b" --replicas 1 -o json | field '["workflow_id"]')
    export_to "$id" scale_node_pool/scale-down-patched.jsonl
    id=$("$hcpflow" cluster scale "$name" --node-pool "$name-us-east-1b" --replicas 1 -o json | field '["workflow_id"]')
    export_to "$id" scale_node_pool/unchanged-count-patched.jsonl
  fi
  id=$("$hcpflow" cluster destroy "$name" -o json | field '["workflow_id"]')
  wants destroy && export_to "$id" destroy_hosted_cluster/destroy.jsonl
fi

if wants operator-privatelink; then
  create=$("$hcpflow" cluster create -f "$spec" -o json | field '["workflow_id"]')
  export_to "$create" create_hosted_cluster/three-zones-operator-privatelink.jsonl
  id=$("$hcpflow" cluster destroy "$name" -o json | field '["workflow_id"]')
  export_to "$id" destroy_hosted_cluster/destroy-operator-privatelink.jsonl
fi

if wants tagged-main-table; then
  tagged=$dev/golden/tagged.yaml
  { cat "$spec"; echo "resource_tags: {team: platform, cost-center: \"42\"}"; } > "$tagged"
  create=$("$hcpflow" cluster create -f "$tagged" -o json | field '["workflow_id"]')
  export_to "$create" create_hosted_cluster/three-zones-tagged-main-table.jsonl
  id=$("$hcpflow" cluster destroy "$name" -o json | field '["workflow_id"]')
  export_to "$id" destroy_hosted_cluster/destroy-tagged-main-table.jsonl
fi

if wants rolled-back; then
  failing=$dev/golden/failing.yaml
  { cat "$spec"; echo "annotations: {hcpflow.io/emulator-fail-available: EtcdQuorumLost}"
    echo "control_plane_timeout_secs: 10"; } > "$failing"
  id=$("$hcpflow" cluster create -f "$failing" -o json | field '["workflow_id"]' || true)
  [[ -n $id ]] || id=$("$hcpflow" workflow list --cluster "$name" --type create_hosted_cluster --limit 1 -o json | field '[0]["workflow_id"]')
  export_to "$id" create_hosted_cluster/rolled-back.jsonl
fi

if wants resumed; then
  id=$("$hcpflow" cluster create -f "$spec" --no-wait -o json | field '["workflow_id"]')
  until [[ $("$hcpflow" workflow history "$id" -o json | wc -l) -ge 90 ]]; do sleep 0.1; done
  kill -9 "$server"; wait "$server" 2>/dev/null || true
  start_server
  "$hcpflow" workflow watch "$id" >/dev/null
  export_to "$id" create_hosted_cluster/resumed-after-crash.jsonl
  "$hcpflow" cluster destroy "$name" >/dev/null
fi
echo "recorded ${cases[*]} with key $key_id into $out"
