#!/usr/bin/env bash
# Runs the chat page's browser test (e2e/web): headless Chromium, driven by
# puppeteer-core, against bin/hexserve serving the tiny bundle on hostsim
# (the test starts its own servers on free loopback ports).
# Builds nothing: `make test-web` builds bin/hexserve and build/models/tiny first.
# HEXSERVE_SCREENSHOTS=docs regenerates docs/chat-page.png and docs/chat-page-phone.png.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=bin/hexserve
LIBS=build/hostsim/$(go env GOARCH)
[[ -x $BIN ]] || { echo "test-web: $BIN is missing (run make build)" >&2; exit 1; }
[[ -f build/models/tiny/v79/manifest.json ]] || { echo "test-web: build/models/tiny is missing (run make models)" >&2; exit 1; }
[[ -f $LIBS/libQnnHtp.so ]] || { echo "test-web: $LIBS is missing (run make)" >&2; exit 1; }
command -v node >/dev/null || { echo "test-web: node is not installed" >&2; exit 1; }
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[[ -n $CHROMIUM ]] || { echo "test-web: chromium is not installed (apt-get install chromium)" >&2; exit 1; }
if [[ ! -d e2e/web/node_modules/puppeteer-core ]]; then
	(cd e2e/web && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund)
fi
if [[ -n ${HEXSERVE_SCREENSHOTS:-} ]]; then
	HEXSERVE_SCREENSHOTS=$(cd "$HEXSERVE_SCREENSHOTS" && pwd)
	export HEXSERVE_SCREENSHOTS
fi

export HEXSERVE_BIN=$PWD/$BIN HEXSERVE_BUNDLE=$PWD/build/models/tiny HOSTSIM_LIBS=$PWD/$LIBS CHROMIUM
cd e2e/web
node --test --test-timeout=120000
