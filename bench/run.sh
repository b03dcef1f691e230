#!/usr/bin/env bash
# bench/run.sh — ModelRelay's benchmark, behind `make bench` (see bench/README.md).
#
# Builds everything, then re-runs itself inside a private network namespace
# (unshare -n) where it starts, all on 127.0.0.1:
#   relay sim        :9101  the provider every latency/stream test hits (SIM_LATENCY)
#   relay sim        :9102  a provider with a 1 s chunk gap, for the open-streams memory test
#   bareproxy        :9201 -> :9101, :9202 -> :9102   (httputil.ReverseProxy: the floor)
#   bareproxy        :9203 -> :9101   the same again: the A/A control
#   relay serve      :8080  the gateway: real Badger ledger in a temp dir, the
#                           first-party plugins sandboxed as in production
#   relay serve      :8082  gateway-x: the same as the gateway, but its line
#                           speaks Gemini: every chat call translated to
#                           generateContent and back (same model, route, prices)
#   relay serve      :8081  gateway-pg: the same, its ledger in PostgreSQL (a
#                           database made for the run on the machine's server,
#                           reached through its unix socket, dropped at the end)
# pins the load generator to CPU 0 and everything under test to CPU 1 (the
# PostgreSQL server, not ours to pin, runs where it may), runs the Go
# micro-benchmarks and loadgen, and writes build/bench-report.md.
#
# Environment: QUICK=1 (short run for iterating), SIM_LATENCY (default 0s),
# LOG_LEVEL (gateway log level, default info as in production), SKIP_MICRO=1
# (no micro-benchmarks), PROFILE=1 (save the gateway's CPU and heap
# profiles, from its debug_listen, to build/bench-prof; the profiler's
# sampling costs time, so the numbers are then not the benchmark's), WAIT_IDLE=N (wait up to N seconds for the 1-minute
# load average to fall below 1.0 before measuring), NICE=-5 (run the
# processes under test and the load generator at that nice level, so that
# other work on a shared machine disturbs them less), RATES (the fixed rates,
# default 500,1000,2000,4000), DURATION (seconds per rate, overriding QUICK's
# or the full run's), IDLE_SPIN=1 (keep the SUT CPU from halting when idle
# with a busy loop at SCHED_IDLE priority, which anything else preempts: on a
# virtual machine it takes the hypervisor's wake-up latency out of every
# target; an experiment, not how the gateway runs), GATEWAY_GOGC and
# GATEWAY_GODEBUG (GOGC and GODEBUG for the gateway alone), GATEWAY_BIN (a
# relay binary to run as the gateway instead of bin/relay: an A/B of two
# builds, the sim unchanged), CALLS_DIR (loadgen writes every answered call of each
# latency measurement there: start and latency, one CSV per measurement),
# KEEP_LOGS (copy every process's log, the gateway's access log among them,
# there before the run's temporary directory is removed), POSTGRES (the
# PostgreSQL server gateway-pg and the store's micro-benchmarks use, as a URL
# naming a database to connect to for creating the run's own; default
# postgres://postgres@/postgres?host=/var/run/postgresql, the unix socket,
# which a private network namespace still reaches; off: Badger alone),
# PG_SYNCHRONOUS_COMMIT (on or off: ALTER DATABASE sets it on the run's
# database only; default: the server's), PG_SET (more settings for the run's
# database alone, "name=value ...", e.g. plan_cache_mode=force_custom_plan:
# an experiment, stamped on the report), PG_ALLOT (off: gateway-pg with
# billing.allot false, each call held in the database; stamped on the
# report), ACCOUNTS (how many accounts, one key
# each, every gateway's calls spread over, in turn; default 1), TRANSLATED
# (off: no gateway-x), AGE_CALLS (calls each gateway serves as fast as it
# can, then a step past its capacity, before anything else is measured: the
# figures are the sustained ones; default 1000000, QUICK=1 20000, 0: none),
# PG_AUTOVACUUM (on, the default as in production, or off: the server's
# autovacuum for the run, set with ALTER SYSTEM and put back after it when
# it differs), PG_CPU (sut, load or any, the default: the PostgreSQL
# server's processes pinned for the run to the CPU the systems under test
# share, to the load generator's, or left where they may run; put back
# after it), GO (go).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Paths the caller gave are relative to where it ran us, not to $ROOT.
[ -z "${GATEWAY_BIN:-}" ] || GATEWAY_BIN=$(realpath -m -- "$GATEWAY_BIN")
[ -z "${CALLS_DIR:-}" ] || CALLS_DIR=$(realpath -m -- "$CALLS_DIR")
[ -z "${KEEP_LOGS:-}" ] || KEEP_LOGS=$(realpath -m -- "$KEEP_LOGS")
cd "$ROOT"
GO=${GO:-go}
QUICK=${QUICK:-0}
SIM_LATENCY=${SIM_LATENCY:-0s}
LOG_LEVEL=${LOG_LEVEL:-info}
SKIP_MICRO=${SKIP_MICRO:-0}
PROFILE=${PROFILE:-0}
WAIT_IDLE=${WAIT_IDLE:-0}
NICE=${NICE:-0}
IDLE_SPIN=${IDLE_SPIN:-0}
PG_SYNCHRONOUS_COMMIT=${PG_SYNCHRONOUS_COMMIT:-}
PG_SET=${PG_SET:-}
ACCOUNTS=${ACCOUNTS:-1}
TRANSLATED=${TRANSLATED:-on}
PG_AUTOVACUUM_WANT=${PG_AUTOVACUUM:-on}
PG_CPU=${PG_CPU:-any}
PROFDIR=$ROOT/build/bench-prof
BIN=$ROOT/build/bench/bin
REPORT=$ROOT/build/bench-report.md
MICRO=$ROOT/build/micro.txt
export RELAY_PLUGIN_DIR=${RELAY_PLUGIN_DIR:-$ROOT/build/plugins}
export RELAY_WASM_CACHE=${RELAY_WASM_CACHE:-$ROOT/build/wasm-cache}

