# Sourced by scripts/run and scripts/test: find Python >= 3.12, create .venv, install.
# Re-running reuses the environment; it reinstalls only when pyproject.toml changed.

find_python() {
    local candidate
    for candidate in "${SWITCHBOARD_PYTHON:-}" python3.13 python3.12 python3 \
        "$(command -v pyenv >/dev/null 2>&1 && pyenv root)"/versions/3.1[2-9]*/bin/python; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || [ -x "$candidate" ] || continue
        # pyenv shims exist for versions that are not active and exit 127: really run it.
        if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' \
            >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

bootstrap() {
    cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
    if [ -x .venv/bin/python ] && ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
        echo "Removing a broken .venv (no pip in it)" >&2
        rm -rf .venv
    fi
    if [ ! -x .venv/bin/python ]; then
        local python
        python=$(find_python) || {
            echo "Switchboard needs Python 3.12 or newer (python3.12 / python3.13 on PATH)." >&2
            exit 1
        }
        echo "Creating .venv with $python" >&2
        "$python" -m venv .venv || { rm -rf .venv; echo "Could not create .venv." >&2; exit 1; }
    fi
    local stamp=.venv/.switchboard-installed
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "Installing dependencies into .venv" >&2
        .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e . --group dev
        touch "$stamp"
    fi
    export PATH="$PWD/.venv/bin:$PATH"
}
