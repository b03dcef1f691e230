#!/usr/bin/env bash
# bench/run.sh — ModelRelay's benchmark, behind `make bench` (see bench/README.md).
#
# Builds everything, then re-runs itself inside a private network namespace
# (unshare -n) where it starts, all on 127.0.0.1:
#   relay sim        :9101  the provider every latency/stream test hits (SIM_LATENCY)
#   relay sim        :9102  a provider with a 1 s chunk gap, for the open-streams memory test
#   bareproxy        :9201 -> :9101, :9202 -> :9102   (httputil.ReverseProxy: the floor)
#   relay serve      :8080  the gateway: real Badger ledger in a temp dir, the
#                           first-party plugins sandboxed as in production
# pins the load generator to CPU 0 and everything under test to CPU 1, runs
# the Go micro-benchmarks and loadgen, and writes build/bench-report.md.
#
# Environment: QUICK=1 (short run for iterating), SIM_LATENCY (default 0s),
# LOG_LEVEL (gateway log level, default info as in production), GO (go).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
GO=${GO:-go}
QUICK=${QUICK:-0}
SIM_LATENCY=${SIM_LATENCY:-0s}
LOG_LEVEL=${LOG_LEVEL:-info}
BIN=$ROOT/build/bench/bin
REPORT=$ROOT/build/bench-report.md
MICRO=$ROOT/build/micro.txt
export RELAY_PLUGIN_DIR=${RELAY_PLUGIN_DIR:-$ROOT/build/plugins}
export RELAY_WASM_CACHE=${RELAY_WASM_CACHE:-$ROOT/build/wasm-cache}