log() { printf 'bench: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# GATEWAY (for the report): how the gateway ran, when not as in production.
GATEWAY_EXPERIMENT=""
for v in GATEWAY_BIN GATEWAY_GOGC GATEWAY_GODEBUG MEMORY_LIMIT OVERLOAD_DELAY; do
	[ -z "${!v:-}" ] || GATEWAY_EXPERIMENT+="${GATEWAY_EXPERIMENT:+, }$v=${!v}"
done
case "$PG_SYNCHRONOUS_COMMIT" in
'' | on | off) ;;
*) die "PG_SYNCHRONOUS_COMMIT=$PG_SYNCHRONOUS_COMMIT: on, off or unset (the server's setting)" ;;
esac
case "$TRANSLATED" in
on | off) ;;
*) die "TRANSLATED=$TRANSLATED: on (gateway-x measured beside the gateway, the default) or off" ;;
esac
[[ "$ACCOUNTS" =~ ^[1-9][0-9]{0,3}$ ]] || die "ACCOUNTS=$ACCOUNTS: a count of accounts, 1 to 9999"
[ -z "${AGE_CALLS:-}" ] || [[ "$AGE_CALLS" =~ ^[0-9]{1,9}$ ]] || die "AGE_CALLS=$AGE_CALLS: a count of calls, 0 to 999999999"
case "$PG_AUTOVACUUM_WANT" in
on | off) ;;
*) die "PG_AUTOVACUUM=$PG_AUTOVACUUM_WANT: on (production's default) or off" ;;
esac
case "$PG_CPU" in
sut | load | any) ;;
*) die "PG_CPU=$PG_CPU: sut (the gateways' CPU), load (the load generator's) or any" ;;
esac
for kv in $PG_SET; do
	[[ "$kv" =~ ^[a-z_]+=[A-Za-z0-9_.]+$ ]] || die "PG_SET: \"$kv\" is not name=value (a setting's name, a plain value)"
done
[ -z "$PG_SET" ] || GATEWAY_EXPERIMENT+="${GATEWAY_EXPERIMENT:+, }PG_SET=$PG_SET"
# shellcheck source=bench/pg.sh
. "$ROOT/bench/pg.sh"
[ "$POSTGRES" = off ] || pg_check_url "or off"

# ---------------------------------------------------------------- outside: build
if [ "${RELAY_BENCH_NETNS:-}" != 1 ]; then
	[ "$(id -u)" = 0 ] || die "needs root (unshare -n makes a private network namespace)"
	for tool in unshare ip taskset curl; do
		command -v "$tool" >/dev/null || die "$tool is required"
	done
	if [ "$POSTGRES" != off ]; then
		command -v psql >/dev/null || die "psql is required for gateway-pg (POSTGRES=off measures Badger alone)"
	fi
	log "building bin/relay, plugins, loadgen and bareproxy"
	make -s build plugins GO="$GO"
	mkdir -p "$BIN"
	"$GO" build -o "$BIN/loadgen" ./bench/cmd/loadgen
	"$GO" build -o "$BIN/bareproxy" ./bench/cmd/bareproxy
	if ! command -v benchstat >/dev/null && [ ! -x "$("$GO" env GOPATH)/bin/benchstat" ]; then
		log "installing benchstat"
		"$GO" install golang.org/x/perf/cmd/benchstat@latest
	fi
	# Compile the micro-benchmarks' test binaries here, where the module
	# proxy is reachable; the namespace has no network.
	"$GO" test -run '^$' -bench '^$' ./plugins/ ./store/badger/ ./store/postgres/ ./gateway/ >/dev/null
	exec unshare -n -- env RELAY_BENCH_NETNS=1 bash "${BASH_SOURCE[0]}" "$@"
fi

# ---------------------------------------------------------------- inside the namespace
ip link set lo up

if [ "$QUICK" = 1 ]; then
	MICRO_ARGS=(-count 2 -benchtime 300ms)
	LOAD_ARGS=(-rounds 1 -duration 2s -warmup 500ms -tp-duration 3s -stream-duration 3s -pause 200ms)
	AGE_CALLS=${AGE_CALLS:-20000}
else
	MICRO_ARGS=(-count 6)
	LOAD_ARGS=(-rounds 3 -duration 5s -warmup 1s -tp-duration 10s -stream-duration 10s -pause 500ms)
	AGE_CALLS=${AGE_CALLS:-1000000}
