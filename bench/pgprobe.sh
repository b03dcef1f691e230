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
# synchronous_commit on waits for at least. A second table prices the
# pair's parts: the pair beside variants that each leave one part out (the
# key's period roll, the outcome row, the charge entry read back) or write
# relay_hold's statement inline, one client, synchronous_commit off.
#
# Usage: bench/pgprobe.sh   (POSTGRES as for run.sh; DURATION seconds per
# case, default 10; CPU: the CPU pgbench is pinned to, default 1, where the
# gateway runs in `make bench`). Needs psql, pgbench and bin/relay (make build).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
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
# run_case SCRIPT CLIENTS ACCOUNTS SYNC: pgbench runs SCRIPT on a fresh
# database for DURATION seconds and prints "pairs/s hold_ms settle_ms
# dbCPU_µs clientCPU_µs hot dead" (per pair; hold and settle "-" when the
# script's statements are not the store's).
run_case() {
	local script=$1 clients=$2 accounts=$3 sync=$4 bg
	fresh "$accounts"
	: >"$WORK/cpu"
	PGOPTIONS="-c synchronous_commit=$sync" taskset -c "$CPU" bash -c 'TIMEFORMAT="%U %S"; { time pgbench "$@" >"'"$WORK"'/out" 2>&1; } 2>"'"$WORK"'/time"' _ \
		-n -M prepared -r -c "$clients" -j 1 -T "$DURATION" -D accounts="$accounts" -f "$script" "$(pg_url "$DB")" &
	bg=$!
	# Sample the backends' CPU while they live: the last reading of each.
	while kill -0 "$bg" 2>/dev/null; do
		backend_cpu >>"$WORK/cpu"
		sleep 0.2
	done
	wait "$bg" || { cat "$WORK/out" >&2; die "pgbench failed on $script"; }
	local pairs tps hold settle db u s hot
	pairs=$(awk '/number of transactions actually processed/ {split($0, a, ": "); split(a[2], b, "/"); print b[1]}' "$WORK/out")
	tps=$(awk '/^tps = / {printf "%.0f", $3}' "$WORK/out")
	hold=$(awk '/SELECT relay_hold/ {print $1; exit}' "$WORK/out")
	settle=$(awk '/WITH h AS/ {print $1; exit}' "$WORK/out")
	db=$(awk '{last[$1] = $2} END {for (p in last) s += last[p]; printf "%.0f", s}' "$WORK/cpu")
	read -r u s <"$WORK/time"
	hot=$(pg "$DB" "SELECT n_tup_hot_upd || '/' || n_tup_upd || ' ' || n_dead_tup FROM pg_stat_user_tables WHERE relname = 'accounts'")
	awk -v tps="$tps" -v h="${hold:--}" -v st="${settle:--}" -v db="$db" -v n="$pairs" -v u="$u" -v s="$s" -v hot="$hot" \
		'BEGIN { printf "%s %s %s %.0f %.0f %s\n", tps, h, st, db / 1000 / n, (u + s) * 1e6 / n, hot }'
}

echo "| clients | accounts | synchronous_commit | pairs/s | hold | settle | db CPU/pair | client CPU/pair | HOT updates | dead rows |"
echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
for sync in on off; do
	for clients in 1 16; do
		for accounts in 1 16; do
			[ "$clients" = 1 ] && [ "$accounts" = 16 ] && continue # one caller: the accounts do not matter
			read -r tps hold settle db client hot dead < <(run_case "$WORK/pair.sql" "$clients" "$accounts" "$sync")
			awk -v c="$clients" -v a="$accounts" -v sy="$sync" -v tps="$tps" -v h="$hold" -v st="$settle" -v db="$db" -v cl="$client" -v hot="$hot" -v dead="$dead" \
				'BEGIN { printf "| %d | %d | %s | %s | %.0f µs | %.0f µs | %s µs | %s µs | %s | %s |\n", c, a, sy, tps, h * 1000, st * 1000, db, cl, hot, dead }'
		done
	done
done

