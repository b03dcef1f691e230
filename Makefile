# ModelRelay — make targets. `make run` starts the demo; `make test` is what CI runs.
GO        ?= go
BIN       := bin/relay
PLUGINDIR := build/plugins
WASMCACHE := $(CURDIR)/build/wasm-cache
PLUGINS   := $(patsubst plugins/%/main.go,%,$(wildcard plugins/*/main.go))
export RELAY_PLUGIN_DIR := $(CURDIR)/$(PLUGINDIR)
export RELAY_WASM_CACHE := $(WASMCACHE)

.PHONY: all build plugins run cluster nginx test test-postgres test-overload test-clients vet fmt-check browser fuzz bench clean

all: build plugins

build:
	$(GO) build -o $(BIN) ./cmd/relay

# Each first-party plugin is a main package built as a WASI reactor, with its
# config (NAME.json) copied beside it.
plugins:
	@mkdir -p $(PLUGINDIR)
	@for p in $(PLUGINS); do \
		echo "plugin $$p"; \
		GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -ldflags="-s -w" -o $(PLUGINDIR)/$$p.wasm ./plugins/$$p || exit 1; \
		if [ -f plugins/$$p/$$p.json ]; then cp plugins/$$p/$$p.json $(PLUGINDIR)/$$p.json; fi; \
	done

run: build plugins
	./$(BIN) demo -addr 127.0.0.1:8080 -data ./data -plugins $(PLUGINDIR)

# Three replicas on one PostgreSQL database behind nginx, with relay sim as
# the provider, in the foreground until Ctrl-C. CLUSTER_PORT (8000),
# CLUSTER_REPLICA_PORTS ("8001 8002 8003"), RELAY_DATABASE_URL and the rest:
# see deploy/cluster/run.sh.
cluster: build plugins nginx
	deploy/cluster/run.sh

# The cluster example and its test put Debian's nginx in front of the
# replicas; install it when missing (as root, the way CI runs), or say how.
nginx:
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || { \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null; \
		else echo "the cluster example needs Debian's nginx: sudo apt-get install nginx-light"; exit 1; fi; }

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# The price-page test drives Debian's headless Chromium; install it when
# missing (as root, the way CI runs), or say how.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "the price-page test needs Debian's chromium: sudo apt-get install chromium"; exit 1; fi; }

# Every test, with the race detector. Plugins are built first: the host,
# fixture and gateway tests load the real .wasm files.
test: plugins vet fmt-check browser nginx
	$(GO) test -race -timeout 20m ./...

# The gateway's own tests again, every env on a PostgreSQL store of its own
# (store.driver: postgres) instead of Badger: the whole contract on the
# shared store. Needs RELAY_TEST_POSTGRES (a server the tests may create
# databases on; .ci/run sets it), else it says so and stops.
test-postgres: plugins
	@test -n "$$RELAY_TEST_POSTGRES" || { echo "test-postgres: set RELAY_TEST_POSTGRES, e.g. postgres://postgres@127.0.0.1:5432/test"; exit 1; }
	RELAY_TEST_GATEWAY_STORE=postgres $(GO) test -count=1 -timeout 15m ./gateway/

# The overload tests (cmd/relay/overload_test.go): relay serve, the sim and
# PostgreSQL (a cluster the tests make with initdb) pinned to one CPU with
# taskset, 64 callers for 15 s, five rounds; the same with the database
# slowed and stalled, with three replicas, and on Badger. Each round: every
# 200 charged exactly once, nothing held, the gateway idle and its log small
# within 30 s. Several minutes; needs two CPUs, taskset and PostgreSQL's
# binaries (else they say so and skip).
test-overload: plugins
	RELAY_TEST_OVERLOAD=1 $(GO) test -count=1 -timeout 30m -run '^TestOverload' -v ./cmd/relay/

# The real coding CLIs against relay demo: Claude Code (claude -p) and Codex
# (codex exec, with a custom provider and with the built-in OpenAI one), and
# the official npm SDKs (openai, @anthropic-ai/sdk) streaming tool calls
# through translation (clients/sdk-stream.mjs, on the demo's standard key),
# the versions pinned in clients/package-lock.json. Needs npm (the registry,
# once) and about a minute; the clients only ever reach 127.0.0.1. See README.
test-clients: plugins clients/node_modules/.installed
	RELAY_TEST_CLIENTS=1 $(GO) test -count=1 -timeout 15m -run '^(TestRealClients|TestNodeSDKs)$$' -v ./cmd/relay/

clients/node_modules/.installed: clients/package.json clients/package-lock.json
	npm ci --prefix clients --no-audit --no-fund
	@touch $@

# A short run of every fuzz target (go test -fuzz takes one target at a time).
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# The benchmark, not part of `make test` (needs root: it runs in a private
# network namespace). QUICK=1 for a short run; SIM_LATENCY=2ms for a slower
# provider. Writes and prints build/bench-report.md; see bench/README.md.
bench:
	QUICK=$(QUICK) SIM_LATENCY=$(SIM_LATENCY) GO=$(GO) bench/run.sh

clean:
	rm -rf bin build
