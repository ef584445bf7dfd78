from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import Actor
from core.errors import DomainError
from core.models import KeyScope, Project
from core.services.projects import create_api_key


class Command(BaseCommand):
    help = "Create an API key for a project. The key is printed once, alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project_name")
        parser.add_argument("--name", default="cli", help="A label for the key.")
        parser.add_argument(
            "--scope",
            default=KeyScope.AGENT,
            choices=KeyScope.values,
            help="agent (default: sessions, tasks, handoffs) or admin (also project settings, "
            "retention policy, holds, webhook endpoints).",
        )

    def handle(
        self, *args: object, project_name: str, name: str, scope: str, **options: object
    ) -> None:
        project = Project.objects.filter(name=project_name).first()
        if project is None:
            raise CommandError(f"No project named {project_name!r}.")
        try:
            api_key, raw_key = create_api_key(
                project, name=name, scope=scope, actor=Actor.system("cli")
            )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"Created {api_key.scope}-scoped key {api_key.prefix} for project "
            f"{project.name!r}; it is shown only once:"
        )
        self.stdout.write(raw_key)
