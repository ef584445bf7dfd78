"""What every bench shares beyond bench/ingest.py's measuring helpers: where PostgreSQL is, the
scratch database (named apart per test run, recreated and migrated) and the smoke mode.

Smoke mode (`--smoke`, every script in bench/): tiny sizes, one round, the figures printed,
nothing asserted; tests/test_benches.py runs each one in CI so that a change that breaks a
bench fails the build rather than the next measurement.

Files in bench/ whose name starts with `_` are helpers, not benches (the test skips them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent

SMOKE_HELP = (
    "smoke run: tiny sizes, one round, figures printed, nothing asserted "
    "(what CI runs: tests/test_benches.py)"
)

# The PostgreSQL server: DATABASE_URL's (its database name aside: a bench only ever writes to
# its own scratch database), else this machine's 127.0.0.1:5432 as user postgres.
_url = urlsplit(os.environ.get("DATABASE_URL", ""))
PG_HOST = _url.hostname or "127.0.0.1"
PG_PORT = _url.port or 5432
PG_USER = unquote(_url.username or "postgres")
PG_PASSWORD = unquote(_url.password) if _url.password else None

# Set by tests/test_benches.py: a database migrated once, copied by every smoke run instead of
# migrating its own (a migrate costs ~8 s of the machine; CREATE DATABASE … TEMPLATE well
# under one).
TEMPLATE_ENV = "BENCH_TEMPLATE_DB"
# Set by tests/test_benches.py once it has run collectstatic: the benches running side by side
# then leave staticfiles/ alone (its manifest is deleted and rewritten by every run).
STATIC_COLLECTED_ENV = "BENCH_STATIC_COLLECTED"


def add_smoke_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)


def smoke(args: argparse.Namespace, **sizes: Any) -> None:
    """In a smoke run, replace the given arguments by their tiny values."""
    if args.smoke:
        for name, value in sizes.items():
            setattr(args, name, value)


def scratch_name(default: str) -> str:
    """The bench's scratch database, suffixed by the test run's name when there is one, so
    that test suites running side by side (SWITCHBOARD_TEST_DB) never drop each other's."""
    run = os.environ.get("SWITCHBOARD_TEST_DB") or os.environ.get("SWITCHBOARD_TEST_DB_NAME")
    return f"{default}_{run}"[:63] if run else default


def pg_url(db: str) -> str:
    auth = PG_USER + (f":{PG_PASSWORD}" if PG_PASSWORD else "")
    return f"postgres://{auth}@{PG_HOST}:{PG_PORT}/{db}"


def pg_connect(db: str, autocommit: bool = False) -> Any:
    import psycopg

    return psycopg.connect(
        host=PG_HOST,
        port=PG_PORT,
        user=PG_USER,
        password=PG_PASSWORD,
        dbname=db,
        autocommit=autocommit,
    )


def recreate_database(db: str, *, template: str | None = None) -> None:
    with pg_connect("postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db}"' + (f' TEMPLATE "{template}"' if template else ""))


def migrate(db: str, env: dict[str, str] | None = None, *, root: Path = ROOT) -> None:
    """`manage.py migrate` of the checkout at `root` on `db` (other settings from `env`)."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks", "-v", "0"],
        cwd=root,
        env={**(env if env is not None else os.environ), "DATABASE_URL": pg_url(db)},
        check=True,
    )


def collect_static(env: dict[str, str] | None = None, *, root: Path = ROOT) -> None:
    """`manage.py collectstatic` (a server with DEBUG=false serves from its manifest), unless
    the smoke test has already run it."""
    if os.environ.get(STATIC_COLLECTED_ENV):
        return
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=root,
        env=env if env is not None else dict(os.environ),
        check=True,
    )


def scratch_database(db: str, env: dict[str, str] | None = None, *, root: Path = ROOT) -> None:
    """Drop `db`, create it and migrate it (a copy of the smoke test's migrated template when
    there is one)."""
    template = os.environ.get(TEMPLATE_ENV)
    recreate_database(db, template=template)
    if not template:
        migrate(db, env, root=root)


def django_on_scratch_database(db: str) -> None:
    """For a bench that works in its own process: `db` dropped, created and migrated, and
    Django set up on it with production settings, no Redis, warnings only."""
    os.environ.update(
        {
            "DATABASE_URL": pg_url(db),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "false",
            "SECRET_KEY": "bench-only-secret-key-not-for-production-0123456789",
            "LOG_LEVEL": "WARNING",
        }
    )
    os.environ.pop("REDIS_URL", None)
    print("  · migrate", file=sys.stderr, flush=True)
    scratch_database(db)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
