#!/usr/bin/env bash
# Times the README's first command (bash scripts/run) as a new user meets it: clone the
# repository into a temporary folder, run it with no DATABASE_URL / REDIS_URL, and measure until
# the dashboard's sign-in page answers 200; then Ctrl-C it and time the stop; then the same for
# a second run in the same clone. Prints the figures; asserts nothing (issue 14's targets: cold
# package cache <= 180 s, fresh clone with a warm cache <= 45 s, second run <= 15 s).
#
#   bash bench/first_run.sh [--cold] [REF] [PORT]
#   bash bench/first_run.sh --smoke    # the first run only (what CI runs: tests/test_benches.py)
#
# REF: a commit of this repository (default HEAD). PORT: default a free one the kernel picks
# (never 8000). --cold points every package cache (uv's, pip's, XDG_CACHE_HOME, where the
# bootstrap keeps its uv) at an empty temporary folder, as on a machine that never installed
# these packages; without it the caches are this machine's (warm after any earlier install).
# With DATABASE_URL unset the run starts the embedded PostgreSQL in the clone's .pgdata/ (a Unix
# socket in the clone, no TCP port); it is stopped when the run is, and again on the way out.
set -euo pipefail
cold=0
smoke=0
if [ "${1:-}" = --cold ]; then
    cold=1
    shift
fi
if [ "${1:-}" = --smoke ]; then
    smoke=1
    shift
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:-HEAD}
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=${2:-$(free_port)}
if [ "$port" = 8000 ]; then
    echo "bench/first_run.sh: not on port 8000 (the developers' server)." >&2
    exit 2
fi
dir=$(mktemp -d)
run_pid=
cleanup() {
    # A run still going (the script interrupted): stop its whole process group.
    if [ -n "$run_pid" ] && kill -0 "$run_pid" 2>/dev/null; then
        kill -INT -- "-$run_pid" 2>/dev/null || true
        sleep 5
        kill -KILL -- "-$run_pid" 2>/dev/null || true
    fi
    # The clone's own embedded PostgreSQL only (its .pgdata), if a run left it running.
    if [ -f "$dir/switchboard/.pgdata/postmaster.pid" ] && [ -x "$dir/switchboard/.venv/bin/python" ]; then
        (cd "$dir/switchboard" && .venv/bin/python config/embedded_postgres.py stop) || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
git clone -q "$repo" "$dir/switchboard"
cd "$dir/switchboard"
git checkout -q "$(git -C "$repo" rev-parse "$ref")"
unset DATABASE_URL REDIS_URL VIRTUAL_ENV
if [ "$cold" = 1 ]; then
    mkdir -p "$dir/cache"
    export XDG_CACHE_HOME=$dir/cache UV_CACHE_DIR=$dir/cache/uv PIP_CACHE_DIR=$dir/cache/pip
fi

now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

run_once() {
    local label=$1 start code=000 stop_start
    start=$(now)
    PORT=$port SIMULATE_AGENTS=0 setsid bash scripts/run >"$dir/run-$label.log" 2>&1 &
    run_pid=$!
    for _ in $(seq 1200); do
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/accounts/login/" || true)
        [ "$code" = 200 ] && break
        kill -0 "$run_pid" 2>/dev/null || break
        sleep 0.25
    done
    echo "$label run: sign-in page answered $code after $(elapsed "$start" "$(now)") s"
    if [ "$code" != 200 ]; then
        tail -n 20 "$dir/run-$label.log" >&2
        failed=1
    fi
    stop_start=$(now)
    kill -INT -- "-$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
    run_pid=
    echo "$label run: Ctrl-C to exit $(elapsed "$stop_start" "$(now)") s"
    if [ -n "${BENCH_KEEP_LOGS:-}" ]; then
        mkdir -p "$BENCH_KEEP_LOGS"
        cp "$dir/run-$label.log" "$BENCH_KEEP_LOGS/"
    fi
}

echo "commit $(git rev-parse --short HEAD), port $port, $([ "$cold" = 1 ] && echo cold || echo warm) package cache, load $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
run_once first
# A smoke run stops here (the first run goes through every step of the script), and fails when
# the page never answered: nothing else would catch that.
if [ "$smoke" = 1 ]; then
    exit "$failed"
fi
run_once second
