from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.models import Project
from core.services.projects import create_project


class Command(BaseCommand):
    help = "Create a project (the tenant boundary)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: object, name: str, **options: object) -> None:
        if Project.objects.filter(name=name).exists():
            raise CommandError(f"A project named {name!r} already exists.")
        project = create_project(name)
        self.stdout.write(f"Created project {project.name!r} (id {project.pk}).")
