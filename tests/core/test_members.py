"""Members and projects through their services and commands: adding by username or e-mail,
roles, the last admin, a project's creator, a superuser, and what the commands print."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from core.access import require_role
from core.actors import Actor
from core.errors import Conflict, InvalidInput, NotFound
from core.models import AuditEntry, Membership, Project, Role
from core.pages import user_projects
from core.services.members import (
    LastAdmin,
    add_project_member,
    change_member_role,
    find_user,
    remove_member,
)
from core.services.projects import create_project
from sessions_app.access import get_session_for_user
from tests.core import member_children
from tests.factories import make_member, make_project, make_session, make_user
from tests.multiproc import run_in_processes

ADMIN = Actor.system("tests")


def _members(project: Project) -> list[tuple[str, str]]:
    return sorted(Membership.objects.filter(project=project).values_list("user__username", "role"))


def test_it_finds_a_user_by_username_or_email(db):
    alice = make_user("alice")
    alice.email = "Alice@Example.com"
    alice.save()
    assert find_user("alice") == alice
    assert find_user("alice@example.COM") == alice
    with pytest.raises(NotFound, match="No user with the username or e-mail 'bob'"):
        find_user("bob")
    with pytest.raises(InvalidInput):
        find_user("   ")
    twin = make_user("alice2")
    twin.email = "alice@example.com"
    twin.save()
    with pytest.raises(InvalidInput, match="Several users"):
        find_user("alice@example.com")


def test_it_adds_a_member_once_and_records_it(db):
    project = make_project()
    admin = make_member(project, Role.ADMIN, "boss")
    bob = make_user("bob")
    add_project_member(project, bob, role=Role.OPERATOR, actor=Actor.for_user(admin))
    assert _members(project) == [("bob", "operator"), ("boss", "admin")]
    entry = AuditEntry.objects.get(project=project, action="member.add")
    assert entry.detail == {"user": "bob", "role": "operator"}
    assert entry.actor == "user:boss"

    with pytest.raises(Conflict, match="bob is already a member .* \\(operator\\)"):
        add_project_member(project, bob, role=Role.ADMIN, actor=ADMIN)
    with pytest.raises(InvalidInput, match="Unknown role 'owner'"):
        add_project_member(project, make_user("carol"), role="owner", actor=ADMIN)
    assert _members(project) == [("bob", "operator"), ("boss", "admin")]
    assert AuditEntry.objects.filter(project=project, action="member.add").count() == 1


def test_it_never_leaves_a_project_without_an_admin(db):
    project = make_project()
    make_member(project, Role.ADMIN, "solo")
    solo = Membership.objects.get(project=project, user__username="solo")
    with pytest.raises(LastAdmin, match="solo is the last admin"):
        change_member_role(solo, role=Role.VIEWER, actor=ADMIN)
    with pytest.raises(LastAdmin, match="cannot be removed"):
        remove_member(solo, actor=ADMIN)
    assert _members(project) == [("solo", "admin")]
    assert not AuditEntry.objects.filter(project=project).exists()

    # With a second admin, either may step down (but not both).
    make_member(project, Role.ADMIN, "second")
    change_member_role(solo, role=Role.VIEWER, actor=ADMIN)
    second = Membership.objects.get(project=project, user__username="second")
    with pytest.raises(LastAdmin):
        remove_member(second, actor=ADMIN)
    remove_member(solo, actor=ADMIN)
    assert _members(project) == [("second", "admin")]
    assert [e.action for e in AuditEntry.objects.filter(project=project).order_by("pk")] == [
        "member.role",
        "member.remove",
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("move", ["demote", "remove"])
def test_two_admins_stepping_down_at_once_leave_one_admin(move):
    """Two processes, one per admin, each demoting (or removing) the other at the same moment:
    the project lock lets exactly one through."""
    project = make_project()
    make_member(project, Role.ADMIN, "ann")
    make_member(project, Role.ADMIN, "ben")
    ids = list(
        Membership.objects.filter(project=project).order_by("pk").values_list("pk", flat=True)
    )
    target = {"demote": member_children.demote, "remove": member_children.remove}[move]
    results = run_in_processes(target, [(ids[0],), (ids[1],)])
    assert sorted(results) == ["last_admin", "ok"]
    assert Membership.objects.filter(project=project, role=Role.ADMIN).count() == 1


def test_a_projects_creator_becomes_its_admin(db):
    creator = make_user("founder")
    project = create_project("Founded", creator=creator)
    assert _members(project) == [("founder", "admin")]
    assert AuditEntry.objects.get(project=project).action == "project.create"
    with pytest.raises(Conflict, match="already exists"):
        create_project("Founded", creator=creator)
    assert Project.objects.filter(name="Founded").count() == 1


def test_a_superuser_sees_and_administers_every_project(db):
    project, other = make_project(), make_project()
    session = make_session(project)
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    assert {p.pk for p in user_projects(root)} == {project.pk, other.pk}
    membership = require_role(root, project.pk, Role.ADMIN)
    assert membership.pk is None and membership.role == Role.ADMIN  # not a member row
    assert not Membership.objects.filter(user=root).exists()
    assert get_session_for_user(root, session.pk)[0] == session
    plain = make_user("plain")
    with pytest.raises(NotFound):
        require_role(plain, project.pk)
    assert user_projects(plain) == []


def test_createapikey_prints_the_key_alone_on_its_last_line_with_its_scope(db):
    project = create_project("cli-project")
    out = io.StringIO()
    call_command("createapikey", "cli-project", "--scope", "admin", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("sb_") and " " not in lines[-1]
    key = project.api_keys.get()
    assert key.scope == "admin" and lines[-1].startswith(f"sb_{key.prefix}_")
    out = io.StringIO()
    call_command("createapikey", "cli-project", stdout=out)
    assert project.api_keys.filter(scope="agent").count() == 1
    with pytest.raises(CommandError):
        call_command("createapikey", "cli-project", "--scope", "root", stdout=io.StringIO())


def test_addmember_adds_sets_and_refuses_with_the_services_words(db):
    project = create_project("team")
    make_user("dana").__class__.objects.filter(username="dana").update(email="dana@example.com")
    out = io.StringIO()
    call_command("addmember", "team", "dana@example.com", "admin", stdout=out)
    assert "Added dana as admin of 'team'." in out.getvalue()
    make_user("eve")
    call_command("addmember", "team", "eve", "viewer", stdout=io.StringIO())
    out = io.StringIO()
    call_command("addmember", "team", "eve", "operator", stdout=out)
    assert "Set eve as operator" in out.getvalue()
    assert _members(project) == [("dana", "admin"), ("eve", "operator")]
    with pytest.raises(CommandError, match="last admin"):
        call_command("addmember", "team", "dana", "viewer", stdout=io.StringIO())
    with pytest.raises(CommandError, match="No user with the username or e-mail 'zed'"):
        call_command("addmember", "team", "zed", "viewer", stdout=io.StringIO())
    with pytest.raises(CommandError, match="No project named 'nope'"):
        call_command("addmember", "nope", "eve", "viewer", stdout=io.StringIO())
    assert _members(project) == [("dana", "admin"), ("eve", "operator")]


def test_createproject_with_an_admin(db):
    make_user("frank")
    out = io.StringIO()
    call_command("createproject", "franks", "--admin", "frank", stdout=out)
    assert "frank is its admin." in out.getvalue()
    assert _members(Project.objects.get(name="franks")) == [("frank", "admin")]
    with pytest.raises(CommandError, match="No user"):
        call_command("createproject", "ghosts", "--admin", "ghost", stdout=io.StringIO())
    assert not Project.objects.filter(name="ghosts").exists()
