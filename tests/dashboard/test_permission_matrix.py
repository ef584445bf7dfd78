"""Every dashboard URL × every persona: the answer, and that a refused request changed nothing.

The URLs are read from the resolver (the "dashboard" and "tasks" namespaces), not listed by
hand: a new URL without a row in MATRIX fails here until someone decides who may use it.

Personas (tests/dashboard/conftest.py): anonymous, viewer, operator, admin of the project, and
an outsider who is an admin of another project only. The rules:
  anonymous → redirect to sign in · outsider → 404 (as if nothing existed) ·
  viewer → allowed to read, 403 on operator actions · operator and admin → allowed.
"""

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from core.actors import Actor
from core.models import AuditEntry, Membership
from sessions_app.models import Event, Session, Snapshot
from sessions_app.services.lifecycle import pause_session
from tasks_app.models import Step, Task, TaskHistory
from tests.factories import make_task

NAMESPACES = ("dashboard", "tasks")
PERSONAS = ("anonymous", "viewer", "operator", "admin", "outsider")
HTMX = {"HX-Request": "true"}


def dashboard_urls() -> dict[str, list[str]]:
    """Every named URL of the dashboard's namespaces → the names of its keyword arguments."""
    found: dict[str, list[str]] = {}

    def walk(namespace: str, patterns: list[Any]) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(namespace, pattern.url_patterns)
                continue
            assert isinstance(pattern, URLPattern)
            assert pattern.name, f"an unnamed URL in {namespace}: {pattern.pattern}"
            found[f"{namespace}:{pattern.name}"] = sorted(pattern.pattern.converters)

    resolver = get_resolver()
    for namespace in NAMESPACES:
        _, sub = resolver.namespace_dict[namespace]
        walk(namespace, sub.url_patterns)
    return found


URLS = dashboard_urls()


# --- The world each case starts from --------------------------------------------------------


@dataclass
class World:
    team: Any
    session: Session
    task: Task

    def kwargs(self, name: str) -> dict[str, Any]:
        values = {
            "project_id": self.team.project.pk,
            "session_id": self.session.pk,
            "task_id": self.task.pk,
        }
        missing = [k for k in URLS[name] if k not in values]
        assert not missing, f"{name}: teach World.kwargs how to fill {missing}"
        return {k: values[k] for k in URLS[name]}


def snapshot() -> dict[str, Any]:
    """Everything a dashboard request could change."""
    return {
        "sessions": sorted(
            Session.objects.values_list(
                "pk", "status", "head_seq", "title", "parent_id", "fork_seq", "updated_at"
            )
        ),
        "events": Event.objects.count(),
        "snapshots": Snapshot.objects.count(),
        "audit": list(AuditEntry.objects.order_by("pk").values_list("action", "target_id")),
        "memberships": sorted(Membership.objects.values_list("user_id", "project_id", "role")),
        "tasks": sorted(Task.objects.values_list("pk", "state", "version", "updated_at")),
        "steps": sorted(Step.objects.values_list("pk", "status", "attempts")),
        "task_history": TaskHistory.objects.count(),
    }


def drain(response) -> bytes:
    """A streamed body, read to the end (the export streams from an async iterator)."""
    if not response.streaming:
        return response.content

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)() if response.is_async else b"".join(response.streaming_content)


# --- What "allowed" looks like, per URL --------------------------------------------------------


def page(response, world: World, before: dict[str, Any]) -> None:
    """A read: 200, and nothing changed."""
    assert response.status_code == 200, response.status_code
    assert snapshot() == before


def redirect_to(url_of: Callable[[World], str]) -> Callable[..., None]:
    def check(response, world: World, before: dict[str, Any]) -> None:
        assert response.status_code == 302, response.status_code
        assert response["Location"] == url_of(world)
        assert snapshot() == before

    return check


def overview_of(project_attr: str) -> Callable[[World], str]:
    return lambda w: reverse("dashboard:overview", args=[getattr(w.team, project_attr).pk])


