# bench/pg.sh — sourced by run.sh, pgprobe.sh and pgquick.sh: the PostgreSQL server
# they make their databases on, given as POSTGRES, a postgres:// URL naming
# a database to connect to (pg_url replaces that name with another),
# by default the local server's postgres database over its unix socket.
# Sourcing it sets that default and ADMIN_DB, the name of that database.

POSTGRES=${POSTGRES:-postgres://postgres@/postgres?host=/var/run/postgresql}
ADMIN_DB=${POSTGRES%%\?*}
ADMIN_DB=${ADMIN_DB##*/}

# pg_check_url: dies (the caller's die) unless POSTGRES names a database.
pg_check_url() {
	case "$POSTGRES" in
	postgres://*/* | postgresql://*/*) ;;
	*) die "POSTGRES=$POSTGRES: a postgres:// URL naming a database (e.g. postgres://postgres@/postgres?host=/var/run/postgresql)${1:+, $1}" ;;
	esac
}

# pg_url DB: $POSTGRES pointed at database DB (everything up to the last /
# before any query, DB, the query).
pg_url() {
	local base=${POSTGRES%%\?*} query=
	[ "$base" = "$POSTGRES" ] || query="?${POSTGRES#*\?}"
	printf '%s/%s%s' "${base%/*}" "$1" "$query"
}

# pg DB SQL: runs SQL on database DB and prints the result, unaligned.
pg() { psql "$(pg_url "$1")" -X -q -At -v ON_ERROR_STOP=1 -c "$2"; }
