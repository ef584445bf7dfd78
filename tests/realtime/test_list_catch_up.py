"""A sessions or tasks list page whose socket joins after changes were committed (between the
page's render and the join no notice reaches it): the socket catches up on joining, from the
render's time and the rows it shows, both in its URL (core.live_rows.live_query)."""

import re
from datetime import timedelta
from html import unescape
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone

from core.actors import Actor
from retention_app.services.deletion import delete_session
from sessions_app.models import Session
from sessions_app.services.lifecycle import archive_session, close_session, pause_session
from sessions_app.services.sessions import open_session
from tasks_app.services.steps import update_step
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session, make_task
from tests.realtime.test_consumers import TIMEOUT, cookie_for, socket

pytestmark = pytest.mark.django_db(transaction=True)
AGENT = Actor.system("agent")


def live_url(team: Team, listing: str = "sessions") -> str:
    """The list page's socket URL, as the page renders it."""
    client = Client()
    client.force_login(team.viewer)
    page = client.get(f"/p/{team.project.pk}/{listing}/").content.decode()
    section = "session-results" if listing == "sessions" else "task-results"
    return unescape(re.search(rf'id="{section}"[^>]*ws-connect="([^"]+)"', page).group(1))


def frames_on_joining(path: str, cookie: str) -> str:
    """What a socket joining at `path` is sent on joining ("" when nothing comes within a second
    and a half; a flush comes in parts)."""

    async def scenario():
        ws = socket(path, cookie)
        assert (await ws.connect())[0]
        parts = []
        while not await ws.receive_nothing(timeout=1.5):
            parts.append(await ws.receive_from(timeout=TIMEOUT))
        await ws.disconnect()
        return "".join(parts)

    return async_to_sync(scenario)()


def test_the_page_names_its_render_time_and_rows_in_its_socket_url(team: Team):
    shown = [make_session(team.project, title=f"s{n}") for n in range(3)]
    before = timezone.now()
    query = parse_qs(urlsplit(live_url(team)).query)
    rendered_at = timezone.datetime.fromisoformat(query["rendered_at"][0])
    assert before - timedelta(seconds=2) <= rendered_at <= before
    assert set(query["shown"][0].split(",")) == {str(s.pk) for s in shown}
    assert query["view"] == ["sessions"]


def test_a_socket_joining_late_gets_what_changed_since_its_pages_render(team: Team):
    changed = make_session(team.project, title="Changed after the render")
    gone = make_session(team.project, title="Deleted after the render")
    path = live_url(team)
    # Committed after the render, before the socket joins: no notice reaches the page.
    new, _ = open_session(team.project, agent_name="fresh", actor=AGENT, title="Opened after")
    pause_session(changed, actor=AGENT)
    close_session(gone, actor=AGENT)
    archive_session(gone, actor=AGENT)
    delete_session(team.project.pk, gone.pk, actor=AGENT)
    frame = frames_on_joining(path, cookie_for(team.viewer))
    assert '<tbody hx-swap-oob="afterbegin:#session-rows">' in frame
    assert f'<tr id="session-row-{new.pk}" class="session-row">' in frame
    assert f'<tr id="session-row-{changed.pk}" class="session-row" hx-swap-oob="true">' in frame
    assert "status-paused" in frame
    assert f'<tr id="session-row-{gone.pk}" hx-swap-oob="delete">' in frame


def test_a_socket_whose_page_is_current_or_unnamed_gets_nothing_on_joining(team: Team):
    shown = make_session(team.project, title="Shown")
    # Last changed well before the render (the page's second of slack would catch it up again,
    # rendering it as it is: harmless, but a frame).
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Session.objects.filter(pk=shown.pk).update(created_at=an_hour_ago, updated_at=an_hour_ago)
    path = live_url(team)
    query = parse_qs(urlsplit(path).query)
    bare = f"/ws/projects/{team.project.pk}/?" + urlencode({"view": "sessions"})
    forged = f"/ws/projects/{team.project.pk}/?" + urlencode(
        {"view": "sessions", "rendered_at": "yesterday", "shown": query["shown"][0]}
    )
    cookie = cookie_for(team.viewer)

    async def scenario():
        for url in (path, bare, forged):
            ws = socket(url, cookie)
            assert (await ws.connect())[0]
            assert await ws.receive_nothing(timeout=1), url
            await ws.disconnect()

    async_to_sync(scenario)()


def test_a_tasks_list_socket_joining_late_gets_what_changed_since_its_pages_render(team: Team):
    stepped = make_task(team.project)
    path = live_url(team, "tasks")
    assert f"{stepped.pk}" in parse_qs(urlsplit(path).query)["shown"][0]
    new = make_task(team.project)
    update_step(stepped, "draft", status="running", actor=AGENT)

    frame = frames_on_joining(path, cookie_for(team.viewer))
    assert f'<tr id="task-row-{new.pk}" class="task-row">' in frame
    assert f'<tr id="task-row-{stepped.pk}" class="task-row" hx-swap-oob="true">' in frame
