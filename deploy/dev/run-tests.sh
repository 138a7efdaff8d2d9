#!/usr/bin/env bash
# Runs the whole workspace test suite and ends with one line that totals every test
# binary's result ("tests: N passed, N failed, N skipped"), so the outcome is readable
# at a glance instead of being the last binary's (often empty) doc-test summary.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log=$here/../../.dev/logs/test.log
mkdir -p "$(dirname "$log")"

cargo test --workspace --locked "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

awk '/^test result:/ {
       for (i = 1; i <= NF; i++) {
         if ($(i) ~ /^passed;?$/) passed += $(i-1)
         if ($(i) ~ /^failed;?$/) failed += $(i-1)
         if ($(i) ~ /^ignored;?$/) ignored += $(i-1)
       }
     }
     END { printf "tests: %d passed, %d failed, %d skipped\n", passed, failed, ignored }' "$log"
exit "$status"
