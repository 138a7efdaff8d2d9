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

# What each failing test said, gathered above the totals: a CI page that shows only
# the log's end would otherwise lose the messages among backtraces and later output.
# Test threads are named after their tests, which have a path: the worker threads of
# the servers the tests start ('main', 'tokio-rt-worker') are left out. (A passing
# test's output, its deliberate panics included, is not in the log unless the
# arguments ask for it: --nocapture would show those here too.)
awk '/^thread .*::.* panicked at / { if (!seen++) print "== what the failing tests said"
                                     print "  " $0; lines = 0; printing = 1; next }
     printing && (/^stack backtrace:/ || /^note: / || /^thread / || /^test / || /^---- / ||
                  /^failures:/ || lines >= 12) { printing = 0 }
     printing { print "    " substr($0, 1, 300); lines++ }' "$log"

awk '/^test result:/ {
       for (i = 1; i <= NF; i++) {
         if ($(i) ~ /^passed;?$/) passed += $(i-1)
         if ($(i) ~ /^failed;?$/) failed += $(i-1)
         if ($(i) ~ /^ignored;?$/) ignored += $(i-1)
       }
     }
     END { printf "tests: %d passed, %d failed, %d skipped\n", passed, failed, ignored }' "$log"
exit "$status"
