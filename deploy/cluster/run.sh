#!/usr/bin/env bash
# deploy/cluster/run.sh — N `relay serve` replicas on one PostgreSQL database,
# one `relay sim` as their provider, and nginx in front of them, all on this
# machine and in the foreground: Ctrl-C or SIGTERM stops everything (started
# as a background job of a script, it ignores SIGINT: send SIGTERM). `make
# cluster` builds what it needs and runs it.
#
# Everything is configured by the environment (defaults in parentheses):
#   CLUSTER_PORT           the balancer's port (8000)
#   CLUSTER_REPLICA_PORTS  one replica per port ("8001 8002 8003")
#   CLUSTER_SIM_PORT       relay sim's port (8009)
#   CLUSTER_SIM_ARGS       relay sim's flags, e.g. "-chunk-gap 200ms -chunks 5" ("")
#   CLUSTER_LEASE          store.lease of every replica (30s)
#   CLUSTER_DIR            generated configs, logs and pid files (build/cluster)
#   RELAY_DATABASE_URL     the shared database (postgres://postgres@127.0.0.1:5432/relay_cluster,
#                          created when it is missing)
#   RELAY_ADMIN_TOKEN      the admin token of every replica (random when unset)
#   RELAY_REDIS_URL        Redis shared by the replicas (unset: limits, key cache and
#                          cooldowns are per replica)
#   CLUSTER_REDIS_PREFIX   the replicas' key prefix in Redis (relay-cluster:)
#   RELAY_BIN              the relay binary (bin/relay)
#   RELAY_PLUGIN_DIR       the plugin directory (build/plugins)
#   RELAY_WASM_CACHE       the compilation cache the replicas share (build/wasm-cache)
#   NGINX                  the nginx binary (nginx on PATH, else /usr/sbin/nginx)
#
# CLUSTER_DIR/<name>.pid holds the pid of each process (replica-1…, sim,
# nginx); CLUSTER_DIR/<name>.log its output.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/deploy/cluster

abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

lb_port=${CLUSTER_PORT:-8000}
read -r -a replica_ports <<<"${CLUSTER_REPLICA_PORTS:-8001 8002 8003}"
sim_port=${CLUSTER_SIM_PORT:-8009}
sim_args=${CLUSTER_SIM_ARGS:-}
lease=${CLUSTER_LEASE:-30s}
dir=$(abs "${CLUSTER_DIR:-$root/build/cluster}")
relay=$(abs "${RELAY_BIN:-$root/bin/relay}")
plugin_dir=$(abs "${RELAY_PLUGIN_DIR:-$root/build/plugins}")
wasm_cache=$(abs "${RELAY_WASM_CACHE:-$root/build/wasm-cache}")
nginx=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}

die() { echo "cluster: $*" >&2; exit 1; }