def exported(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"] == "application/x-ndjson"
    assert drain(response).count(b"\n") == world.session.head_seq
    after = snapshot()
    assert after["audit"] == [*before["audit"], ("session.export", str(world.session.pk))]
    assert {**after, "audit": None} == {**before, "audit": None}  # only the audit entry


def moved_to(status: str) -> Callable[..., None]:
    def check(response, world: World, before: dict[str, Any]) -> None:
        assert response.status_code == 302, response.status_code
        assert response["Location"] == reverse("dashboard:session_detail", args=[world.session.pk])
        session = Session.objects.get(pk=world.session.pk)
        assert session.status == status
        assert session.head_seq == world.session.head_seq + 1  # the lifecycle event

    return check


def forked(response, world: World, before: dict[str, Any]) -> None:
    assert response.status_code == 302, response.status_code
    fork = Session.objects.get(parent=world.session)
    assert fork.fork_seq == 3
    assert response["Location"] == reverse("dashboard:session_detail", args=[fork.pk])
    assert ("session.fork", str(fork.pk)) in snapshot()["audit"]


@dataclass(frozen=True)
class Row:
    method: str  # "get" or "post"
    needs: str  # the least role that may use it: "viewer" (a read) or "operator" (an action)
    allowed: Callable[..., None]
    data: dict[str, Any] | Callable[[World], dict[str, Any]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    prepare: Callable[[World], None] | None = None
    # Only for URLs outside a project (home): what an outsider gets instead of a 404.
    outsider: Callable[..., None] | None = None


def paused(world: World) -> None:
    pause_session(world.session, actor=Actor.system("tests"), reason="so it can be resumed")
    world.session.refresh_from_db()


MATRIX: dict[str, Row] = {
    # Where a signed-in user lands: the (remembered or first) project they are a member of.
    "dashboard:home": Row(
        "get",
        "viewer",
        redirect_to(overview_of("project")),
        outsider=redirect_to(overview_of("other_project")),
    ),
    "dashboard:switch_project": Row(
        "get",
        "viewer",
        redirect_to(overview_of("project")),
        data=lambda w: {"project": w.team.project.pk},
    ),
    "dashboard:overview": Row("get", "viewer", page),
    "dashboard:session_list": Row("get", "viewer", page),
    "dashboard:session_detail": Row("get", "viewer", page),
    # Fragments the session page fetches with htmx (without htmx they redirect to the page).
    "dashboard:session_events": Row("get", "viewer", page, data={"before_seq": 4}, headers=HTMX),
    "dashboard:session_inspector": Row("get", "viewer", page, data={"at_seq": 2}, headers=HTMX),
    "dashboard:session_export": Row("get", "viewer", exported),
    "dashboard:session_pause": Row(
        "post", "operator", moved_to("paused"), data={"reason": "matrix"}
    ),
    "dashboard:session_resume": Row("post", "operator", moved_to("resumed"), prepare=paused),
    "dashboard:session_close": Row("post", "operator", moved_to("closed")),
    "dashboard:session_fork": Row("post", "operator", forked, data={"at_seq": 3}),
    "tasks:list": Row("get", "viewer", page),
    "tasks:detail": Row("get", "viewer", page),
}

RANK = {"viewer": 0, "operator": 1, "admin": 2}


def client_for(world: World, persona: str) -> Client:
    return Client() if persona == "anonymous" else world.team.client(persona)


def test_every_dashboard_url_has_a_row_and_every_row_a_url():
    assert "dashboard:session_detail" in URLS and "tasks:detail" in URLS  # the walk works
    assert sorted(set(URLS) - set(MATRIX)) == [], "URLs without a row in MATRIX"
    assert sorted(set(MATRIX) - set(URLS)) == [], "rows in MATRIX for URLs that are gone"


def cases() -> list[Any]:
    """Every URL × persona; the export reads through a connection of its own, so its cases
    commit their rows (transactional) for it to see them."""
    return [
        pytest.param(name, persona, marks=pytest.mark.django_db(transaction=True))
        if name == "dashboard:session_export"
        else (name, persona)
        for name, persona in itertools.product(sorted(URLS), PERSONAS)
    ]


@pytest.mark.parametrize(("name", "persona"), cases())
def test_the_matrix(team, session, name, persona):
    assert name in MATRIX, f"{name} has no row in MATRIX: decide who may use it"
    row = MATRIX[name]
    world = World(team=team, session=session, task=make_task(team.project))
    if row.prepare:
        row.prepare(world)
    url = reverse(name, kwargs=world.kwargs(name))
    data = row.data(world) if callable(row.data) else row.data
    before = snapshot()
    client = client_for(world, persona)

    response = getattr(client, row.method)(url, data, headers=row.headers)

    if persona == "anonymous":
        assert response.status_code == 302, response.status_code
        full_path = url + (
            f"?{response.request['QUERY_STRING']}"
            if row.method == "get" and response.request["QUERY_STRING"]
            else ""
        )
        assert response["Location"] == f"{reverse(settings.LOGIN_URL)}?next={quote(full_path)}"
        assert snapshot() == before
    elif persona == "outsider" and row.outsider is not None:
        row.outsider(response, world, before)
    elif persona == "outsider":
        assert response.status_code == 404, response.status_code
        assert b"Not found" in drain(response)
        assert snapshot() == before
    elif RANK[persona] < RANK[row.needs]:
        assert response.status_code == 403, response.status_code
        assert b"Not allowed" in drain(response)
        assert snapshot() == before
    else:
        row.allowed(response, world, before)
