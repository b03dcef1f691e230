#!/usr/bin/env bash
# bench/pgquick.sh — gateway-pg alone, in about a minute: for an A/B of two
# builds of the ledger's path (BIN=...), not a verdict (run.sh gives those).
#
# Starts relay sim, a bare proxy and `relay serve` on a database made for the
# run (dropped after it), all pinned to CPU 1, and loadgen pinned to CPU 0;
# measures the latency phase at RATES for DURATION each, one round; prints the
# direct, proxy and gateway-pg rows (p50, p99, overhead p50) and the
# gateway's hold, carve and settle times (relay_store_duration_seconds: count, mean
# and the share under 0.5, 1 and 2.5 ms), the peaks of its ledger backlog
# (relay_store_backlog, relay_store_backlog_age_seconds), and the CPU per call of the
# processes serving the run's database (backends and autovacuum workers).
#
# Usage: BIN=/tmp/relay-other bench/pgquick.sh
#   BIN (default bin/relay), RATES (500,1000), DURATION (3s), SIM_LATENCY
#   (0s: the provider's wait before answering), SYNC (synchronous_commit of
#   the run's database; default the server's), MAX_CONNS (store.max_conns,
#   16), PG_SET (settings of the run's database, "name=value ..."), ALLOT
#   (off: billing.allot false, each call held in the database; the
#   default leaves billing out, for builds that predate it), POSTGRES
#   (as for run.sh).
# Needs make build and make plugins, and loadgen and bareproxy from a
# run.sh (build/bench/bin). Uses 127.0.0.1 ports 8081, 9101 and 9201:
# not while run.sh runs.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/bin/relay}
RATES=${RATES:-500,1000}
DURATION=${DURATION:-3s}
SIM_LATENCY=${SIM_LATENCY:-0s}
MAX_CONNS=${MAX_CONNS:-16}
TOKEN=pgquick-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')

