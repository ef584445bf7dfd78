from datetime import timedelta

from django.core.management.base import BaseCommand, CommandParser

from sessions_app.services.artifacts import sweep_orphan_files


class Command(BaseCommand):
    help = (
        "Remove artifact files no stored version names (left by a server killed mid-upload), "
        "untouched for --hours (24 by default)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--hours", type=float, default=24.0)

    def handle(self, *args: object, hours: float, **options: object) -> None:
        removed = sweep_orphan_files(older_than=timedelta(hours=hours))
        for key in removed:
            self.stdout.write(f"removed {key}")
        self.stdout.write(f"{len(removed)} orphan file(s) removed.")
