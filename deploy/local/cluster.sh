#!/usr/bin/env bash
# A two-node Ray cluster and a password-protected Redis server on this machine, loopback only,
# for trying Grove's cluster mode. `start` prints the exports; `stop` stops exactly what it started.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: deploy/local/cluster.sh COMMAND [OPTIONS]

A Redis server and a two-node Ray cluster (a head node and a worker node, each with its own
raylet, object store, resources and temp directory) on this machine (Linux), listening on
127.0.0.1 only, on free ports. The machine's own Redis (6379) and any other Ray instance are
left alone. Redis asks for a password and Ray for a token, both made for this run.

Commands:
  start         start Redis and the two Ray nodes; print the variables to export
  stop          stop exactly what `start` started (by the pids it recorded); remove its files
  stop-worker   remove only the worker node (to watch Grove carry on without it)
  status        say what is running
  env           print the variables to export again

Options:
  --state-dir DIR        pid files, logs, secrets and exports (default: $TMPDIR/grove-local-cluster-UID)
  --head-cpus N          CPUs the head node offers (default 1)
  --worker-cpus N        CPUs the worker node offers (default 1)
  --object-store-mb N    object store size of each node in MB (default 200, at least 80)
  --python PATH          the Python with Grove and Ray installed (default: python3 on PATH);
                         Grove's driver must use the same Python and Ray version
  --redis-server PATH    the redis-server executable (default: redis-server on PATH)
  --keep-logs            with stop: keep the Ray session logs
  -h, --help             this text

From the repository, with Grove installed in .venv:
  eval "$(deploy/local/cluster.sh start --python .venv/bin/python)"
  .venv/bin/grove batch examples/review/tasks.jsonl --simulate --model claude-sonnet-5-5
  deploy/local/cluster.sh stop

`start` writes only `export NAME=VALUE` lines to stdout (progress goes to stderr), so `eval`
works: RAY_ADDRESS, GROVE_STORE (with the Redis password), RAY_AUTH_MODE and
RAY_AUTH_TOKEN_PATH (Ray's token authentication), and RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
without which Ray would rewrite 127.0.0.1 in RAY_ADDRESS to the machine's public address.
The head node carries the custom resource `grove_local_head`, the worker `grove_local_worker`.
EOF
}

say() {
    echo "cluster.sh: $*" >&2
}

die() {
    say "$*"
    exit 1
}

LOOPBACK=127.0.0.1
READY_TIMEOUT_S=90
STOP_TIMEOUT_S=30
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

command_name=""
state_dir="${TMPDIR:-/tmp}/grove-local-cluster-$(id -u)"
head_cpus=1
worker_cpus=1
object_store_mb=200
python_bin=""
redis_bin=""
keep_logs=0

