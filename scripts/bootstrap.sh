# Sourced by scripts/run and scripts/test: find Python >= 3.12, then let uv create .venv and
# install exactly the versions in uv.lock (pyproject.toml declares the dependencies; `uv lock`
# writes uv.lock from it, and the lock is committed so every clone installs the same versions).
#   bootstrap run    the runtime dependencies only (scripts/run)
#   bootstrap test   those and the dev group: pytest, Playwright, ruff, mypy… (scripts/test)
# uv comes from PATH when it is recent enough, else from a small venv of its own under
# ~/.cache/switchboard/ (installed with pip from PyPI, once per machine). Re-running costs a
# fraction of a second: `uv sync` finds everything installed and changes nothing.

# uv's version for the bootstrap venv, and the oldest one on PATH that is used (uv.lock's format).
SWITCHBOARD_UV_VERSION=0.13.9
SWITCHBOARD_UV_MINIMUM=0.13.0

find_python() {
    local candidate
    for candidate in "${SWITCHBOARD_PYTHON:-}" python3.13 python3.12 python3 \
        "$(command -v pyenv >/dev/null 2>&1 && pyenv root)"/versions/3.1[2-9]*/bin/python; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || [ -x "$candidate" ] || continue
        # pyenv shims exist for versions that are not active and exit 127: really run it.
        # The real interpreter's path, not the shim's: uv is given the path.
        if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' \
            >/dev/null 2>&1; then
            "$candidate" -c 'import sys; print(sys.executable)'
            return 0
        fi
    done
    return 1
}

# Prints the uv to use, installing it first into a venv of its own if need be.
find_uv() {
    local uv version python
    uv=$(command -v uv 2>/dev/null) || uv=
    if [ -n "$uv" ]; then
        version=$("$uv" --version 2>/dev/null | cut -d' ' -f2)
        if [ -n "$version" ] && [ "$(printf '%s\n%s\n' "$SWITCHBOARD_UV_MINIMUM" "$version" \
            | sort -V | head -n1)" = "$SWITCHBOARD_UV_MINIMUM" ]; then
            echo "$uv"
            return 0
        fi
    fi
    local tools=${XDG_CACHE_HOME:-$HOME/.cache}/switchboard/uv-$SWITCHBOARD_UV_VERSION
    if [ ! -x "$tools/bin/uv" ]; then
        # A Python with pip: not .venv's (uv makes it without pip).
        python=$(find_python) || return 1
        echo "Installing uv $SWITCHBOARD_UV_VERSION into $tools (once per machine)" >&2
        rm -rf "$tools"
        if ! "$python" -m venv "$tools" \
            || ! "$tools/bin/python" -m pip install --quiet \
                --disable-pip-version-check "uv==$SWITCHBOARD_UV_VERSION" >&2; then
            rm -rf "$tools"
            return 1
        fi
    fi
    echo "$tools/bin/uv"
}

bootstrap() {
    local mode=${1:-run}
    cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
    # Only the Python found here (or the one .venv has): uv never downloads an interpreter.
    export UV_PYTHON_DOWNLOADS=never
    # A virtualenv activated in the shell is not this project's: uv would warn about it.
    unset VIRTUAL_ENV
    local python= uv args=(sync --frozen --inexact)
    if ! .venv/bin/python -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' \
        >/dev/null 2>&1; then
        python=$(find_python) || {
            echo "Switchboard needs Python 3.12 or newer (python3.12 / python3.13 on PATH)." >&2
            exit 1
        }
        if [ -e .venv ]; then
            echo "Removing a broken .venv" >&2
            rm -rf .venv
        fi
        args+=(--python "$python")
    fi
    uv=$(find_uv) || {
        echo "Could not install uv (pip install uv==$SWITCHBOARD_UV_VERSION from PyPI)." >&2
        exit 1
    }
    case $mode in
        run) args+=(--no-dev) ;;
        test) args+=(--group dev) ;;
        *) echo "bootstrap: run or test, not $mode" >&2; exit 1 ;;
    esac
    # --inexact: what is installed and not asked for stays (the test tools after scripts/test).
    # --compile-bytecode, as pip does: every later start reads .pyc files, even where
    # PYTHONDONTWRITEBYTECODE is set (a second or more per Django process). A few seconds the
    # first time, a fraction of a second when nothing changed.
    "$uv" "${args[@]}" --compile-bytecode --quiet || { echo "Could not install the dependencies (uv sync)." >&2; exit 1; }
    export PATH="$PWD/.venv/bin:$PATH"
    # For scripts/checks (uv.lock in step with pyproject.toml).
    export SWITCHBOARD_UV=$uv
}
