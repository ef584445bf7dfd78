"""Each live list of a project has its own group (core.realtime.project_list_group): the tasks
list never hears of appended events or lifecycle changes, the sessions list hears of tasks only
what its task column shows (transitions and links, never steps or creations), and each still
hears its own.

Not only "renders nothing" (a consumer ignores events it has no handler for anyway): a spy on
LiveConsumer.dispatch records every group message that reaches a consumer at all. Real commits
on the configured channel layer (Redis when the run has one).
"""

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client

from config.asgi import application
from core.actors import Actor
from core.live import LiveConsumer
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import pause_session
from tasks_app.services.steps import update_step
from tasks_app.services.tasks import create_task
from tasks_app.services.transitions import transition_task
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session, make_task

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 15
# Longer than either list's flush delay (0.3 s tasks, 0.5 s sessions), so a frame would show.
QUIET = 1.5
AGENT = Actor.system("agent")


def cookie_for(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


def socket(path: str, cookie: str) -> WebsocketCommunicator:
    return WebsocketCommunicator(
        application,
        path,
        headers=[
            (b"origin", b"http://testserver"),
            (b"host", b"testserver"),
            (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
        ],
    )


@pytest.fixture
def reached(monkeypatch) -> list[tuple[str, str]]:
    """(consumer class, message type) of every group message delivered to a live consumer."""
    seen: list[tuple[str, str]] = []
    original = LiveConsumer.dispatch

    async def spy(self, message):
        kind = str(message.get("type", ""))
        if not kind.startswith("websocket."):
            seen.append((type(self).__name__, kind))
        await original(self, message)

    monkeypatch.setattr(LiveConsumer, "dispatch", spy)
    return seen


def append(session, n: int = 1) -> None:
    append_events(
        session,
        [EventDraft(kind="message", role="user", content={"text": f"#{i}"}) for i in range(n)],
        actor=AGENT,
    )


def test_the_tasks_list_hears_nothing_of_sessions_and_still_hears_its_tasks(team, reached):
    session = make_session(team.project, title="Busy agent")
    task = make_task(team.project)
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/tasks/", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(append)(session, 1)
        await sync_to_async(append)(session, 20)
        await sync_to_async(pause_session)(session, actor=AGENT)
        assert await ws.receive_nothing(timeout=QUIET)
        assert [kind for consumer, kind in reached if consumer == "TaskListConsumer"] == []

        # Its own changes come through: a step of a shown task, rendered in place.
        await sync_to_async(update_step)(task, "draft", status="running", actor=AGENT)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="task-row-{task.pk}" class="task-row" hx-swap-oob="true">' in frame
        await ws.disconnect()

    async_to_sync(scenario)()
    assert [kind for consumer, kind in reached if consumer == "TaskListConsumer"] == ["task.step"]


def test_the_sessions_list_hears_only_task_states_and_links_and_still_hears_its_sessions(
    team, reached
):
    session = make_session(team.project, title="Shown on the list")
    task = make_task(team.project)
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=sessions", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(update_step)(task, "draft", status="running", actor=AGENT)
        await sync_to_async(create_task)(team.project, workflow="document_approval", actor=AGENT)
        # A transition reaches it (a linked row's task column), and renders nothing here: no
        # row shown is linked to the task.
        await sync_to_async(transition_task)(task, "sent_for_review", actor=AGENT)
        assert await ws.receive_nothing(timeout=QUIET)
        assert [kind for consumer, kind in reached if consumer == "ProjectConsumer"] == [
            "task.transition"
        ]

        # Its own changes come through: events appended to a shown session.
        await sync_to_async(append)(session, 2)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'id="session-row-{session.pk}"' in frame
        await ws.disconnect()

    async_to_sync(scenario)()
    assert [kind for consumer, kind in reached if consumer == "ProjectConsumer"] == [
        "task.transition",
        "session.events",
    ]
