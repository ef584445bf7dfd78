"""What scripts/run does before it starts the servers, in one process, each step only when needed.

- Migrations: applied only when some are unapplied (what `migrate --check` reports).
- Static files: collected only when the files the finders see (path, size, modification time)
  or the storage backend changed since the last collection, recorded in STATIC_ROOT.
- Demo data: `seed_demo`, which leaves an existing demo project as it is (and prints the
  sign-ins).

One Django start-up instead of three `manage.py` commands: on a second run nothing else is left.
"""

import hashlib
import json
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.finders import get_finders
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

STAMP_NAME = ".switchboard-collected"


def unapplied_migrations(database: str = DEFAULT_DB_ALIAS) -> list[str]:
    """The migrations `migrate` would apply, as "app.name" (empty: nothing to do)."""
    executor = MigrationExecutor(connections[database])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]


def static_fingerprint() -> str:
    """A hash of every file collectstatic would copy (its path, size and modification time) and
    of the storage backend it would write with."""
    digest = hashlib.sha256()
    digest.update(json.dumps(settings.STORAGES.get("staticfiles", {}), sort_keys=True).encode())
    entries = []
    for finder in get_finders():
        for path, storage in finder.list(["CVS", ".*", "*~"]):
            stat = Path(storage.path(path)).stat()
            entries.append(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}")
    # Sorted: the same files give the same hash whatever order the finders list them in.
    for entry in sorted(entries):
        digest.update(entry.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def stamp_path() -> Path:
    return Path(settings.STATIC_ROOT) / STAMP_NAME


class Command(BaseCommand):
    help = "Migrate, collect static files and load the demo data, each only when needed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-demo", action="store_true", help="Skip seed_demo.")

    def handle(self, *args: object, no_demo: bool, **options: object) -> None:
        verbosity = int(str(options.get("verbosity", 1)))
        pending = unapplied_migrations()
        if pending:
            self.stdout.write(f"Applying {len(pending)} migration(s).")
            call_command("migrate", interactive=False, verbosity=verbosity)
        elif verbosity > 1:
            self.stdout.write("Migrations: nothing to apply.")

        fingerprint = static_fingerprint()
        stamp = stamp_path()
        if stamp.is_file() and stamp.read_text().strip() == fingerprint:
            if verbosity > 1:
                self.stdout.write("Static files: unchanged since the last collectstatic.")
        else:
            call_command("collectstatic", interactive=False, verbosity=0)
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.write_text(fingerprint + "\n")
            self.stdout.write("Static files collected.")

        if not no_demo:
            call_command("seed_demo", verbosity=verbosity, stdout=self.stdout)
