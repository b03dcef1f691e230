#!/usr/bin/env bash
# bench/pgprobe.sh — where a hold+settle pair's time goes in PostgreSQL,
# without the gateway: pgbench runs the PostgreSQL store's Hold and Settle
# statements (store/postgres/ledger.go, prepared) on a database made for
# each case (the schema by `relay migrate`, never analyzed, as a new
# gateway's is; dropped after it), and the probe reads, for each case:
#   pairs/s            hold+settle pairs per second (two commits each)
#   hold, settle       mean latency of each statement as pgbench saw it (-r)
#   db CPU/pair        CPU time of the database's backends per pair (their
#                      /proc/PID/schedstat, sampled while they live)
#   client CPU/pair    pgbench's own user+system time per pair
#   HOT                the accounts table's updates that were HOT, and its
#                      dead row versions at the end (pg_stat_user_tables)
# over clients (1, 16) × accounts (1, 16) × synchronous_commit (on, off; set
# per session through PGOPTIONS, never on the server). It also times the
# disk's fdatasync of one 8 kB write (pg_test_fsync), what a commit with
# synchronous_commit on waits for at least.
#
# Usage: bench/pgprobe.sh   (POSTGRES as for run.sh; DURATION seconds per
# case, default 10; CPU: the CPU pgbench is pinned to, default 1, where the
# gateway runs in `make bench`). Needs psql, pgbench and bin/relay (make build).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
POSTGRES=${POSTGRES:-postgres://postgres@/postgres?host=/var/run/postgresql}
DURATION=${DURATION:-10}
CPU=${CPU:-1}

log() { printf 'pgprobe: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
for tool in psql pgbench taskset; do
	command -v "$tool" >/dev/null || die "$tool is required"
done
[ -x "$ROOT/bin/relay" ] || die "bin/relay is missing: make build"
# shellcheck source=bench/pg.sh
. "$ROOT/bench/pg.sh"
pg_check_url
ADMIN_DB=${POSTGRES%%\?*}
ADMIN_DB=${ADMIN_DB##*/}

DB=
WORK=$(mktemp -d /tmp/relay-pgprobe.XXXXXX)
drop() {
	[ -z "$DB" ] || pg "$ADMIN_DB" "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null || log "could not drop database $DB: drop it by hand"
	DB=
}
trap 'drop; rm -rf "$WORK"' EXIT
# fresh ACCOUNTS: a new database with the store's schema and ACCOUNTS
# accounts, in DB.
fresh() {
	drop
	DB=relay_probe_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	pg "$ADMIN_DB" "CREATE DATABASE $DB" >/dev/null
	"$ROOT/bin/relay" migrate -dsn "$(pg_url "$DB")" >/dev/null
	pg "$DB" "INSERT INTO accounts (id, balance) SELECT 'acct_' || i, 1000000000000000 FROM generate_series(0, $1 - 1) i" >/dev/null
	pg "$DB" "INSERT INTO keys (id, hash, account, route, created) SELECT 'key_' || i, 'hash_' || i, 'acct_' || i, 'r', now() FROM generate_series(0, $1 - 1) i" >/dev/null
}

# The store's statements, as store/postgres/ledger.go has them: Hold is
# relay_hold (migrations/0003), on a key of the account with no limit.
cat >"$WORK/pair.sql" <<'EOF'
\set a random(0, :accounts - 1)
\set r random(1, 999999999999999)
SELECT relay_hold('r' || :client_id || '_' || :r, 'acct_' || :a, 2000000, 'key_' || :a, 'm', 'r', 'chat', now(), 'probe', 30000);
WITH h AS (
	DELETE FROM holds WHERE request_id = 'r' || :client_id || '_' || :r AND ('acct_' || :a = '' OR account = 'acct_' || :a) RETURNING *),
a AS (
	UPDATE accounts acc SET balance = acc.balance - 1234567, held = acc.held - h.amount, seq = acc.seq + 1
	FROM h WHERE acc.id = h.account
	RETURNING acc.id, acc.balance, acc.seq),
k AS (
	UPDATE keys SET held = keys.held - h.amount, spent = keys.spent + 1234567
	FROM h, a WHERE h.keyed AND keys.id = h.key_id),
o AS (
	INSERT INTO outcomes (request_id, account, state, hold_amount, charge, seq, owner, reason)
	SELECT h.request_id, h.account, 'settled', h.amount, 1234567, a.seq, h.owner, '' FROM h, a
	ON CONFLICT (request_id) DO NOTHING)
INSERT INTO journal (account, seq, kind, request_id, key_id, model, route, endpoint, usage, hold_amount, amount, balance_after, note)
SELECT a.id, a.seq, 'charge', h.request_id, h.key_id, h.model, h.route, h.endpoint, '{"input_tokens":1000,"output_tokens":200}'::jsonb, h.amount, -1234567, a.balance, ''
FROM a, h
RETURNING account, seq, kind, request_id, key_id, model, route, endpoint, usage, hold_amount, amount, balance_after, time, note;
EOF

# backend_cpu: "pid ns" of every backend of $DB now.
backend_cpu() {
	local pid
	for pid in $(pgrep -f "^postgres: .* $DB " || true); do
		awk -v p="$pid" '{print p, $1}' "/proc/$pid/schedstat" 2>/dev/null || true
	done
}

log "$DURATION s per case; pgbench on CPU $CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# The disk the WAL is on, timed where the probe may write: its temporary
# directory, if that is the same filesystem as the server's data.
FSYNC="not measured"
PG_DATA=$(pg "$ADMIN_DB" "SHOW data_directory")
FSYNC_BIN=$(ls /usr/lib/postgresql/*/bin/pg_test_fsync 2>/dev/null | tail -n1 || true)
if [ -n "$FSYNC_BIN" ] && [ "$(stat -c %d "$WORK")" = "$(stat -c %d "$PG_DATA" 2>/dev/null)" ]; then
	# Only its first section (one 8 kB write per method) is read.
	FSYNC=$({ timeout 8 "$FSYNC_BIN" -s 1 -f "$WORK/fsync.tmp" 2>/dev/null || true; } |
		awk '/one 8kB write/ {f = 1} f && $1 == "fdatasync" && !done {print $(NF-1), "µs"; done = 1}')
fi
echo "fdatasync of one 8 kB write (pg_test_fsync; the server's WAL sync method: $(pg "$ADMIN_DB" 'SHOW wal_sync_method')): $FSYNC"
echo
echo "| clients | accounts | synchronous_commit | pairs/s | hold | settle | db CPU/pair | client CPU/pair | HOT updates | dead rows |"
echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
for sync in on off; do
	for clients in 1 16; do
		for accounts in 1 16; do
			[ "$clients" = 1 ] && [ "$accounts" = 16 ] && continue # one caller: the accounts do not matter
			fresh "$accounts"
			: >"$WORK/cpu"
			start=$(date +%s%N)
			PGOPTIONS="-c synchronous_commit=$sync" taskset -c "$CPU" bash -c 'TIMEFORMAT="%U %S"; { time pgbench "$@" >"'"$WORK"'/out" 2>&1; } 2>"'"$WORK"'/time"' _ \
				-n -M prepared -r -c "$clients" -j 1 -T "$DURATION" -D accounts="$accounts" -f "$WORK/pair.sql" "$(pg_url "$DB")" &
			bg=$!
			# Sample the backends' CPU while they live: the last reading of each.
			while kill -0 "$bg" 2>/dev/null; do
				backend_cpu >>"$WORK/cpu"
				sleep 0.2
			done
			wait "$bg" || { cat "$WORK/out" >&2; die "pgbench failed"; }
			pairs=$(awk '/number of transactions actually processed/ {split($0, a, ": "); split(a[2], b, "/"); print b[1]}' "$WORK/out")
			tps=$(awk '/^tps = / {printf "%.0f", $3}' "$WORK/out")
			hold=$(awk '/SELECT relay_hold/ {print $1; exit}' "$WORK/out")
			settle=$(awk '/WITH h AS/ {print $1; exit}' "$WORK/out")
			db=$(awk '{last[$1] = $2} END {for (p in last) s += last[p]; printf "%.0f", s}' "$WORK/cpu")
			read -r u s <"$WORK/time"
			hot=$(pg "$DB" "SELECT n_tup_hot_upd || '/' || n_tup_upd || ' ' || n_dead_tup FROM pg_stat_user_tables WHERE relname = 'accounts'")
			awk -v c="$clients" -v a="$accounts" -v sy="$sync" -v tps="$tps" -v h="$hold" -v st="$settle" -v db="$db" -v n="$pairs" -v u="$u" -v s="$s" -v hot="$hot" \
				'BEGIN { split(hot, x, " "); printf "| %d | %d | %s | %s | %.0f µs | %.0f µs | %.0f µs | %.0f µs | %s | %s |\n", c, a, sy, tps, h * 1000, st * 1000, db / 1000 / n, (u + s) * 1e6 / n, x[1], x[2] }'
		done
	done
done
echo
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
