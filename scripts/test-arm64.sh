#!/usr/bin/env bash
# Builds the NPU-path tests for linux/arm64 and runs them under qemu-aarch64 against
# the arm64 hostsim build (make hostsim-arm64), and internal/scan's, which check the
# sampler's NEON kernels against the pure-Go scans. They run in their -short form (fewer
# variants, smaller goldens): what the architecture can change is the ABI, struct
# layouts, purego calls and the C graphs' arithmetic, not what a bigger case adds,
# and qemu runs them several times slower than native. make gotest runs the full
# forms natively.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export HEXSERVE_HOSTSIM_DIR="$root/build/hostsim/arm64"
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
for pkg in ./internal/scan ./hexagon/qnn ./hexagon/graphio ./hexagon/plan ./hexagon/qhexrt ./hexagon/pte ./hexagon/executorch; do
  name=$(echo "$pkg" | tr '/.' '__')
  CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go test -c -o "$out/$name.test" "$pkg"
  echo "arm64: $pkg"
  start=$(date +%s)
  skip=""
  # The QHexRT runner's cache-reuse and snapshot behaviour is Go logic over the
  # same graph calls the goldens make here; those tests run natively (make gotest),
  # as does the Batcher's leak test (its isolation and engine tests run here).
  [ "$pkg" = ./hexagon/qhexrt ] && skip='^(TestSeedColdWarmRunner|TestKVSnapshotRestore|TestPrefixReuse|TestKVStoreThroughEngine|TestPlanFollowsHostsimLatency|TestBatchNoLeak)$'
  # Likewise the .pte runner's seeded-repeat and slot-placement tests (the engine's
  # alignment and the pool's placement over the calls TestGolden and TestFamilyGolden
  # make here; several minutes of the step under qemu).
  [ "$pkg" = ./hexagon/executorch ] && skip='^(TestSeedRepeats|TestOpenCheap)$'
  (cd "$pkg" && qemu-aarch64 "$out/$name.test" -test.count=1 -test.short ${skip:+-test.skip "$skip"})
  echo "arm64: $pkg took $(($(date +%s) - start)) s"
done
echo "arm64 tests passed"