fi
LOAD_ARGS+=(-age-calls "$AGE_CALLS")
# RATES and DURATION narrow a run to what is being investigated (e.g.
# RATES=1000 DURATION=20s QUICK=1); the report's tables then cover only those.
RATES=${RATES:-500,1000,2000,4000}
if [ -n "${DURATION:-}" ]; then
	LOAD_ARGS+=(-duration "$DURATION")
fi
# PHASES runs only some of loadgen's phases (age, latency, throughput, serial, stream, rss);
# MEMORY_LIMIT sets the gateway's memory_limit (default: the config's default);
# OVERLOAD_DELAY its limits.overload_delay (-1s: never shed).
if [ -n "${PHASES:-}" ]; then
	LOAD_ARGS+=(-phases "$PHASES")
elif [ "$AGE_CALLS" = 0 ]; then
	LOAD_ARGS+=(-phases latency,throughput,serial,stream,rss)
fi
MEMORY_LIMIT_LINE=
if [ -n "${MEMORY_LIMIT:-}" ]; then
	MEMORY_LIMIT_LINE="memory_limit: $MEMORY_LIMIT"
fi
OVERLOAD_DELAY_LINE=
if [ -n "${OVERLOAD_DELAY:-}" ]; then
	OVERLOAD_DELAY_LINE="  overload_delay: $OVERLOAD_DELAY"
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
PG_DB=
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
	# Keep what the gateway said besides its access log (the first 1,000 lines):
	# warnings, errors and the plugins' loads, parks and reloads.
	if [ -f "$WORK/gateway.log" ]; then
		grep -E -v '"level":"INFO"' "$WORK/gateway.log" | head -n 1000 >"$ROOT/build/bench-gateway-warnings.log" || true
		grep -E '"level":"INFO".*"msg":"plugin' "$WORK/gateway.log" | head -n 1000 >>"$ROOT/build/bench-gateway-warnings.log" || true
	fi
	if [ -f "$WORK/gateway-pg.log" ]; then
		grep -E -v '"level":"INFO"' "$WORK/gateway-pg.log" | head -n 1000 >"$ROOT/build/bench-gateway-pg-warnings.log" || true
	fi
	if [ -f "$WORK/gateway-x.log" ]; then
		grep -E -v '"level":"INFO"' "$WORK/gateway-x.log" | head -n 1000 >"$ROOT/build/bench-gateway-x-warnings.log" || true
	fi
	[ -z "${KEEP_LOGS:-}" ] || { mkdir -p "$KEEP_LOGS" && cp "$WORK"/*.log "$KEEP_LOGS"/ 2>/dev/null; } || true
	rm -rf "$WORK"
	if [ -n "$PG_DB" ]; then
		pg "$ADMIN_DB" "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" || log "could not drop database $PG_DB: drop it by hand"
	fi
	pg_restore_server
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The server's settings this run changed (PG_AUTOVACUUM, PG_CPU), put back
# by cleanup: the autovacuum setting as it was in postgresql.auto.conf (or
# reset), the server's processes on every CPU.
PG_AUTOVACUUM_RESTORE=
PG_PINNED=
pg_restore_server() {
	if [ -n "$PG_AUTOVACUUM_RESTORE" ]; then
		pg "$ADMIN_DB" "$PG_AUTOVACUUM_RESTORE" >/dev/null && pg "$ADMIN_DB" "SELECT pg_reload_conf()" >/dev/null ||
			log "could not put the server's autovacuum back: $PG_AUTOVACUUM_RESTORE"
	fi
	if [ -n "$PG_PINNED" ]; then
		pg_pin "0-$(($(nproc) - 1))" || log "could not put PostgreSQL's processes back on every CPU"
	fi
}

# pg_pin CPUS: the postmaster and every process it started, on CPUS (the
# backends it starts later inherit the postmaster's CPUs).
pg_pin() {
	local dir pm pid
	dir=$(pg "$ADMIN_DB" "SHOW data_directory") || return 1
	pm=$(head -n 1 "$dir/postmaster.pid") || return 1
	for pid in "$pm" $(pgrep -P "$pm"); do
		taskset -a -cp "$1" "$pid" >/dev/null || return 1
	done
}

# pg_server_setup: the server's autovacuum as PG_AUTOVACUUM asks, and its
# processes where PG_CPU asks, for the run.
pg_server_setup() {
	local av src
	av=$(pg "$ADMIN_DB" "SHOW autovacuum")
	if [ "$av" != "$PG_AUTOVACUUM_WANT" ]; then
		src=$(pg "$ADMIN_DB" "SELECT coalesce(sourcefile, '') FROM pg_settings WHERE name = 'autovacuum'")
		PG_AUTOVACUUM_RESTORE="ALTER SYSTEM RESET autovacuum"
		[[ "$src" != *postgresql.auto.conf ]] || PG_AUTOVACUUM_RESTORE="ALTER SYSTEM SET autovacuum = $av"
		pg "$ADMIN_DB" "ALTER SYSTEM SET autovacuum = $PG_AUTOVACUUM_WANT" >/dev/null
		pg "$ADMIN_DB" "SELECT pg_reload_conf()" >/dev/null
		for _ in $(seq 1 50); do
			[ "$(pg "$ADMIN_DB" "SHOW autovacuum")" = "$PG_AUTOVACUUM_WANT" ] && break
			sleep 0.1
		done
		log "the server's autovacuum is $PG_AUTOVACUUM_WANT for the run (it was $av; put back after it)"
	fi
	case "$PG_CPU" in
	sut) PG_PINNED=1 && pg_pin "$CPU_SUT" ;;
	load) PG_PINNED=1 && pg_pin "$CPU_LOAD" ;;
	esac
}

# start NAME CPU CMD...: runs CMD pinned to CPU, logs to $WORK/NAME.log,
# and sets STARTED_PID.
start() {
	local name=$1 cpu=$2
	shift 2
	nice -n "$NICE" taskset -c "$cpu" "$@" >"$WORK/$name.log" 2>&1 &
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

# wait_idle: up to WAIT_IDLE seconds, until the 1-minute load average is below 1.0.
wait_idle() {
	local waited=0
	while [ "$waited" -lt "$WAIT_IDLE" ] && awk '{ exit !($1 >= 1.0) }' /proc/loadavg; do
		[ "$waited" = 0 ] && log "waiting up to ${WAIT_IDLE}s for the machine to be idle (load average $(cut -d' ' -f1 /proc/loadavg))"
		sleep 5
		waited=$((waited + 5))
	done
}

# ---- micro-benchmarks (both CPUs, nothing else running)
wait_idle
MICRO_RE='BenchmarkRequest|BenchmarkCall|BenchmarkGC$|BenchmarkHoldSettle|BenchmarkSSE|BenchmarkDecode|BenchmarkOverhead'
MICRO_PKGS=(./plugins/ ./store/badger/ ./store/postgres/ ./gateway/ ./wire/)
MICRO_CMD=("$GO" test -run '^$' -bench "$MICRO_RE" "${MICRO_PKGS[@]}" -benchmem "${MICRO_ARGS[@]}")
# The PostgreSQL store's benchmarks make (and drop) their own database there;
# without a server they skip.
MICRO_ENV=()
[ "$POSTGRES" = off ] || MICRO_ENV=(RELAY_TEST_POSTGRES="$POSTGRES")
MICRO_FLAG=()
if [ "$SKIP_MICRO" = 1 ]; then
	log "SKIP_MICRO=1: no micro-benchmarks"
	echo "(skipped: SKIP_MICRO=1)" >"$WORK/benchstat.txt"
else
	log "micro-benchmarks -> $MICRO"
	env "${MICRO_ENV[@]}" "${MICRO_CMD[@]}" | tee "$MICRO" >&2
	BENCHSTAT=$(command -v benchstat || echo "$("$GO" env GOPATH)/bin/benchstat")
	"$BENCHSTAT" "$MICRO" >"$WORK/benchstat.txt" 2>&1 || log "benchstat failed: $(cat "$WORK/benchstat.txt")"
	MICRO_FLAG=(-micro "$MICRO")
fi

# ---- the systems under test, on CPU_SUT
start sim "$CPU_SUT" "$ROOT/bin/relay" sim -addr 127.0.0.1:9101 -latency "$SIM_LATENCY" -chunks 20 -chunk-gap 10ms
SIM_PID=$STARTED_PID
start sim-slow "$CPU_SUT" "$ROOT/bin/relay" sim -addr 127.0.0.1:9102 -chunks 60 -chunk-gap 1s
SIM_SLOW_PID=$STARTED_PID
start proxy "$CPU_SUT" "$BIN/bareproxy" -addr 127.0.0.1:9201 -target http://127.0.0.1:9101
PROXY_PID=$STARTED_PID
start proxy-slow "$CPU_SUT" "$BIN/bareproxy" -addr 127.0.0.1:9202 -target http://127.0.0.1:9102
PROXY_SLOW_PID=$STARTED_PID
# The A/A control: a second bare proxy, the same as the first, measured as
# the others are; how far apart the two measure is the run's own noise.
start control "$CPU_SUT" "$BIN/bareproxy" -addr 127.0.0.1:9203 -target http://127.0.0.1:9101
CONTROL_PID=$STARTED_PID

ADMIN_TOKEN=bench-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
mkdir -p "$WORK/data"
cat >"$WORK/relay.yaml" <<EOF
# Written by bench/run.sh: production defaults except the rate limit and
# the per-address connection bound (every load generator connection comes
# from 127.0.0.1, as behind a load balancer), and the profiler's listener,
# which costs nothing until PROFILE=1 asks it for a profile.
listen: 127.0.0.1:8080
debug_listen: 127.0.0.1:6060
data_dir: $WORK/data
admin_token: $ADMIN_TOKEN
$MEMORY_LIMIT_LINE
plugins:
  dir: $RELAY_PLUGIN_DIR
  cache_dir: $RELAY_WASM_CACHE
server:
  max_connections_per_address: -1
limits:
  key_rate: {rate: 1000000, burst: 1000000}
$OVERLOAD_DELAY_LINE
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
PROFILE_FLAG=()
if [ "$PROFILE" = 1 ]; then
	rm -rf "$PROFDIR"
	PROFILE_FLAG=(-profile http://127.0.0.1:6060 -profile-dir "$PROFDIR")
fi
GATEWAY_EXE=${GATEWAY_BIN:-$ROOT/bin/relay}
start gateway "$CPU_SUT" env ${GATEWAY_GOGC:+"GOGC=$GATEWAY_GOGC"} ${GATEWAY_GODEBUG:+"GODEBUG=$GATEWAY_GODEBUG"} "$GATEWAY_EXE" serve -config "$WORK/relay.yaml" -log-level "$LOG_LEVEL"
GATEWAY_PID=$STARTED_PID

# The gateway compiles its plugins on the first start after they change
# (about a second each on one CPU); later starts hit the compilation cache.
# /healthz, not /readyz: loadgen's first calls check the real path anyway.
for check in "http://127.0.0.1:9101/v1/models $SIM_PID 10" "http://127.0.0.1:9102/v1/models $SIM_SLOW_PID 10" \
	"http://127.0.0.1:9201/v1/models $PROXY_PID 10" "http://127.0.0.1:9202/v1/models $PROXY_SLOW_PID 10" \
	"http://127.0.0.1:9203/v1/models $CONTROL_PID 10" \
	"http://127.0.0.1:8080/healthz $GATEWAY_PID 120"; do
	# shellcheck disable=SC2086 # three words: URL PID SECONDS
	if ! wait_http $check; then
		log "${check%% *} did not come up; logs:"
		tail -n 20 "$WORK"/*.log >&2
		curl -sS --max-time 2 http://127.0.0.1:8080/readyz >&2 || true
		exit 1
	fi
done

# gateway-x: the same configuration (Badger, plugins, limits, routes), its
# own port and data, but line bench speaks Gemini: the sim answers
# modelf-flash on generateContent too, so every chat call is translated
# there and back, same model, route and prices as the gateway's. Started
# once the gateway has filled the plugins' compilation cache.
X_FLAGS=()
if [ "$TRANSLATED" != off ]; then
	sed -e 's/^listen: .*/listen: 127.0.0.1:8082/' -e 's/^debug_listen: .*/debug_listen: 127.0.0.1:6062/' \
		-e "s#^data_dir: .*#data_dir: $WORK/data-x#" \
		-e '/^  - name: bench$/{n;s/^    protocol: openai$/    protocol: gemini/;}' "$WORK/relay.yaml" >"$WORK/relay-x.yaml"
	grep -A1 '^  - name: bench$' "$WORK/relay-x.yaml" | grep -qx '    protocol: gemini' ||
		die "gateway-x's configuration: line bench's protocol is not gemini"
	mkdir -p "$WORK/data-x"
	start gateway-x "$CPU_SUT" env ${GATEWAY_GOGC:+"GOGC=$GATEWAY_GOGC"} ${GATEWAY_GODEBUG:+"GODEBUG=$GATEWAY_GODEBUG"} "$GATEWAY_EXE" serve -config "$WORK/relay-x.yaml" -log-level "$LOG_LEVEL"
	GATEWAY_X_PID=$STARTED_PID
	if ! wait_http http://127.0.0.1:8082/healthz "$GATEWAY_X_PID" 120; then
		log "gateway-x did not come up; its log:"
		tail -n 20 "$WORK/gateway-x.log" >&2
		exit 1
	fi
fi

# gateway-pg: the same configuration with its ledger in a database made for
# this run (dropped by cleanup), started once the first gateway has filled
# the plugins' compilation cache.
PG_FLAGS=()
if [ "$POSTGRES" != off ]; then
	PG_DB=relay_bench_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	pg "$ADMIN_DB" "CREATE DATABASE $PG_DB" >/dev/null || {
		PG_DB=
		die "cannot create a database on PostgreSQL at $POSTGRES (POSTGRES=off measures Badger alone)"
	}
	if [ -n "$PG_SYNCHRONOUS_COMMIT" ]; then
		pg "$ADMIN_DB" "ALTER DATABASE $PG_DB SET synchronous_commit = $PG_SYNCHRONOUS_COMMIT" >/dev/null
	fi
	for kv in $PG_SET; do
		pg "$ADMIN_DB" "ALTER DATABASE $PG_DB SET ${kv%%=*} = '${kv#*=}'" >/dev/null
	done
	pg_server_setup || die "could not set the PostgreSQL server up as PG_AUTOVACUUM and PG_CPU ask"
	PG_SYNC=$(pg "$PG_DB" "SHOW synchronous_commit")
	PG_SERVER_SYNC=$(pg "$ADMIN_DB" "SELECT reset_val FROM pg_settings WHERE name = 'synchronous_commit'")
	PG_VERSION=$(pg "$PG_DB" "SHOW server_version")
	PG_AUTOVACUUM=$(pg "$PG_DB" "SHOW autovacuum")
	# The server's processes inherit the postmaster's CPUs; its WAL writer is one of them.
	PG_WALWRITER=$(pg "$PG_DB" "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")
	PG_CPUS=$(taskset -cp "$PG_WALWRITER" 2>/dev/null | sed 's/.*: //' || echo "unknown")
	sed -e 's/^listen: .*/listen: 127.0.0.1:8081/' -e 's/^debug_listen: .*/debug_listen: 127.0.0.1:6061/' \
		-e "s#^data_dir: .*#data_dir: $WORK/data-pg#" "$WORK/relay.yaml" >"$WORK/relay-pg.yaml"
	printf 'store:\n  driver: postgres\n  dsn: %s\n  max_conns: 16\n  statement_timeout: 5s\n  lease: 30s\n' \
		"'$(pg_url "$PG_DB")'" >>"$WORK/relay-pg.yaml"
	[ "${PG_ALLOT:-on}" != off ] || printf 'billing:\n  allot: false\n' >>"$WORK/relay-pg.yaml"
	mkdir -p "$WORK/data-pg"
	start gateway-pg "$CPU_SUT" env ${GATEWAY_GOGC:+"GOGC=$GATEWAY_GOGC"} ${GATEWAY_GODEBUG:+"GODEBUG=$GATEWAY_GODEBUG"} "$GATEWAY_EXE" serve -config "$WORK/relay-pg.yaml" -log-level "$LOG_LEVEL"
	GATEWAY_PG_PID=$STARTED_PID
	if ! wait_http http://127.0.0.1:8081/healthz "$GATEWAY_PG_PID" 120; then
		log "gateway-pg did not come up; its log:"
		tail -n 20 "$WORK/gateway-pg.log" >&2
		exit 1
	fi
fi

export RELAY_ADMIN_TOKEN=$ADMIN_TOKEN
# accounts URL: creates the accounts (bench, then bench_1 … with ACCOUNTS >
# 1) with $10,000 each on the gateway at URL and prints their keys on route
# economy, comma-separated.
accounts() {
	local i name keys=
	for i in $(seq 0 $((ACCOUNTS - 1))); do
		name=bench
		[ "$i" = 0 ] || name=bench_$i
		"$ROOT/bin/relay" accounts create -account "$name" -server "$1" >/dev/null
		"$ROOT/bin/relay" accounts credit -account "$name" -usd 10000 -server "$1" >/dev/null
		keys+=${keys:+,}$("$ROOT/bin/relay" keys create -account "$name" -route economy -server "$1")
	done
	printf '%s' "$keys"
}
GW=http://127.0.0.1:8080
KEY=$(accounts "$GW")
HOLD_KEY=$("$ROOT/bin/relay" keys create -account bench -route standard -server "$GW")
BALANCE_BEFORE=$("$ROOT/bin/relay" accounts balance -account bench -server "$GW")
if [ "$TRANSLATED" != off ]; then
	GW_X=http://127.0.0.1:8082
	KEY_X=$(accounts "$GW_X")
	X_BALANCE_BEFORE=$("$ROOT/bin/relay" accounts balance -account bench -server "$GW_X")
	X_FLAGS=(-gateway-x "$GW_X" -key-x "$KEY_X" -gateway-x-pid "$GATEWAY_X_PID")
fi
if [ -n "$PG_DB" ]; then
	GW_PG=http://127.0.0.1:8081
	KEY_PG=$(accounts "$GW_PG")
	PG_BALANCE_BEFORE=$("$ROOT/bin/relay" accounts balance -account bench -server "$GW_PG")
	PG_FLAGS=(-gateway-pg "$GW_PG" -key-pg "$KEY_PG" -gateway-pg-pid "$GATEWAY_PG_PID" -pg-db "$PG_DB" -pg-sync "$PG_SYNC")
fi
# pg_commits FILE: the transactions each database of the server has
# committed so far ("name count" lines, from pg_stat_database), into FILE.
pg_commits() { pg "$PG_DB" "SELECT datname || ' ' || xact_commit FROM pg_stat_database WHERE datname IS NOT NULL" >"$1"; }

# cpu_ticks: "total steal" jiffies of all CPUs so far (/proc/stat).
cpu_ticks() { awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $9; exit}' /proc/stat; }
wait_idle
LOADAVG_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
read -r TICKS0 STEAL0 <<<"$(cpu_ticks)"
[ -z "$PG_DB" ] || pg_commits "$WORK/commits-before"
if [ "$IDLE_SPIN" = 1 ]; then
	# After wait_idle: an always-runnable task holds the load average at 1.
	command -v chrt >/dev/null || die "IDLE_SPIN=1 needs chrt (util-linux)"
	# SCHED_IDLE: runs only when nothing else on the CPU wants to.
	chrt -i 0 taskset -c "$CPU_SUT" sh -c 'while :; do :; done' &
	PIDS+=($!)
	log "IDLE_SPIN=1: CPU $CPU_SUT kept from halting by a SCHED_IDLE busy loop"
fi

# ---- load, from CPU_LOAD (bounded: loadgen's phases have fixed durations)
log "load phases (QUICK=$QUICK), the load generator on CPU $CPU_LOAD, the systems under test on CPU $CPU_SUT"
timeout --signal=INT 1800 nice -n "$NICE" taskset -c "$CPU_LOAD" "$BIN/loadgen" \
	-direct http://127.0.0.1:9101 -proxy http://127.0.0.1:9201 -control http://127.0.0.1:9203 -gateway "$GW" -key "$KEY" \
	-sut-cpu "$CPU_SUT" -load-cpu "$CPU_LOAD" \
	-hold-proxy http://127.0.0.1:9202 -hold-key "$HOLD_KEY" \
	-gateway-pid "$GATEWAY_PID" -proxy-pid "$PROXY_PID" -control-pid "$CONTROL_PID" -sim-pid "$SIM_PID" -hold-proxy-pid "$PROXY_SLOW_PID" \
	-rates "$RATES" -conns 64 -stream-rate 50 -chunks 20 -chunk-gap 10ms \
	-open-streams 1000 -open-rate 500 -open-timeout 45s -sim-latency "$SIM_LATENCY" \
	"${X_FLAGS[@]}" "${PG_FLAGS[@]}" "${LOAD_ARGS[@]}" "${MICRO_FLAG[@]}" "${PROFILE_FLAG[@]}" ${CALLS_DIR:+-calls-dir "$CALLS_DIR"} -json "$ROOT/build/bench-results.json" -md "$WORK/load.md"

read -r TICKS1 STEAL1 <<<"$(cpu_ticks)"
LOADAVG_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
STEAL_PCT=$(awk -v t=$((TICKS1 - TICKS0)) -v s=$((STEAL1 - STEAL0)) 'BEGIN { printf "%.1f", (t > 0 ? 100 * s / t : 0) }')
BALANCE_AFTER=$("$ROOT/bin/relay" accounts balance -account bench -server "$GW")
[ "$TRANSLATED" = off ] || X_BALANCE_AFTER=$("$ROOT/bin/relay" accounts balance -account bench -server "$GW_X")
if [ -n "$PG_DB" ]; then
	PG_BALANCE_AFTER=$("$ROOT/bin/relay" accounts balance -account bench -server "$GW_PG")
	pg_commits "$WORK/commits-after"
	# This database's, then the others' present at both readings (a database
	# dropped or made meanwhile by other work on the server is left out).
	read -r PG_OWN PG_OTHER <<<"$(awk -v db="$PG_DB" 'NR == FNR {b[$1] = $2; next} ($1 in b) {d = $2 - b[$1]; if ($1 == db) own += d; else other += d} END {print own + 0, other + 0}' "$WORK/commits-before" "$WORK/commits-after")"
	# How the store's tables were read and written: sequential scans of a
	# table that an index serves are plans gone wrong, dead rows what the
	# updates and deletes left for (auto)vacuum.
	PG_TABLES=$(pg "$PG_DB" "SELECT '| ' || concat_ws(' | ', relname, seq_scan, seq_tup_read, coalesce(idx_scan, 0), n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count) || ' |' FROM pg_stat_user_tables WHERE relname IN ('accounts', 'holds', 'outcomes', 'journal') ORDER BY relname")
fi

if [ "$PROFILE" = 1 ]; then
	for f in "$PROFDIR"/cpu-*.pprof; do
		[ -e "$f" ] || continue
		"$GO" tool pprof -top -nodecount 60 "$GATEWAY_EXE" "$f" >"${f%.pprof}.top.txt" 2>/dev/null || true
		"$GO" tool pprof -top -cum -nodecount 60 "$GATEWAY_EXE" "$f" >"${f%.pprof}.cum.txt" 2>/dev/null || true
	done
	for f in "$PROFDIR"/heap-*.pprof; do
		[ -e "$f" ] || continue
		"$GO" tool pprof -sample_index=inuse_space -top -nodecount 40 "$GATEWAY_EXE" "$f" >"${f%.pprof}.top.txt" 2>/dev/null || true
	done
	if [ -e "$PROFDIR/allocs-end.pprof" ]; then
		"$GO" tool pprof -sample_index=alloc_space -top -nodecount 40 "$GATEWAY_EXE" "$PROFDIR/allocs-end.pprof" >"$PROFDIR/allocs-end.top.txt" 2>/dev/null || true
	fi
	log "profiles and their pprof -top summaries: $PROFDIR"
fi
SIM_HWM=$(awk '/VmHWM/ {print $2, $3}' "/proc/$SIM_PID/status")
# What the ageing grew on disk: the Badger gateway's ledger directory.
LEDGER_DISK=$(du -sh "$WORK/data" 2>/dev/null | cut -f1)

CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
MEM_TOTAL=$(awk '/MemTotal/ {printf "%.1f GB", $2/1e6}' /proc/meminfo)
{
	echo "# ModelRelay benchmark report"
	echo
	echo "Generated $(date -u +%Y-%m-%dT%H:%M:%SZ) by \`bench/run.sh\` (QUICK=$QUICK, SIM_LATENCY=$SIM_LATENCY, PROFILE=$PROFILE, NICE=$NICE, IDLE_SPIN=$IDLE_SPIN)."
	if [ "$IDLE_SPIN" = 1 ]; then
		echo
		echo "**IDLE_SPIN=1: CPU $CPU_SUT was kept from halting by a SCHED_IDLE busy loop during the load phases, which takes the hypervisor's wake-up latency out of every target (and adds 1 to the load average after them). The gateway does not run so in production.**"
	fi
	echo
	if [ "$PROFILE" = 1 ]; then
		echo "**PROFILE=1: the gateway ran under the profiler (its debug_listen); these numbers are not the benchmark's.**"
		echo
	fi
	if [ -n "$GATEWAY_EXPERIMENT" ]; then
		echo "**An experiment: the gateway ran with $GATEWAY_EXPERIMENT, not as in production.**"
		echo
	fi
	echo "## Machine"
	echo
	echo "| nproc | CPU | memory | kernel | Go |"
	echo "|---:|---|---|---|---|"
	echo "| $NPROC | $CPU_MODEL | $MEM_TOTAL | $(uname -r) | $("$GO" env GOVERSION) |"
	echo
	echo "Load generator pinned to CPU $CPU_LOAD; sim, bare proxy and gateway pinned to CPU $CPU_SUT (\`taskset\`), the same for every target;"
	echo "everything on 127.0.0.1 in a private network namespace (\`unshare -n\`). Gateway: \`relay serve\`, real Badger ledger"
	echo "(sync_writes false, the default), first-party plugins sandboxed as in production (pool 2, metered, every call under a deadline), log level $LOG_LEVEL,"
	echo "key rate limit raised to 1,000,000/s. Calls spread over $ACCOUNTS account(s), one key each. Account bench's balance before/after the load: $BALANCE_BEFORE / $BALANCE_AFTER USD."
	echo "The gateway's data directory (its Badger ledger) at the end: $LEDGER_DISK, after $AGE_CALLS calls of ageing (\`AGE_CALLS\`) and every phase."
	echo "Sim VmHWM: $SIM_HWM. Load average (1/5/15 min) before the load phases: $LOADAVG_BEFORE, after: $LOADAVG_AFTER;"
	echo "CPU time stolen by the hypervisor during them: $STEAL_PCT%. Other work on the machine (a load average above ~2"
	echo "on two CPUs before the run) makes every number noisier; rerun on a quiet machine before comparing runs."
	echo
	if [ "$TRANSLATED" != off ]; then
		echo "**gateway-x** (:8082): the same configuration as the gateway (Badger, plugins, limits, route, model, prices) but with line \`bench\`'s"
		echo "\`protocol: gemini\`: every chat call is translated to the sim's \`generateContent\` (\`streamGenerateContent?alt=sse\` when streamed) and back."
		echo "Account bench's balance before/after the load: $X_BALANCE_BEFORE / $X_BALANCE_AFTER USD."
		echo
	fi
	if [ -n "$PG_DB" ]; then
		PG_SET_BY=
		[ -z "$PG_SYNCHRONOUS_COMMIT" ] || PG_SET_BY="; set by \`ALTER DATABASE $PG_DB SET synchronous_commit = $PG_SYNCHRONOUS_COMMIT\`"
		echo "**gateway-pg** (:8081): the same configuration with \`store: {driver: postgres, max_conns: 16, statement_timeout: 5s, lease: 30s}\`$([ "${PG_ALLOT:-on}" != off ] || echo " and \`billing: {allot: false}\`"),"
		echo "its ledger in database \`$PG_DB\` (made for this run, dropped after it) of PostgreSQL $PG_VERSION on this machine, reached through"
		echo "its unix socket (\`${POSTGRES#*\?}\`). **synchronous_commit: $PG_SYNC** for this database (the server's: $PG_SERVER_SYNC$PG_SET_BY)."
		case "$PG_CPU" in
		sut) echo "PostgreSQL's processes were pinned to CPU $CPU_SUT for the run (\`PG_CPU=sut\`): the database shares the gateways' CPU, as Badger's work does inside the gateway." ;;
		load) echo "PostgreSQL's processes were pinned to CPU $CPU_LOAD for the run (\`PG_CPU=load\`): the database has a CPU apart from the gateways', shared with the load generator." ;;
		*)
			echo "PostgreSQL's processes may run on CPUs $PG_CPUS (\`PG_CPU=any\`): the server is not pinned, so its share of each call can run on the"
			echo "load generator's CPU $CPU_LOAD as well as on CPU $CPU_SUT, while the Badger gateway's ledger work is inside its own process on CPU $CPU_SUT."
			;;
		esac
		echo "Account bench's balance before/after the load: $PG_BALANCE_BEFORE / $PG_BALANCE_AFTER USD. Transactions committed during the load phases:"
		echo "$PG_OWN by this database, $PG_OTHER by the server's other databases (other work on the same server)."
		echo
		echo "The store's tables at the end (\`pg_stat_user_tables\`, counts since the database was made; the server's autovacuum: $PG_AUTOVACUUM):"
		echo
		echo "| table | seq scans | rows read by them | index scans | inserted | updated | of which HOT | deleted | live | dead | autovacuums | autoanalyzes |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		echo "$PG_TABLES"
		echo
	fi
	cat "$WORK/load.md"
	echo "## Micro-benchmarks"
	echo
	if [ "$SKIP_MICRO" != 1 ]; then
		echo "\`${MICRO_ENV[*]:+${MICRO_ENV[*]} }go test -run '^\$' -bench '$MICRO_RE' ${MICRO_PKGS[*]} -benchmem ${MICRO_ARGS[*]}\`"
		echo "(raw output: build/micro.txt), summarised by benchstat:"
	fi
	echo
	echo '```text'
	cat "$WORK/benchstat.txt"
	echo '```'
} >"$REPORT"
cat "$REPORT"
log "report: $REPORT (raw: build/bench-results.json, build/micro.txt)"
