#!/usr/bin/env bash
# Times the README's first command (bash scripts/run) as a new user meets it: clone the
# repository into a temporary folder, run it with no DATABASE_URL / REDIS_URL, and measure until
# the dashboard's sign-in page answers 200; then Ctrl-C it and time the stop; then the same for
# a second run in the same clone. Prints the figures; asserts nothing.
#
#   bash bench/first_run.sh [REF] [PORT]      # REF: a commit of this repository (default HEAD)
#
# The package cache is whatever this machine has (warm after any earlier install).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:-HEAD}
port=${2:-8390}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git clone -q "$repo" "$dir/switchboard"
cd "$dir/switchboard"
git checkout -q "$(git -C "$repo" rev-parse "$ref")"
unset DATABASE_URL REDIS_URL

now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

run_once() {
    local label=$1 start pid code=000 stop_start
    start=$(now)
    PORT=$port SIMULATE_AGENTS=0 setsid bash scripts/run >"run-$label.log" 2>&1 &
    pid=$!
    for _ in $(seq 1200); do
        code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/accounts/login/" || true)
        [ "$code" = 200 ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    echo "$label run: sign-in page answered $code after $(elapsed "$start" "$(now)") s"
    stop_start=$(now)
    kill -INT -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "$label run: Ctrl-C to exit $(elapsed "$stop_start" "$(now)") s"
}

echo "commit $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
run_once first
run_once second
