#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short bounded time (default 5s each).
# A crasher is written to the package's testdata/fuzz/ by go test; commit it as a regression case.
# The targets are found in the sources (func FuzzX(f *testing.F) in a _test.go file):
# asking `go test -list` instead built a test binary for every package of the module.
set -euo pipefail
fuzztime=${1:-5s}
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
while IFS=: read -r file target; do
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $target ($fuzztime)"
  if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
    cat "$log"
    status=1
  elif ! grep -q '^fuzz: elapsed' "$log"; then
    echo "fuzz: $pkg $target did not fuzz (excluded by a build constraint?):"
    cat "$log"
    status=1
  fi
done < <(git grep -o -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' -- '*_test.go' | sed -E 's/^([^:]*):func (Fuzz[A-Za-z0-9_]*).*/\1:\2/')
exit $status