log() { printf 'pgquick: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=bench/pg.sh
. "$ROOT/bench/pg.sh"
pg_check_url
for f in "$BIN" "$ROOT/bin/relay" "$ROOT/build/bench/bin/loadgen" "$ROOT/build/bench/bin/bareproxy"; do
	[ -x "$f" ] || die "$f is missing: make build, and bench/run.sh once for loadgen and bareproxy"
done
if curl -sf http://127.0.0.1:8081/healthz >/dev/null 2>&1; then
	die "something already answers on 127.0.0.1:8081"
fi

WORK=$(mktemp -d)
DB=relay_quick_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
PIDS=()
cleanup() {
	[ ${#PIDS[@]} -eq 0 ] || kill "${PIDS[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	pg "$ADMIN_DB" "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
pg "$ADMIN_DB" "CREATE DATABASE $DB" >/dev/null
[ -z "${SYNC:-}" ] || pg "$ADMIN_DB" "ALTER DATABASE $DB SET synchronous_commit = $SYNC" >/dev/null
for kv in ${PG_SET:-}; do
	pg "$ADMIN_DB" "ALTER DATABASE $DB SET ${kv%%=*} = '${kv#*=}'" >/dev/null
done
log "synchronous_commit $(pg "$DB" "SHOW synchronous_commit")${PG_SET:+, $PG_SET}; allotments ${ALLOT:-on}; $BIN; rates $RATES, $DURATION each; provider latency $SIM_LATENCY"

taskset -c 1 "$ROOT/bin/relay" sim -addr 127.0.0.1:9101 -latency "$SIM_LATENCY" >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
PIDS+=("$SIM_PID")
taskset -c 1 "$ROOT/build/bench/bin/bareproxy" -addr 127.0.0.1:9201 -target http://127.0.0.1:9101 >"$WORK/proxy.log" 2>&1 &
PIDS+=($!)
cat >"$WORK/relay.yaml" <<EOF
listen: 127.0.0.1:8081
data_dir: $WORK/data
admin_token: $TOKEN
plugins:
  dir: ${RELAY_PLUGIN_DIR:-$ROOT/build/plugins}
  cache_dir: ${RELAY_WASM_CACHE:-$ROOT/build/wasm-cache}
server:
  max_connections_per_address: -1
limits:
  key_rate: {rate: 1000000, burst: 1000000}
$([ "${ALLOT:-on}" = off ] && printf 'billing:\n  allot: false')
routes:
  - name: economy
lines:
  - name: bench
    protocol: openai
    base_url: http://127.0.0.1:9101
    models: ["*"]
    route: economy
store:
  driver: postgres
  dsn: '$(pg_url "$DB")'
  max_conns: $MAX_CONNS
  statement_timeout: 5s
  lease: 30s
EOF
mkdir -p "$WORK/data"
taskset -c 1 "$BIN" serve -config "$WORK/relay.yaml" >"$WORK/gateway.log" 2>&1 &
GW_PID=$!
PIDS+=("$GW_PID")
for _ in $(seq 300); do
	curl -sf http://127.0.0.1:8081/healthz >/dev/null 2>&1 && break
	kill -0 "$GW_PID" 2>/dev/null || { tail -n 20 "$WORK/gateway.log" >&2; die "relay serve exited"; }
	sleep 0.2
done
export RELAY_ADMIN_TOKEN=$TOKEN
GW=http://127.0.0.1:8081
"$ROOT/bin/relay" accounts create -account bench -server "$GW" >/dev/null
"$ROOT/bin/relay" accounts credit -account bench -usd 10000 -server "$GW" >/dev/null
KEY=$("$ROOT/bin/relay" keys create -account bench -route economy -server "$GW")

# db_sample: "pid ns" for each process serving the database now (backends
# and autovacuum workers alike: pg_stat_activity), from /proc/PID/schedstat.
db_sample() {
	local pid t
	for pid in $(pg "$ADMIN_DB" "SELECT pid FROM pg_stat_activity WHERE datname = '$DB'"); do
		read -r t _ <"/proc/$pid/schedstat" 2>/dev/null && echo "$pid $t"
	done
}
db_sample >"$WORK/cpu0"
CALLS0=$(pg "$DB" "SELECT count(*) FROM journal WHERE kind = 'charge'")
# While the load runs, sample every 0.2 s, so that a process that starts
# and ends meanwhile (a connection, an autovacuum worker) counts too: each
# counts up to its last sample, from its sample before the load if it was
# alive then, else from its start.
(while :; do db_sample; sleep 0.2; done) >"$WORK/cpu" 2>/dev/null &
SAMPLER=$!
PIDS+=("$SAMPLER")
# The ledger's writes under way (relay_store_backlog) and the oldest's age,
# every 50 ms: their peaks under a load the database keeps up with are
# what billing.max_store_backlog and max_store_wait are set against.
(while :; do curl -sf -H "Authorization: Bearer $TOKEN" "$GW/metrics" | grep -E '^relay_store_backlog(_age_seconds)? ' | tr '\n' ' '; echo; sleep 0.05; done) >"$WORK/backlog" 2>/dev/null &
BACKLOG=$!
PIDS+=("$BACKLOG")
taskset -c 0 "$ROOT/build/bench/bin/loadgen" -direct http://127.0.0.1:9101 -proxy http://127.0.0.1:9201 \
	-gateway "$GW" -key "$KEY" -phases latency -rates "$RATES" -duration "$DURATION" -rounds 1 \
	-jitter 0 -warmup 500ms -sim-pid "$SIM_PID" -gateway-pid "$GW_PID" -md "$WORK/report.md" >/dev/null 2>"$WORK/loadgen.log" ||
	{ tail -n 20 "$WORK/loadgen.log" >&2; die "loadgen failed"; }
printf '| rate/s | target | p50 | p99 | overhead p50 |\n|---:|---|---:|---:|---:|\n'
grep -E '^\| [0-9]+ \| (direct|proxy|gateway) \| [0-9.]+ ms' "$WORK/report.md" |
	awk -F'|' '{t=$3; gsub(/ /,"",t); if (t=="gateway") t="gateway-pg"; printf "|%s| %s |%s|%s|%s|\n", $2, t, $4, $6, $11}'
curl -sf -H "Authorization: Bearer $TOKEN" "$GW/metrics" | awk '
	/^relay_store_duration_seconds_(bucket|sum|count)/ {
		match($0, /op="[a-z]+"/); op = substr($0, RSTART + 4, RLENGTH - 5)
		if ($0 ~ /_sum/) sum[op] = $2
		else if ($0 ~ /_count/) n[op] = $2
		else if ($0 ~ /le="0.0005"/) a[op] = $2
		else if ($0 ~ /le="0.001"/) b[op] = $2
		else if ($0 ~ /le="0.0025"/) c[op] = $2
	}
	END {
		for (op in n) if (n[op] > 0)
			printf "%s: %d, mean %.3f ms; under 0.5 ms %.0f%%, 1 ms %.0f%%, 2.5 ms %.0f%%\n", op, n[op], 1000 * sum[op] / n[op], 100 * a[op] / n[op], 100 * b[op] / n[op], 100 * c[op] / n[op]
	}'
kill "$SAMPLER" "$BACKLOG" 2>/dev/null || true
awk '{for (i = 1; i < NF; i += 2) {if ($i == "relay_store_backlog" && $(i+1) > b) b = $(i+1); if ($i == "relay_store_backlog_age_seconds" && $(i+1) > a) a = $(i+1)}}
	END {if (NR) printf "ledger writes under way: peak %d, the oldest at most %.0f ms (%d samples of /metrics, every 50 ms)\n", b, 1000 * a, NR}' "$WORK/backlog"
db_sample >>"$WORK/cpu"
read -r DBCPU PROCS < <(awk 'NR == FNR {before[$1] = $2; next} {last[$1] = $2}
	END {for (p in last) {s += last[p] - before[p]; n++} printf "%d %d\n", s, n}' "$WORK/cpu0" "$WORK/cpu")
CALLS=$(($(pg "$DB" "SELECT count(*) FROM journal WHERE kind = 'charge'") - CALLS0))
[ "$CALLS" -le 0 ] || printf 'database: %d µs of CPU per call over %d calls (%d processes; the load phases and their warm-ups)\n' \
	$((DBCPU / 1000 / CALLS)) "$CALLS" "$PROCS"