[ ${#replica_ports[@]} -ge 1 ] || die "CLUSTER_REPLICA_PORTS names no port"
[ -x "$relay" ] || die "no relay binary at $relay (make build, or set RELAY_BIN)"
ls "$plugin_dir"/*.wasm >/dev/null 2>&1 || die "no plugins in $plugin_dir (make plugins, or set RELAY_PLUGIN_DIR)"
[ -x "$nginx" ] || die "nginx is not installed: make nginx (as root), or apt-get install nginx-light, or set NGINX"
command -v curl >/dev/null || die "curl is needed to wait for the processes to be ready"

if [ -z "${RELAY_DATABASE_URL:-}" ]; then
	RELAY_DATABASE_URL="postgres://postgres@127.0.0.1:5432/relay_cluster?sslmode=disable"
	if command -v psql >/dev/null && ! psql -q -d "$RELAY_DATABASE_URL" -c 'select 1' >/dev/null 2>&1; then
		createdb -h 127.0.0.1 -U postgres relay_cluster || die "cannot create the database relay_cluster; set RELAY_DATABASE_URL"
	fi
fi
export RELAY_DATABASE_URL
if [ -z "${RELAY_ADMIN_TOKEN:-}" ]; then
	RELAY_ADMIN_TOKEN=admin-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
fi
export RELAY_ADMIN_TOKEN

mkdir -p "$dir/nginx-tmp"
rm -f "$dir"/*.pid

# Fill a template: fill TEMPLATE OUT KEY=VALUE…
fill() {
	local in=$1 out=$2 kv
	shift 2
	local script=()
	for kv in "$@"; do
		script+=(-e "s|@${kv%%=*}@|$(printf '%s' "${kv#*=}" | sed 's/[|&\\]/\\&/g')|g")
	done
	sed "${script[@]}" "$in" >"$out"
}

# The processes this script started, by pid, with their names.
declare -A names=()
order=()

start() { # start NAME COMMAND…
	local name=$1
	shift
	"$@" >"$dir/$name.log" 2>&1 &
	names[$!]=$name
	order+=("$!")
	echo "$!" >"$dir/$name.pid"
}

stop() {
	trap - EXIT INT TERM
	local pid
	for pid in "${!names[@]}"; do
		if [ "${names[$pid]}" = nginx ]; then
			kill -QUIT "$pid" 2>/dev/null || true # graceful: streams in flight finish
		else
			kill -TERM "$pid" 2>/dev/null || true # relay drains its calls, then exits
		fi
	done
	wait || true
	rm -f "$dir"/*.pid
	echo "cluster: stopped" >&2
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_ready() { # wait_ready URL PID
	local url=$1 pid=$2
	for _ in $(seq 1200); do
		curl -fsS -m 2 -o /dev/null "$url" 2>/dev/null && return 0
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "cluster: ${names[$pid]} exited; the end of $dir/${names[$pid]}.log:" >&2
			tail -n 20 "$dir/${names[$pid]}.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	die "${names[$pid]} did not answer $url in 120 s; see $dir/${names[$pid]}.log"
}

# The provider.
# shellcheck disable=SC2086 # CLUSTER_SIM_ARGS is a list of flags
start sim "$relay" sim -addr "127.0.0.1:$sim_port" $sim_args
wait_ready "http://127.0.0.1:$sim_port/v1/models" "$!"

# The replicas: one config each, identical but for listen and data_dir.
redis_block=(-e '') # a script that changes nothing
if [ -n "${RELAY_REDIS_URL:-}" ]; then
	redis_block=(-e 's/^#redis //')
fi
servers=""
i=0
for port in "${replica_ports[@]}"; do
	i=$((i + 1))
	cfg=$dir/replica-$i.yaml
	fill "$here/relay.yaml.in" "$cfg.tmp" LISTEN="127.0.0.1:$port" DATA_DIR="$dir/replica-$i" \
		LEASE="$lease" PLUGIN_DIR="$plugin_dir" WASM_CACHE="$wasm_cache" \
		SIM_ADDR="127.0.0.1:$sim_port" REDIS_URL="${RELAY_REDIS_URL:-}" \
		REDIS_PREFIX="${CLUSTER_REDIS_PREFIX:-relay-cluster:}"
	sed "${redis_block[@]}" "$cfg.tmp" >"$cfg" && rm -f "$cfg.tmp"
	start "replica-$i" "$relay" serve -config "$cfg"
	servers+="        server 127.0.0.1:$port max_fails=1 fail_timeout=5s;"$'\n'
done
for pid in "${order[@]}"; do
	case ${names[$pid]} in replica-*)
		n=${names[$pid]#replica-}
		wait_ready "http://127.0.0.1:${replica_ports[$((n - 1))]}/readyz" "$pid"
		;;
	esac
done

# The balancer, with its own prefix, pid file and temp paths under $dir.
fill "$here/nginx.conf.in" "$dir/nginx.conf.tmp" DIR="$dir" LISTEN="127.0.0.1:$lb_port"
awk -v s="${servers%$'\n'}" '/^@SERVERS@$/ { print s; next } { print }' "$dir/nginx.conf.tmp" >"$dir/nginx.conf"
rm -f "$dir/nginx.conf.tmp"
"$nginx" -t -q -p "$dir/" -c "$dir/nginx.conf" -e "$dir/nginx-error.log" || die "nginx rejects $dir/nginx.conf"
start nginx "$nginx" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/nginx-error.log"
wait_ready "http://127.0.0.1:$lb_port/readyz" "$!"

url=http://127.0.0.1:$lb_port
cli=$relay
case $relay in "$root"/*) cli=${relay#"$root"/} ;; esac
redis_state="none: limits, the key cache and cooldowns are per replica"
[ -z "${RELAY_REDIS_URL:-}" ] || redis_state="shared ($(printf '%s' "$RELAY_REDIS_URL" | sed -E 's#//[^@/]*@#//***@#'))"
cat <<INFO
ModelRelay cluster: ${#replica_ports[@]} replicas of relay serve behind nginx
  balancer:  $url
  replicas:  $(printf 'http://127.0.0.1:%s ' "${replica_ports[@]}")(each serves /metrics, /readyz)
  provider:  relay sim on http://127.0.0.1:$sim_port${sim_args:+ ($sim_args)}
  database:  $(printf '%s' "$RELAY_DATABASE_URL" | sed -E 's#(//[^:@/]*):[^@/]*@#\1:***@#')
  redis:     $redis_state
  files:     $dir (configs, *.log, *.pid)
admin token: $RELAY_ADMIN_TOKEN
Create an account and a key through the balancer, then call it:
  export RELAY_ADMIN_TOKEN=$RELAY_ADMIN_TOKEN
  $cli accounts create -server $url -account demo
  $cli accounts credit -server $url -account demo -usd 10
  key=\$($cli keys create -server $url -account demo -route standard)
  curl -N $url/v1/chat/completions -H "Authorization: Bearer \$key" -H 'Content-Type: application/json' \\
    -d '{"model":"modelf-flash","stream":true,"messages":[{"role":"user","content":"hello"}]}'
cluster ready: $url (Ctrl-C stops everything)
INFO

# Stay in the foreground; report any process that ends (a replica killed by
# hand leaves the balancer serving from the others).
while :; do
	status=0
	wait -n -p ended || status=$?
	[ -n "${ended:-}" ] || break
	echo "cluster: ${names[$ended]} (pid $ended) exited with status $status" >&2
	[ "${names[$ended]}" != nginx ] || exit 1
	unset "names[$ended]"
	ended=
done