whole_number() {
    [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1 takes a positive whole number, not '$2'"
}

parse_arguments() {
    while (($# > 0)); do
        case "$1" in
            -h | --help)
                usage
                exit 0
                ;;
            start | stop | stop-worker | status | env)
                [[ -z "$command_name" ]] || die "one command at a time ('$command_name' and '$1')"
                command_name="$1"
                ;;
            --state-dir | --head-cpus | --worker-cpus | --object-store-mb | --python | --redis-server)
                (($# >= 2)) || die "$1 needs a value"
                case "$1" in
                    --state-dir) state_dir="$2" ;;
                    --head-cpus) whole_number "$1" "$2" && head_cpus="$2" ;;
                    --worker-cpus) whole_number "$1" "$2" && worker_cpus="$2" ;;
                    --object-store-mb) whole_number "$1" "$2" && object_store_mb="$2" ;;
                    --python) python_bin="$2" ;;
                    --redis-server) redis_bin="$2" ;;
                esac
                shift
                ;;
            --keep-logs) keep_logs=1 ;;
            *) die "unknown argument '$1' (see --help)" ;;
        esac
        shift
    done
    [[ -n "$command_name" ]] || die "no command given: start, stop, stop-worker, status or env (see --help)"
    ((object_store_mb >= 80)) || die "--object-store-mb must be at least 80 (Ray's minimum)"
    [[ "$state_dir" == /* ]] || state_dir="$PWD/$state_dir"
}

# ---- recorded processes --------------------------------------------------------------------

# Each process `start` launches leads a session of its own; its pid goes to NAME.pid and its
# kernel start time to NAME.started, so a pid that another program got later (after a crash or
# a reboot) is never signalled.

recorded_pid() {
    [[ -f "$state_dir/$1.pid" ]] || return 1
    cat "$state_dir/$1.pid"
}

start_time() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    awk '{ print $20 }' <<<"$stat"
}

is_ours() {
    local pid started
    pid="$(recorded_pid "$1")" || return 1
    started="$(cat "$state_dir/$1.started" 2>/dev/null)" || return 1
    [[ "$(start_time "$pid")" == "$started" ]]
}

group_alive() {
    kill -0 -- "-$1" 2>/dev/null
}

process_alive() {
    kill -0 "$1" 2>/dev/null
}

# Wait until `$1 $2` fails (the process or group is gone); false when it never did.
wait_gone() {
    local check="$1" id="$2" waited=0
    while "$check" "$id"; do
        ((waited < STOP_TIMEOUT_S * 10)) || return 1
        sleep 0.1
        waited=$((waited + 1))
    done
}

# Stop one recorded process, then whatever is left in the process group it leads (Ray's
# raylets, GCS and workers are in the launcher's group); nothing outside that group.
stop_recorded() {
    local name="$1" pid
    pid="$(recorded_pid "$name")" || return 0
    if is_ours "$name"; then
        say "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        wait_gone process_alive "$pid" || say "$name (pid $pid) is still stopping"
        if group_alive "$pid"; then
            kill -TERM -- "-$pid" 2>/dev/null || true
            if ! wait_gone group_alive "$pid"; then
                say "$name's processes did not stop on SIGTERM; sending SIGKILL"
                kill -KILL -- "-$pid" 2>/dev/null || true
            fi
        fi
    else
        say "$name (pid $pid) was not running"
    fi
    rm -f "$state_dir/$name.pid" "$state_dir/$name.started"
}

# Start a command in a session of its own (it leads its own process group, and no signal
# from this terminal reaches it), its output in NAME.log; record its pid and start time.
launch() {
    local name="$1" pid
    shift
    setsid "$@" </dev/null >"$state_dir/$name.log" 2>&1 &
    pid="$!"
    echo "$pid" >"$state_dir/$name.pid"
    start_time "$pid" >"$state_dir/$name.started"
}

# ---- readiness -----------------------------------------------------------------------------

redis_answers() {
    local port="$1" password="$2" reply="" line=""
    { exec 3<>"/dev/tcp/$LOOPBACK/$port"; } 2>/dev/null || return 1
    printf 'AUTH %s\r\nPING\r\n' "$password" >&3
    IFS= read -r -t 2 line <&3 || true
    IFS= read -r -t 2 reply <&3 || true
    exec 3>&-
    [[ "$line" == "+OK"* && "$reply" == "+PONG"* ]]
}

log_says() {
    grep -q -- "$2" "$state_dir/$1.log" 2>/dev/null
}

# Wait until the command after NAME succeeds, as long as NAME's process lives.
wait_for() {
    local what="$1" name="$2" waited=0
    shift 2
    until "$@"; do
        if ! is_ours "$name"; then
            say "$what exited while starting; the end of $state_dir/$name.log:"
            tail -n 25 "$state_dir/$name.log" >&2 || true
            return 1
        fi
        if ((waited >= READY_TIMEOUT_S * 10)); then
            say "$what was not ready after ${READY_TIMEOUT_S}s; see $state_dir/$name.log"
            return 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
}

# ---- start ---------------------------------------------------------------------------------

resolve_executables() {
    python_bin="${python_bin:-$(command -v python3 || true)}"
    redis_bin="${redis_bin:-$(command -v redis-server || true)}"
    [[ -n "$python_bin" && -x "$python_bin" ]] || die "no python3 found (pass --python PATH)"
    [[ -n "$redis_bin" && -x "$redis_bin" ]] ||
        die "no redis-server found (e.g. apt-get install redis-server, or pass --redis-server PATH)"
    command -v setsid >/dev/null 2>&1 || die "setsid (util-linux) is needed to start the servers"
    "$python_bin" -c 'import ray, grove.supervisor' 2>/dev/null ||
        die "$python_bin cannot import ray and Grove; install Grove (pip install -e .) or pass --python"
}

free_loopback_port() {
    "$python_bin" -c 'import socket
with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1])'
}

random_hex() {
    od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'
}

started=0

# On any exit of `start` before the exports are written, stop what it had started.
undo_unfinished_start() {
    local status=$?
    if ((!started)); then
        trap - EXIT INT TERM
        say "start did not finish; stopping what it started"
        stop_all
        ((status != 0)) || status=1
    fi
    exit "$status"
}

start_cluster() {
    if is_ours redis || is_ours ray-nodes; then
        die "the cluster of $state_dir is running already (stop it: $0 stop --state-dir $state_dir)"
    fi
    resolve_executables
    mkdir -p "$state_dir"
    chmod 700 "$state_dir"
    rm -f "$state_dir"/*.pid "$state_dir"/*.started "$state_dir/env"
    trap undo_unfinished_start EXIT
    trap 'exit 130' INT TERM

    local redis_port password
    redis_port="$(free_loopback_port)"
    password="$(random_hex 24)"
    (
        umask 077
        cat >"$state_dir/redis.conf" <<EOF
bind $LOOPBACK
port $redis_port
protected-mode yes
requirepass $password
save ""
appendonly no
dir $state_dir
EOF
    )
    say "starting Redis on $LOOPBACK:$redis_port"
    launch redis "$redis_bin" "$state_dir/redis.conf"
    wait_for "Redis" redis redis_answers "$redis_port" "$password"

    # Ray's unix sockets must fit in 107 bytes, so its temp directory stays short.
    local ray_tmp token_file="$state_dir/ray-auth-token"
    ray_tmp="$(mktemp -d "${TMPDIR:-/tmp}/grove-ray.XXXXXX")"
    echo "$ray_tmp" >"$state_dir/ray-tmp"
    (
        umask 077
        random_hex 32 >"$token_file"
    )
    say "starting the Ray head and worker nodes"
    launch ray-nodes env RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token \
        RAY_AUTH_TOKEN_PATH="$token_file" \
        "$python_bin" "$script_dir/ray_nodes.py" --temp-dir "$ray_tmp" \
        --head-cpus "$head_cpus" --worker-cpus "$worker_cpus" \
        --object-store-bytes "$((object_store_mb * 1024 * 1024))"
    wait_for "The Ray nodes" ray-nodes log_says ray-nodes '^ready '

    local ray_address
    ray_address="$(sed -n 's/^ready //p' "$state_dir/ray-nodes.log" | head -n 1)"
    (
        umask 077
        cat >"$state_dir/env" <<EOF
export RAY_ADDRESS=$ray_address
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN_PATH=$token_file
export GROVE_STORE=redis://:$password@$LOOPBACK:$redis_port/0
EOF
    )
    started=1
    trap - EXIT INT TERM
    say "running: Redis (pid $(recorded_pid redis)) and two Ray nodes at $ray_address" \
        "(pid $(recorded_pid ray-nodes)); stop with: $0 stop --state-dir $state_dir"
    cat "$state_dir/env"
}

# ---- the other commands --------------------------------------------------------------------

stop_all() {
    stop_recorded ray-nodes
    stop_recorded redis
    if [[ -f "$state_dir/ray-tmp" ]]; then
        local ray_tmp
        ray_tmp="$(cat "$state_dir/ray-tmp")"
        if ((keep_logs)); then
            say "Ray session logs kept in $ray_tmp"
        else
            rm -rf -- "$ray_tmp"
        fi
        rm -f "$state_dir/ray-tmp"
    fi
    rm -f "$state_dir/env" "$state_dir/redis.conf" "$state_dir/ray-auth-token"
}

stop_cluster() {
    if [[ ! -d "$state_dir" ]]; then
        say "nothing to stop: $state_dir does not exist"
        return 0
    fi
    stop_all
    say "stopped; the logs of this run stay in $state_dir"
}

stop_worker() {
    is_ours ray-nodes || die "no Ray nodes of $state_dir are running"
    if log_says ray-nodes '^worker removed'; then
        say "the worker node was removed already"
        return 0
    fi
    say "removing the Ray worker node"
    kill -USR1 "$(recorded_pid ray-nodes)"
    wait_for "The Ray nodes" ray-nodes log_says ray-nodes '^worker removed'
    say "the worker node is gone; the head node and Redis keep running"
}

show_status() {
    local name
    for name in redis ray-nodes; do
        if is_ours "$name"; then
            echo "$name: running (pid $(recorded_pid "$name"))"
        else
            echo "$name: not running"
        fi
    done
    if is_ours ray-nodes; then
        if log_says ray-nodes '^worker removed'; then
            echo "ray worker node: removed"
        else
            echo "ray worker node: running"
        fi
    fi
}

print_exports() {
    [[ -f "$state_dir/env" ]] || die "nothing started from $state_dir (run: $0 start)"
    cat "$state_dir/env"
}

parse_arguments "$@"
case "$command_name" in
    start) start_cluster ;;
    stop) stop_cluster ;;
    stop-worker) stop_worker ;;
    status) show_status ;;
    env) print_exports ;;
esac
