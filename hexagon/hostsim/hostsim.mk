# hostsim.mk - build the hostsim stand-ins for libQnnHtp.so, libQnnSystem.so and libcdsprpc.so.
# Included from the top-level Makefile. libQnnHtp.so is linked -z nodelete: its matmul worker
# threads live in the library, so dlclose must not unmap it under them (a closed and reopened
# runtime would otherwise crash or hang).
# Outputs: build/hostsim/<goarch>/lib{QnnHtp,QnnSystem,cdsprpc}.so
HOSTSIM_DIR    := hexagon/hostsim
HOSTSIM_CC     ?= gcc
HOSTSIM_CC_ARM64 ?= aarch64-linux-gnu-gcc
HOSTSIM_GOARCH ?= $(shell go env GOARCH 2>/dev/null || echo amd64)
HOSTSIM_CFLAGS := -O2 -ffp-contract=off -fPIC -shared -Wall -Wextra -Werror -pthread -fvisibility=hidden -std=gnu11
HOSTSIM_HDRS   := $(wildcard $(HOSTSIM_DIR)/*.h)
HOSTSIM_HTP_SRC := $(HOSTSIM_DIR)/hs_htp.c $(HOSTSIM_DIR)/hs_model.c $(HOSTSIM_DIR)/hs_kernels.c $(HOSTSIM_DIR)/hs_io.c \
                   $(HOSTSIM_DIR)/hs_format.c $(HOSTSIM_DIR)/hs_pte.c $(HOSTSIM_DIR)/hs_pte_format.c $(HOSTSIM_DIR)/hs_genie.c \
                   $(HOSTSIM_DIR)/hs_genie_format.c $(HOSTSIM_DIR)/hs_scratch.c
HOSTSIM_SYS_SRC := $(HOSTSIM_DIR)/hs_system.c $(HOSTSIM_DIR)/hs_format.c $(HOSTSIM_DIR)/hs_pte_format.c \
                   $(HOSTSIM_DIR)/hs_genie_format.c
HOSTSIM_RPC_SRC := $(HOSTSIM_DIR)/hs_cdsprpc.c
HOSTSIM_LIBS    = $(1)/libQnnHtp.so $(1)/libQnnSystem.so $(1)/libcdsprpc.so

.PHONY: hostsim hostsim-arm64 test-hostsim test-hostsim-arm64

hostsim: $(call HOSTSIM_LIBS,build/hostsim/$(HOSTSIM_GOARCH))

hostsim-arm64:
	$(MAKE) -f $(firstword $(MAKEFILE_LIST)) hostsim HOSTSIM_GOARCH=arm64 HOSTSIM_CC=$(HOSTSIM_CC_ARM64)

build/hostsim/%/libQnnHtp.so: $(HOSTSIM_HTP_SRC) $(HOSTSIM_HDRS) $(HOSTSIM_DIR)/hostsim.mk
	@mkdir -p $(dir $@)
	$(HOSTSIM_CC) $(HOSTSIM_CFLAGS) -Wl,-z,nodelete -o $@ $(HOSTSIM_HTP_SRC) -lm

build/hostsim/%/libQnnSystem.so: $(HOSTSIM_SYS_SRC) $(HOSTSIM_HDRS)
	@mkdir -p $(dir $@)
	$(HOSTSIM_CC) $(HOSTSIM_CFLAGS) -o $@ $(HOSTSIM_SYS_SRC)

build/hostsim/%/libcdsprpc.so: $(HOSTSIM_RPC_SRC)
	@mkdir -p $(dir $@)
	$(HOSTSIM_CC) $(HOSTSIM_CFLAGS) -o $@ $(HOSTSIM_RPC_SRC)

# test-hostsim: generate the tiny models with the Go writer, then run the C client harness.
HOSTSIM_TEST_DIR := build/hostsim/test
test-hostsim: hostsim
	@mkdir -p $(HOSTSIM_TEST_DIR)
	$(HOSTSIM_CC) -O2 -Wall -Wextra -Werror -Wno-format-truncation -pthread -std=gnu11 -o $(HOSTSIM_TEST_DIR)/harness $(HOSTSIM_DIR)/test/harness.c -ldl -lm
	go run ./hexagon/hostsim/simfile/internal/gentiny -golden testdata/tinyllama/golden_tiny_public.json -out $(HOSTSIM_TEST_DIR)
	$(HOSTSIM_TEST_DIR)/harness build/hostsim/$(HOSTSIM_GOARCH) $(HOSTSIM_TEST_DIR)

# test-hostsim-arm64: the same harness against the arm64 build, under qemu-user.
test-hostsim-arm64: hostsim-arm64
	@mkdir -p $(HOSTSIM_TEST_DIR)
	$(HOSTSIM_CC_ARM64) -O2 -Wall -Wextra -Werror -Wno-format-truncation -pthread -std=gnu11 -o $(HOSTSIM_TEST_DIR)/harness-arm64 $(HOSTSIM_DIR)/test/harness.c -ldl -lm
	go run ./hexagon/hostsim/simfile/internal/gentiny -golden testdata/tinyllama/golden_tiny_public.json -out $(HOSTSIM_TEST_DIR)
	qemu-aarch64 -L /usr/aarch64-linux-gnu $(HOSTSIM_TEST_DIR)/harness-arm64 build/hostsim/arm64 $(HOSTSIM_TEST_DIR)
