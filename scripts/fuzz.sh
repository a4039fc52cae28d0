#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short bounded time (default 5s each).
# A crasher is written to the package's testdata/fuzz/ by go test; commit it as a regression case.
set -euo pipefail
fuzztime=${1:-5s}
cd "$(dirname "$0")/.."
status=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/hexserve-fuzz.log 2>&1; then
      cat /tmp/hexserve-fuzz.log
      status=1
    fi
  done
done
exit $status
