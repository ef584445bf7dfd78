"""The task pages' websockets: authenticated, project-scoped, read-only, pushing the same
partials the pages render. Real commits (transactional tests), so on_commit broadcasts fire."""

import re

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client

from config.asgi import application
from core.actors import Actor
from core.models import Membership
from core.realtime import task_group
from tasks_app import consumers
from tasks_app.models import Task
from tasks_app.queries import latest_history_id
from tasks_app.services.links import link_sessions
from tasks_app.services.steps import update_step
from tasks_app.services.tasks import create_task
from tasks_app.services.transitions import transition_task
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session, make_task

pytestmark = pytest.mark.django_db(transaction=True)

# Generous: a loaded CI machine can take seconds to run a service call and render a frame.
TIMEOUT = 15
AGENT = Actor.system("agent")


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.requires_redis("live updates through Redis")),
        "memory",
    ]
)
def channel_layer(request, settings):
    """Each push test runs on the configured Redis layer and on the in-memory one."""
    if request.param == "memory":
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return request.param


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


def socket(path: str, cookie: str | None = None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if cookie:
        headers.append((b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, path, headers=headers)


def run(scenario) -> None:
    async_to_sync(scenario)()


@pytest.fixture
def task(team: Team) -> Task:
    return make_task(team.project)


def task_path(task: Task, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"after": latest_history_id(task), **params}.items())
    return f"/ws/tasks/{task.pk}/?{query}"


def test_it_refuses_anonymous_sockets(team, task):
    async def scenario():
        for path in [f"/ws/tasks/{task.pk}/", f"/ws/projects/{team.project.pk}/tasks/"]:
            ws = socket(path)
            connected, code = await ws.connect()
            assert not connected and code == 4401, path
            await ws.disconnect()

    run(scenario)


def test_it_refuses_members_of_other_projects_and_unknown_tasks(team, task):
    cookie = cookie_for(team.outsider)

    async def scenario():
        for path in [
            f"/ws/tasks/{task.pk}/",
            f"/ws/projects/{team.project.pk}/tasks/",
            "/ws/tasks/00000000-0000-0000-0000-000000000000/",
        ]:
            ws = socket(path, cookie)
            connected, code = await ws.connect()
            assert not connected and code == 4404, path
            await ws.disconnect()

    run(scenario)


def test_it_refuses_settings_the_page_would_refuse(team, task):
    cookie = cookie_for(team.viewer)

    async def scenario():
        for path in [
            f"/ws/tasks/{task.pk}/?kind=explosion",
            f"/ws/projects/{team.project.pk}/tasks/?state=no_such_state",
        ]:
            ws = socket(path, cookie)
            connected, code = await ws.connect()
            assert not connected and code == 4400, path
            await ws.disconnect()

    run(scenario)


def test_it_pushes_a_transition_as_rendered_partials(team, task, channel_layer):
    cookie = cookie_for(team.viewer)
    path = task_path(task)

    async def scenario():
        ws = socket(path, cookie)
        connected, _ = await ws.connect()
        assert connected
        assert await ws.receive_nothing(timeout=0.2)  # nothing new since the page rendered
        await sync_to_async(transition_task)(
            task, "sent_for_review", actor=AGENT, reason="<b>ready</b>"
        )
        frame = await ws.receive_from(timeout=TIMEOUT)
        # The header and the panel of the task page, replaced out of band...
        assert re.search(
            r'<section id="task-header" class="card task-header"[^>]*'
            r'hx-swap-oob="true"',
            frame,
        )
        assert '<section id="task-panel" class="card" hx-swap-oob="true">' in frame
        # ...with the diagram's current state moved...
        assert re.search(r'<g class="node current[^"]*" data-state="sent_for_review"', frame)
        assert not re.search(r'<g class="node current[^"]*" data-state="draft_created"', frame)
        # ...and the new history row on top of the history, escaped.
        assert '<div hx-swap-oob="afterbegin:#history-rows">' in frame
        assert 'class="history-item history-transition"' in frame
        assert "&lt;b&gt;ready&lt;/b&gt;" in frame and "<b>ready" not in frame
        await ws.disconnect()

    run(scenario)


def test_it_pushes_a_failed_step_with_its_error_escaped(team, task):
    cookie = cookie_for(team.viewer)
    path = task_path(task)

    async def scenario():
        ws = socket(path, cookie)
        assert (await ws.connect())[0]
        await sync_to_async(update_step)(task, "draft", status="running", actor=AGENT)
        await ws.receive_from(timeout=TIMEOUT)
        await sync_to_async(update_step)(
            task,
            "draft",
            status="failed",
            actor=AGENT,
            error={"type": "boom", "message": "<script>alert(1)</script>"},
        )
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert "The last attempt failed" in frame and "boom" in frame
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in frame
        assert "<script>" not in frame
        await ws.disconnect()

    run(scenario)


def test_it_pushes_only_the_history_rows_the_page_shows(team, task):
    cookie = cookie_for(team.viewer)
    path = task_path(task, step="review")

    async def scenario():
        ws = socket(path, cookie)
        assert (await ws.connect())[0]
        await sync_to_async(update_step)(task, "draft", status="running", actor=AGENT)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert 'id="task-panel"' in frame  # the panel follows every change...
        assert "history-rows" not in frame  # ...the filtered history does not show this one
        await ws.disconnect()

    run(scenario)


def test_it_catches_up_on_changes_made_before_the_socket_opened(team, task):
    cookie = cookie_for(team.viewer)
    path = task_path(task)
    transition_task(task, "sent_for_review", actor=AGENT)

    async def scenario():
        ws = socket(path, cookie)
        assert (await ws.connect())[0]
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert re.search(r'<g class="node current[^"]*" data-state="sent_for_review"', frame)
        assert "history-transition" in frame
        await ws.disconnect()

    run(scenario)


def test_a_transition_committed_while_a_frame_renders_shows_in_that_frame(team, task, monkeypatch):
    """A frame reads the task and its new history rows in two statements. A transition that
    commits between them is in the history read, so no later frame renders it: the frame
    must show it. (CI once caught this as a page whose diagram stayed on the state before.)"""
    transition_task(task, "sent_for_review", actor=AGENT)
    stream = consumers.TaskStream.open(
        team.viewer, str(task.pk), f"after={latest_history_id(task)}"
    )
    real_history_slice = consumers.history_slice

    def transition_commits_first(*args, **kwargs):
        monkeypatch.setattr(consumers, "history_slice", real_history_slice)
        transition_task(Task.objects.get(pk=task.pk), "approved", actor=AGENT)
        return real_history_slice(*args, **kwargs)

    monkeypatch.setattr(consumers, "history_slice", transition_commits_first)

    frame = stream.frame()

    assert re.search(r'<g class="node current[^"]*" data-state="approved"', frame)
    assert stream.frame() == ""  # nothing after it: this frame was the only one to show it


def test_it_pushes_linked_sessions_when_links_change(team, task):
    cookie = cookie_for(team.viewer)
    path = task_path(task)
    session = make_session(team.project, title="New chat")

    async def scenario():
        ws = socket(path, cookie)
        assert (await ws.connect())[0]
        await sync_to_async(link_sessions)(task, [session.pk], actor=AGENT)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert '<section id="task-sessions" class="card"' in frame
        assert f'href="/sessions/{session.pk}/"' in frame and "New chat" in frame
        await ws.disconnect()

    run(scenario)


def test_it_ignores_what_clients_send_and_closes_when_access_is_lost(team, task):
    cookie = cookie_for(team.viewer)
    path = task_path(task)

    async def scenario():
        ws = socket(path, cookie)
        assert (await ws.connect())[0]
        await ws.send_to(text_data='{"transition": "sent_for_review"}')
        await get_channel_layer().group_send(
            task_group(task.pk), {"type": "session.events", "session_id": "x"}
        )
        assert await ws.receive_nothing(timeout=0.5)
        await sync_to_async(Membership.objects.filter(user=team.viewer).delete)()
        await sync_to_async(update_step)(task, "draft", status="running", actor=AGENT)
        output = await ws.receive_output(timeout=TIMEOUT)
        assert output == {"type": "websocket.close", "code": 4404}

    run(scenario)
    task.refresh_from_db()
    assert task.state == "draft_created"  # only service calls change tasks


def test_the_list_inserts_new_tasks_and_updates_and_drops_rows(team, task, channel_layer):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/tasks/?state=draft_created", cookie)
        assert (await ws.connect())[0]
        # A new matching task goes on top of the first page.
        created = await sync_to_async(create_task)(
            team.project, workflow="document_approval", actor=AGENT, external_id="<i>x</i>"
        )
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert '<tbody hx-swap-oob="afterbegin:#task-rows">' in frame
        assert f'id="task-row-{created.task.pk}"' in frame
        assert "&lt;i&gt;x&lt;/i&gt;" in frame and "<i>x" not in frame
        # A shown task that changes is replaced in place.
        await sync_to_async(update_step)(task, "draft", status="running", actor=AGENT)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="task-row-{task.pk}" class="task-row" hx-swap-oob="true">' in frame
        # One that stops matching the filters is removed.
        await sync_to_async(transition_task)(task, "sent_for_review", actor=AGENT)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="task-row-{task.pk}" hx-swap-oob="delete"></tr>' in frame
        await ws.disconnect()

    run(scenario)


def test_the_session_page_follows_its_linked_task(team):
    """The session page's socket (sessions app) re-renders this app's task panel."""
    session = make_session(team.project, title="Chat")
    task = make_task(team.project, session_ids=[str(session.pk)])
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/sessions/{session.pk}/?after_seq=0&rows=0", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(transition_task)(task, "sent_for_review", actor=AGENT)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<div id="task-slot-{task.pk}" class="task-slot" hx-swap-oob="true">' in frame
        assert '<article class="task-panel"' in frame
        assert re.search(r'<g class="node current[^"]*" data-state="sent_for_review"', frame)
        await ws.disconnect()

    run(scenario)
