from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import Actor
from core.models import Project
from core.services.projects import create_api_key


class Command(BaseCommand):
    help = "Create an API key for a project. The key is printed once, alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project_name")
        parser.add_argument("--name", default="cli", help="A label for the key.")

    def handle(self, *args: object, project_name: str, name: str, **options: object) -> None:
        project = Project.objects.filter(name=project_name).first()
        if project is None:
            raise CommandError(f"No project named {project_name!r}.")
        api_key, raw_key = create_api_key(project, name=name, actor=Actor.system("cli"))
        self.stdout.write(
            f"Created key {api_key.prefix} for project {project.name!r}; it is shown only once:"
        )
        self.stdout.write(raw_key)
