from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import DomainError
from core.services.members import find_user
from core.services.projects import create_project


class Command(BaseCommand):
    help = "Create a project (the tenant boundary), optionally with its first admin."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--admin", metavar="USER", help="A username or e-mail: the project's first admin."
        )

    def handle(self, *args: object, name: str, admin: str | None, **options: object) -> None:
        try:
            creator = find_user(admin) if admin else None
            project = create_project(name, creator=creator)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Created project {project.name!r} (id {project.pk}).")
        if creator is not None:
            self.stdout.write(f"{creator.get_username()} is its admin.")
