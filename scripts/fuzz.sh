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
# crashers lists the crashers go test has written for a target.
crashers() { { ls "$1/testdata/fuzz/$2" 2>/dev/null || true; } | sort; }
fuzz() { go test -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" "$1" >"$log" 2>&1; }
while IFS=: read -r file target; do
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $target ($fuzztime)"
  before=$(crashers "$pkg" "$target")
  ok=yes
  fuzz "$pkg" "$target" || ok=
  if [ -z "$ok" ] && grep -q 'context deadline exceeded' "$log" && [ "$(crashers "$pkg" "$target")" = "$before" ]; then
    # Go's fuzz coordinator can report its own -fuzztime deadline as a failure
    # without any crasher (golang/go#75804, fixed in Go 1.27): run it again.
    echo "fuzz: $pkg $target: 'context deadline exceeded' without a crasher (golang/go#75804); running it again"
    ok=yes
    fuzz "$pkg" "$target" || ok=
  fi
  if [ -z "$ok" ]; then
    cat "$log"
    status=1
  elif ! grep -q '^fuzz: elapsed' "$log"; then
    echo "fuzz: $pkg $target did not fuzz (excluded by a build constraint?):"
    cat "$log"
    status=1
  fi
done < <(git grep -o -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' -- '*_test.go' | sed -E 's/^([^:]*):func (Fuzz[A-Za-z0-9_]*).*/\1:\2/')
exit $status