# Where one pair's database CPU goes: the pair again beside variants that
# each leave one part out (or, for the hold, write it as plain SQL), one
# client, synchronous_commit off (no flush), each run twice in turn. A
# variant does less than the store must; it only prices the part.
variant() { # variant NAME: the pair's script with NAME's change, on stdout
	case $1 in
	store) cat "$WORK/pair.sql" ;;
	hold-inline) # relay_hold's first statement, for a key with no limit, inline
		awk -v stmt="$(cat <<'SQL'
WITH a AS (
	UPDATE accounts SET held = held + 2000000
	WHERE id = 'acct_' || :a AND balance > 0 AND balance - held >= 2000000
	  AND NOT EXISTS (SELECT 1 FROM outcomes WHERE request_id = 'r' || :client_id || '_' || :r)
	  AND NOT EXISTS (SELECT 1 FROM keys WHERE id = 'key_' || :a AND account = 'acct_' || :a AND limit_nano > 0)
	RETURNING id),
k AS (
	UPDATE keys SET held = keys.held + 2000000,
		spent = relay_spent_at(keys.reset, keys.period_start, keys.spent, now()),
		period_start = greatest(keys.period_start, relay_period_start(keys.reset, now()))
	FROM a WHERE keys.id = 'key_' || :a AND keys.account = a.id
	RETURNING 1),
h AS (
	INSERT INTO holds (request_id, account, key_id, model, route, endpoint, amount, created, owner, lease_until, keyed)
	SELECT 'r' || :client_id || '_' || :r, a.id, 'key_' || :a, 'm', 'r', 'chat', 2000000, now(), 'probe', now() + interval '30 s', EXISTS (SELECT 1 FROM k)
	FROM a RETURNING 1)
SELECT EXISTS (SELECT 1 FROM h);
SQL
)" '/^SELECT relay_hold/ {print stmt; next} {print}' "$WORK/pair.sql" ;;
	no-key-roll) # the hold without rolling the key's spend into its period
		variant hold-inline | sed -e '/spent = relay_spent_at/d' -e '/period_start = greatest/d' -e 's/held = keys.held + 2000000,$/held = keys.held + 2000000/' ;;
	no-outcome) # the settle without its outcome row
		sed -e '/^o AS (/,/ON CONFLICT (request_id) DO NOTHING)/d' -e 's/WHERE h.keyed AND keys.id = h.key_id),$/WHERE h.keyed AND keys.id = h.key_id)/' "$WORK/pair.sql" ;;
	no-returning) # the settle returning nothing (the store reads back the charge entry)
		sed -e 's/^RETURNING account, seq, .*;$/;/' "$WORK/pair.sql" ;;
	esac
}
echo
echo "Where one pair's database CPU goes (1 client, 1 account, synchronous_commit off, two runs each):"
echo
echo "| variant | pairs/s | db CPU/pair | − what it changes |"
echo "|---|---:|---:|---:|"
VARIANTS="store hold-inline no-key-roll no-outcome no-returning"
declare -A CPU_OF TPS_OF
for round in 1 2; do
	for v in $VARIANTS; do
		variant "$v" >"$WORK/$v.sql"
		read -r tps _ _ db _ _ _ < <(run_case "$WORK/$v.sql" 1 1 off)
		CPU_OF[$v]+="${CPU_OF[$v]:+ / }$db" TPS_OF[$v]+="${TPS_OF[$v]:+ / }$tps"
	done
done
mean() { tr -d ' ' <<<"$1" | awk -F/ '{print ($1 + $2) / 2}'; }
for v in $VARIANTS; do
	case $v in
	store) d="—" ;;
	no-key-roll) d="$(awk -v a="$(mean "${CPU_OF[$v]}")" -v b="$(mean "${CPU_OF[hold-inline]}")" 'BEGIN {printf "%+.0f µs", a - b}') (against hold-inline)" ;;
	*) d="$(awk -v a="$(mean "${CPU_OF[$v]}")" -v b="$(mean "${CPU_OF[store]}")" 'BEGIN {printf "%+.0f µs", a - b}')" ;;
	esac
	echo "| $v | ${TPS_OF[$v]} | ${CPU_OF[$v]} µs | $d |"
done
echo
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
