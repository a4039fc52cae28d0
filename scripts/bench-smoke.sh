#!/usr/bin/env bash
# bench-smoke: run `hexserve bench --quick` once on the tiny bundle through
# hostsim (HTTP streaming included) and check that it completes and prints a
# valid JSON report with the required keys. No timing assertions: the goals
# are reported, not enforced. Called by `make bench-smoke` after `make` built
# bin/hexserve and the hostsim libraries and `make models` the tiny bundle.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/hexserve}
BUNDLE=${BUNDLE:-build/models/tiny}
ARCH=$(go env GOARCH)
LIB=build/hostsim/$ARCH
for f in "$BIN" "$LIB/libQnnHtp.so" "$LIB/libQnnSystem.so" "$LIB/libcdsprpc.so" "$BUNDLE"; do
	[ -e "$f" ] || { echo "bench-smoke: $f is missing (run make && make models)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/bench.yaml" <<YAML
model:
  bundle: $BUNDLE
  libraries:
    backend: $LIB/libQnnHtp.so
    system: $LIB/libQnnSystem.so
    rpcmem: $LIB/libcdsprpc.so
YAML

start=$(date +%s)
if ! timeout 120 "$BIN" bench --config "$tmp/bench.yaml" --json --quick --http >"$tmp/report.json" 2>"$tmp/stderr"; then
	cat "$tmp/stderr" >&2
	echo "bench-smoke: hexserve bench failed" >&2
	exit 1
fi
echo "bench-smoke: bench ran in $(($(date +%s) - start)) s"

check() { # validate JSON and required keys with whatever is installed
	if command -v python3 >/dev/null 2>&1; then
		python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
need = {"bundle", "model", "workload", "tokenizer", "throughput_native", "host_time", "streaming", "prefix_cache", "kv_store", "memory", "goals"}
missing = need - r.keys()
assert not missing, f"missing keys: {sorted(missing)}"
assert len(r["host_time"]) == 2 and all(h["total_us"]["n"] > 0 for h in r["host_time"]), "host_time"
assert {s["transport"] for s in r["streaming"]} == {"in-process", "http-sse"}, "streaming transports"
for s in r["streaming"]:
    assert not s.get("error"), f"{s['transport']}: {s['error']}"
assert r["prefix_cache"]["history_tokens"] >= 400, "prefix_cache"
kv = r["kv_store"]
assert not kv.get("skipped") and len(kv["detail"]) == kv["conversations"] * kv["turns"], "kv_store"
assert len(r["memory"]["snapshots"]) == 3 and r["memory"]["mapped_files"], "memory"
assert r["goals"] and all({"name", "measured", "target", "pass"} <= g.keys() for g in r["goals"]), "goals"
for g in r["goals"]:
    print(f"  {g['name']}: {g['measured']} {g['unit']} ({g['op']} {g['target']}) {'pass' if g['pass'] else 'FAIL'}")
PY
	elif command -v jq >/dev/null 2>&1; then
		jq -e '.host_time and .streaming and .prefix_cache and .memory and .tokenizer and .goals' "$1" >/dev/null
	else
		node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));for(const k of ["host_time","streaming","prefix_cache","memory","tokenizer","goals"])if(!(k in r))throw new Error("missing "+k)' "$1"
	fi
}
if ! check "$tmp/report.json"; then
	echo "bench-smoke: invalid report:" >&2
	cat "$tmp/report.json" >&2
	exit 1
fi
echo "bench-smoke: ok"