log() { printf 'bench: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# ---------------------------------------------------------------- outside: build
if [ "${RELAY_BENCH_NETNS:-}" != 1 ]; then
	[ "$(id -u)" = 0 ] || die "needs root (unshare -n makes a private network namespace)"
	for tool in unshare ip taskset curl; do
		command -v "$tool" >/dev/null || die "$tool is required"
	done
	log "building bin/relay, plugins, loadgen and bareproxy"
	make -s build plugins
	mkdir -p "$BIN"
	"$GO" build -o "$BIN/loadgen" ./bench/cmd/loadgen
	"$GO" build -o "$BIN/bareproxy" ./bench/cmd/bareproxy
	if ! command -v benchstat >/dev/null && [ ! -x "$("$GO" env GOPATH)/bin/benchstat" ]; then
		log "installing benchstat"
		"$GO" install golang.org/x/perf/cmd/benchstat@latest
	fi
	# Compile the micro-benchmarks' test binaries here, where the module
	# proxy is reachable; the namespace has no network.
	"$GO" test -run '^$' -bench '^$' ./plugins/ ./store/ ./gateway/ >/dev/null
	exec unshare -n -- env RELAY_BENCH_NETNS=1 bash "${BASH_SOURCE[0]}" "$@"
fi

# ---------------------------------------------------------------- inside the namespace
ip link set lo up

if [ "$QUICK" = 1 ]; then
	MICRO_ARGS=(-count 2 -benchtime 300ms)
	LOAD_ARGS=(-rounds 1 -duration 2s -warmup 500ms -tp-duration 3s -stream-duration 3s -pause 200ms)
else
	MICRO_ARGS=(-count 6)
	LOAD_ARGS=(-rounds 3 -duration 5s -warmup 1s -tp-duration 10s -stream-duration 10s -pause 500ms)
fi

NPROC=$(nproc)
if [ "$NPROC" -ge 2 ]; then
	CPU_LOAD=0 CPU_SUT=1
else
	CPU_LOAD=0 CPU_SUT=0
	log "only one CPU: the load generator and the system under test share it"
fi

WORK=$(mktemp -d /tmp/relay-bench.XXXXXX)
PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		# Bounded wait: the gateway drains streams for up to its grace period.
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CPU CMD...: runs CMD pinned to CPU, logs to $WORK/NAME.log,
# and sets STARTED_PID.
start() {
	local name=$1 cpu=$2
	shift 2
	taskset -c "$cpu" "$@" >"$WORK/$name.log" 2>&1 &
	STARTED_PID=$!
	PIDS+=("$STARTED_PID")
}

# wait_http URL PID SECONDS: until URL answers 200, while PID lives.
wait_http() {
	local url=$1 pid=$2 i
	for i in $(seq 1 $(($3 * 10))); do
		kill -0 "$pid" 2>/dev/null || return 1
		if curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# ---- micro-benchmarks (both CPUs, nothing else running)
log "micro-benchmarks -> $MICRO"
"$GO" test -run '^$' -bench 'BenchmarkRequest|BenchmarkCall|BenchmarkHoldSettle|BenchmarkSSE|BenchmarkDecode|BenchmarkOverhead' \
	./plugins/ ./store/ ./gateway/ -benchmem "${MICRO_ARGS[@]}" | tee "$MICRO" >&2
BENCHSTAT=$(command -v benchstat || echo "$("$GO" env GOPATH)/bin/benchstat")
"$BENCHSTAT" "$MICRO" >"$WORK/benchstat.txt" 2>&1 || log "benchstat failed: $(cat "$WORK/benchstat.txt")"

# ---- the systems under test, on CPU_SUT
start sim "$CPU_SUT" "$ROOT/bin/relay" sim -addr 127.0.0.1:9101 -latency "$SIM_LATENCY" -chunks 20 -chunk-gap 10ms
SIM_PID=$STARTED_PID
start sim-slow "$CPU_SUT" "$ROOT/bin/relay" sim -addr 127.0.0.1:9102 -chunks 60 -chunk-gap 1s
SIM_SLOW_PID=$STARTED_PID
start proxy "$CPU_SUT" "$BIN/bareproxy" -addr 127.0.0.1:9201 -target http://127.0.0.1:9101
PROXY_PID=$STARTED_PID
start proxy-slow "$CPU_SUT" "$BIN/bareproxy" -addr 127.0.0.1:9202 -target http://127.0.0.1:9102
PROXY_SLOW_PID=$STARTED_PID

ADMIN_TOKEN=bench-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
mkdir -p "$WORK/data"
cat >"$WORK/relay.yaml" <<EOF
# Written by bench/run.sh: production defaults except the rate limit.
listen: 127.0.0.1:8080
data_dir: $WORK/data
admin_token: $ADMIN_TOKEN
plugins:
  dir: $RELAY_PLUGIN_DIR
  cache_dir: $RELAY_WASM_CACHE
limits:
  key_rate: {rate: 1000000, burst: 1000000}
routes:
  - name: economy
  - name: standard
lines:
  - name: bench
    protocol: openai
    base_url: http://127.0.0.1:9101
    models: ["*"]
    route: economy
  - name: slow-streams
    protocol: openai
    base_url: http://127.0.0.1:9102
    models: ["*"]
    route: standard
EOF
start gateway "$CPU_SUT" "$ROOT/bin/relay" serve -config "$WORK/relay.yaml" -log-level "$LOG_LEVEL"
GATEWAY_PID=$STARTED_PID

# The gateway compiles its plugins on the first start after they change
# (about a second each on one CPU); later starts hit the compilation cache.
for check in "http://127.0.0.1:9101/v1/models $SIM_PID 10" "http://127.0.0.1:9102/v1/models $SIM_SLOW_PID 10" \
	"http://127.0.0.1:9201/v1/models $PROXY_PID 10" "http://127.0.0.1:9202/v1/models $PROXY_SLOW_PID 10" \
	"http://127.0.0.1:8080/readyz $GATEWAY_PID 120"; do
	# shellcheck disable=SC2086 # three words: URL PID SECONDS
	if ! wait_http $check; then
		log "${check%% *} did not come up; logs:"
		tail -n 20 "$WORK"/*.log >&2
		curl -sS --max-time 2 http://127.0.0.1:8080/readyz >&2 || true
		exit 1
	fi
done

export RELAY_ADMIN_TOKEN=$ADMIN_TOKEN
GW=http://127.0.0.1:8080
"$ROOT/bin/relay" accounts create -account bench -server "$GW" >&2
"$ROOT/bin/relay" accounts credit -account bench -usd 10000 -server "$GW" >/dev/null
KEY=$("$ROOT/bin/relay" keys create -account bench -route economy -server "$GW")
HOLD_KEY=$("$ROOT/bin/relay" keys create -account bench -route standard -server "$GW")
BALANCE_BEFORE=$("$ROOT/bin/relay" accounts balance -account bench -server "$GW")

# ---- load, from CPU_LOAD (bounded: loadgen's phases have fixed durations)
log "load phases (QUICK=$QUICK), the load generator on CPU $CPU_LOAD, the systems under test on CPU $CPU_SUT"
timeout --signal=INT 1800 taskset -c "$CPU_LOAD" "$BIN/loadgen" \
	-direct http://127.0.0.1:9101 -proxy http://127.0.0.1:9201 -gateway "$GW" -key "$KEY" \
	-hold-proxy http://127.0.0.1:9202 -hold-key "$HOLD_KEY" \
	-gateway-pid "$GATEWAY_PID" -proxy-pid "$PROXY_PID" -hold-proxy-pid "$PROXY_SLOW_PID" \
	-rates 500,1000,2000,4000 -conns 64 -stream-rate 50 -chunks 20 -chunk-gap 10ms \
	-open-streams 1000 -open-rate 500 -open-timeout 45s -sim-latency "$SIM_LATENCY" \
	"${LOAD_ARGS[@]}" -micro "$MICRO" -json "$ROOT/build/bench-results.json" -md "$WORK/load.md"

BALANCE_AFTER=$("$ROOT/bin/relay" accounts balance -account bench -server "$GW")
SIM_HWM=$(awk '/VmHWM/ {print $2, $3}' "/proc/$SIM_PID/status")

CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
MEM_TOTAL=$(awk '/MemTotal/ {printf "%.1f GB", $2/1e6}' /proc/meminfo)
{
	echo "# ModelRelay benchmark report"
	echo
	echo "Generated $(date -u +%Y-%m-%dT%H:%M:%SZ) by \`bench/run.sh\` (QUICK=$QUICK, SIM_LATENCY=$SIM_LATENCY)."
	echo
	echo "## Machine"
	echo
	echo "| nproc | CPU | memory | kernel | Go |"
	echo "|---:|---|---|---|---|"
	echo "| $NPROC | $CPU_MODEL | $MEM_TOTAL | $(uname -r) | $("$GO" env GOVERSION) |"
	echo
	echo "Load generator pinned to CPU $CPU_LOAD; sim, bare proxy and gateway pinned to CPU $CPU_SUT (\`taskset\`), the same for every target;"
	echo "everything on 127.0.0.1 in a private network namespace (\`unshare -n\`). Gateway: \`relay serve\`, real Badger ledger"
	echo "(sync_writes false, the default), first-party plugins sandboxed as in production (pool 2, guard on), log level $LOG_LEVEL,"
	echo "key rate limit raised to 1,000,000/s. Account balance before/after the load: $BALANCE_BEFORE / $BALANCE_AFTER USD."
	echo "Sim VmHWM: $SIM_HWM."
	echo
	cat "$WORK/load.md"
	echo "## Micro-benchmarks"
	echo
	echo "\`go test -run '^\$' -bench 'BenchmarkRequest|BenchmarkCall|BenchmarkHoldSettle|BenchmarkSSE|BenchmarkDecode|BenchmarkOverhead' ./plugins/ ./store/ ./gateway/ -benchmem ${MICRO_ARGS[*]}\`"
	echo "(raw output: build/micro.txt), summarised by benchstat:"
	echo
	echo '```text'
	cat "$WORK/benchstat.txt"
	echo '```'
} >"$REPORT"
cat "$REPORT"
log "report: $REPORT (raw: build/bench-results.json, build/micro.txt)"
