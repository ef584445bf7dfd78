from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import Actor
from core.models import Project
from tasks_app.errors import DomainError
from tasks_app.models import WorkflowDefinition
from tasks_app.services.workflows import ensure_builtin_workflows, register_workflow
from tasks_app.workflows import load_workflow_file


class Command(BaseCommand):
    help = (
        "Register workflow definitions from YAML/JSON files (for one project, or as built-ins "
        "for all). With no files, registers the built-in workflows defined in code."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="*", help="definition files (.yaml, .yml, .json)")
        parser.add_argument(
            "--project", help="register for this project only (default: built-in, all projects)"
        )

    def handle(
        self, *args: object, files: list[str], project: str | None, **options: object
    ) -> None:
        target = None
        if project is not None:
            target = Project.objects.filter(name=project).first()
            if target is None:
                raise CommandError(f"No project named {project!r}.")
        if not files:
            ensure_builtin_workflows()
            self.stdout.write("Built-in workflows are registered.")
            return
        actor = Actor.system("cli")
        for name in files:
            path = Path(name)
            try:
                spec = load_workflow_file(path)
                definition, created = register_workflow(
                    spec, project=target, actor=actor, source=WorkflowDefinition.Source.FILE
                )
            except FileNotFoundError:
                raise CommandError(f"{path}: no such file.") from None
            except DomainError as exc:
                raise CommandError(f"{path}: {exc.message} {exc.detail}") from None
            verb = "Registered" if created else "Already registered (unchanged):"
            self.stdout.write(f"{verb} {definition.name} version {definition.version}")
