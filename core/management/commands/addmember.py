from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.actors import Actor
from core.errors import DomainError, NotFound
from core.models import Membership, Project, Role
from core.services.invitations import invite_member, is_pending
from core.services.members import add_project_member, change_member_role, find_user


class Command(BaseCommand):
    help = (
        "Make an existing user (username or e-mail) a member of a project with a role; "
        "a member already there gets the role instead. With --invite, an e-mail address "
        "without an account is sent an invitation (a link to choose a password), as the "
        "project's Members page does."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project_name")
        parser.add_argument("user", help="A username or an e-mail address.")
        parser.add_argument("role", choices=Role.values)
        parser.add_argument(
            "--invite",
            action="store_true",
            help="Invite the e-mail address by e-mail when nobody has an account with it.",
        )
        parser.add_argument(
            "--base-url",
            default=settings.SWITCHBOARD_PUBLIC_URL,
            help="Where the invitee reaches this Switchboard: the link in the e-mail starts "
            "with it (default: SWITCHBOARD_PUBLIC_URL, %(default)s).",
        )

    def handle(
        self,
        *args: object,
        project_name: str,
        user: str,
        role: str,
        invite: bool,
        base_url: str,
        **options: object,
    ) -> None:
        project = Project.objects.filter(name=project_name).first()
        if project is None:
            raise CommandError(f"No project named {project_name!r}.")
        actor = Actor.system("cli")
        try:
            try:
                person = find_user(user)
            except NotFound as missing:
                if "@" not in user:
                    raise CommandError(
                        f"{missing.message} To add someone without an account, give their "
                        "e-mail address with --invite: they are sent a link to choose a password."
                    ) from None
                person = None
            if person is None or is_pending(person):
                email = person.email if person is not None else user
                if not invite:
                    raise CommandError(
                        f"Nobody has an account with {email!r} yet. Invite them: run this again "
                        "with --invite, or enter the address on the project's Members page "
                        "(Settings → Members). They are e-mailed a link to choose a password."
                    )
                invite_member(project, email, role=role, actor=actor, base_url=base_url)
                self.stdout.write(
                    f"Invited {email} as {role} of {project.name!r}: they were e-mailed a "
                    "link to choose a password."
                )
                return
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
