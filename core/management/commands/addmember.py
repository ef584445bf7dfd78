from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import Actor
from core.errors import DomainError
from core.models import Membership, Project, Role
from core.services.members import add_project_member, change_member_role, find_user


class Command(BaseCommand):
    help = (
        "Make an existing user (username or e-mail) a member of a project with a role; "
        "a member already there gets the role instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project_name")
        parser.add_argument("user", help="A username or an e-mail address.")
        parser.add_argument("role", choices=Role.values)

    def handle(
        self, *args: object, project_name: str, user: str, role: str, **options: object
    ) -> None:
        project = Project.objects.filter(name=project_name).first()
        if project is None:
            raise CommandError(f"No project named {project_name!r}.")
        actor = Actor.system("cli")
        try:
            person = find_user(user)
            existing = Membership.objects.filter(project=project, user=person).first()
            if existing is None:
                add_project_member(project, person, role=role, actor=actor)
                done = "Added"
            else:
                change_member_role(existing, role=role, actor=actor)
                done = "Set"
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"{done} {person.get_username()} as {role} of {project.name!r}.")
