"""The dashboard's websockets: authenticated, project-scoped, read-only, and pushing the same
partials the pages render. Real commits (transactional tests), so on_commit broadcasts fire."""

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client

from config.asgi import application
from core.actors import Actor
from core.models import Membership
from core.realtime import project_list_group
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import pause_session, resume_session
from sessions_app.services.sessions import open_session
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 5


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


def append(session, *texts: str) -> None:
    append_events(
        session,
        [EventDraft(kind="message", role="user", content={"text": t}) for t in texts],
        actor=Actor.system("agent"),
    )


@pytest.fixture
def session(team: Team):
    s = make_session(team.project, title="Live one")
    append(s, "hello", "again")
    s.refresh_from_db()
    return s


def test_it_refuses_anonymous_sockets(team, session):
    async def scenario():
        for path in [f"/ws/sessions/{session.pk}/", f"/ws/projects/{team.project.pk}/"]:
            ws = socket(path)
            connected, code = await ws.connect()
            assert not connected and code == 4401, path
            await ws.disconnect()

    run(scenario)


def test_it_refuses_members_of_other_projects(team, session):
    cookie = cookie_for(team.outsider)

    async def scenario():
        for path in [
            f"/ws/sessions/{session.pk}/",
            f"/ws/projects/{team.project.pk}/",
            f"/ws/projects/{team.project.pk}/?view=sessions",
            "/ws/sessions/00000000-0000-0000-0000-000000000000/",
        ]:
            ws = socket(path, cookie)
            connected, code = await ws.connect()
            assert not connected and code == 4404, path
            await ws.disconnect()

    run(scenario)


def test_it_refuses_sockets_from_other_origins(team, session):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = WebsocketCommunicator(
            application,
            f"/ws/sessions/{session.pk}/",
            headers=[
                (b"origin", b"http://evil.example"),
                (b"host", b"testserver"),
                (b"cookie", f"sessionid={cookie}".encode()),
            ],
        )
        connected, _ = await ws.connect()
        assert not connected
        await ws.disconnect()

    run(scenario)


def test_it_pushes_appended_events_as_rendered_rows(team, session, channel_layer):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/sessions/{session.pk}/?order=desc&after_seq=2&rows=1", cookie)
        connected, _ = await ws.connect()
        assert connected
        assert await ws.receive_nothing(timeout=0.2)  # nothing new yet
        await sync_to_async(append)(session, "<script>alert(1)</script>")
        frame = await ws.receive_from(timeout=TIMEOUT)
        # The row partial of the session page, inserted on top of the newest-first log.
        assert '<div hx-swap-oob="afterbegin:#event-rows">' in frame
        assert '<article id="event-3" data-live-row class="event event-message">' in frame
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in frame
        assert "<script>" not in frame
        # The header follows (head seq, usage), replaced out of band.
        assert '<div id="session-header" data-head-seq="3" hx-swap-oob="true">' in frame
        await ws.disconnect()

    run(scenario)


def test_it_catches_up_on_events_appended_before_the_socket_opened(team, session):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/sessions/{session.pk}/?order=asc&after_seq=1&rows=1", cookie)
        connected, _ = await ws.connect()
        assert connected
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert '<div hx-swap-oob="beforeend:#event-rows">' in frame  # oldest first: appended
        assert 'id="event-2"' in frame and 'id="event-1"' not in frame
        await ws.disconnect()

    run(scenario)


def test_it_pushes_only_the_kinds_the_page_shows(team, session):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/sessions/{session.pk}/?kind=fact&after_seq=2&rows=1", cookie)
        connected, _ = await ws.connect()
        assert connected
        await sync_to_async(append_events)(
            session,
            [
                EventDraft(kind="message", content={"text": "not shown"}),
                EventDraft(kind="fact", content={"key": "tier", "value": "gold"}),
            ],
            actor=Actor.system("agent"),
        )
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert 'id="event-4"' in frame and 'id="event-3"' not in frame
        assert 'id="facts-panel"' in frame and "tier" in frame  # facts changed: panel too
        await ws.disconnect()

    run(scenario)


def test_it_pushes_lifecycle_changes_to_header_actions_and_timeline(team, session):
    cookie = cookie_for(team.operator)

    async def scenario():
        ws = socket(f"/ws/sessions/{session.pk}/?after_seq=2&rows=0", cookie)
        connected, _ = await ws.connect()
        assert connected
        await sync_to_async(pause_session)(session, actor=Actor.system("agent"), reason="ask")
        frames = [await ws.receive_from(timeout=TIMEOUT), await ws.receive_from(timeout=TIMEOUT)]
        joined = "".join(frames)
        assert "event-rows" not in joined  # rows=0: a page that does not follow new rows
        assert 'class="status status-paused"' in joined
        assert 'id="session-actions" class="actions" hx-swap-oob="true"' in joined
        assert 'form="resume-form"' in joined  # operators get the actions of the new status
        assert 'id="timeline" class="card"' in joined and "ask" in joined
        await ws.disconnect()

    run(scenario)


def test_it_shows_viewers_no_actions_in_pushes(team, session):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/sessions/{session.pk}/?after_seq=2&rows=0", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(pause_session)(session, actor=Actor.system("agent"))
        joined = await ws.receive_from(timeout=TIMEOUT) + await ws.receive_from(timeout=TIMEOUT)
        assert 'id="session-actions"' in joined and "resume-form" not in joined
        await ws.disconnect()

    run(scenario)


def test_it_closes_when_the_member_loses_access(team, session):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/sessions/{session.pk}/?after_seq=2", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(Membership.objects.filter(user=team.viewer).delete)()
        await sync_to_async(append)(session, "secret")
        output = await ws.receive_output(timeout=TIMEOUT)
        assert output == {"type": "websocket.close", "code": 4404}

    run(scenario)


def test_it_ignores_what_clients_send_and_other_apps_events(team, session):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=sessions", cookie)
        assert (await ws.connect())[0]
        await ws.send_to(text_data='{"pause": true}')
        await get_channel_layer().group_send(
            project_list_group(team.project.pk, "sessions"), {"type": "task.step", "task_id": "x"}
        )
        assert await ws.receive_nothing(timeout=0.8)
        # Still alive: a real change comes through.
        await sync_to_async(pause_session)(session, actor=Actor.system("agent"))
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'id="session-row-{session.pk}"' in frame
        await ws.disconnect()

    run(scenario)
    session.refresh_from_db()
    assert session.status == "paused"  # only the service call changed it


def test_it_puts_new_sessions_on_top_of_the_list_and_updates_rows(team, session, channel_layer):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=sessions", cookie)
        assert (await ws.connect())[0]
        new, _ = await sync_to_async(open_session)(
            team.project, agent_name="fresh", actor=Actor.system("agent"), title="<b>New</b>"
        )
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert '<tbody hx-swap-oob="afterbegin:#session-rows">' in frame
        assert f'<tr id="session-row-{new.pk}" class="session-row">' in frame
        assert "&lt;b&gt;New&lt;/b&gt;" in frame
        await sync_to_async(pause_session)(session, actor=Actor.system("agent"))
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="session-row-{session.pk}" class="session-row" hx-swap-oob="true">' in frame
        assert "status-paused" in frame
        await ws.disconnect()

    run(scenario)


def test_it_drops_rows_that_leave_the_filter(team, session):
    cookie = cookie_for(team.viewer)
    pause_session(session, actor=Actor.system("agent"))

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=sessions&status=paused", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(resume_session)(session, actor=Actor.system("agent"))
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="session-row-{session.pk}" hx-swap-oob="delete">' in frame
        other = await sync_to_async(make_session)(team.project, title="Open, not paused")
        assert await ws.receive_nothing(timeout=1)  # does not match: not shown
        # The silence was the filter's, not a dead socket: once `other` enters the filter the
        # page hears of it (a notice: newest-first pages do not reshuffle under the reader),
        # and the row that left is not brought back.
        await sync_to_async(pause_session)(other, actor=Actor.system("agent"))
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert '<div id="sessions-live-notice"' in frame
        assert "session-row-" not in frame
        await ws.disconnect()

    run(scenario)


def test_it_refuses_a_list_socket_with_bad_filters(team):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=sessions&status=sleeping", cookie)
        connected, code = await ws.connect()
        assert not connected and code == 4400
        await ws.disconnect()

    run(scenario)


def test_it_refreshes_the_overview_on_lifecycle_changes(team, session):
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=overview", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(pause_session)(session, actor=Actor.system("agent"), reason="help")
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert 'id="status-counts"' in frame and 'id="waiting"' in frame
        assert 'id="recent-changes"' in frame and "Live one" in frame
        assert 'id="handoffs-waiting"' in frame
        assert frame.count('hx-swap-oob="true"') == 4
        await ws.disconnect()

    run(scenario)


def test_it_pushes_a_linked_tasks_panel_when_the_task_changes(team, session):
    from core.realtime import task_group
    from tests.factories import make_task

    task = make_task(team.project, session_ids=[str(session.pk)])
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/sessions/{session.pk}/?after_seq=2", cookie)
        assert (await ws.connect())[0]
        await get_channel_layer().group_send(
            task_group(task.pk),
            {"type": "task.transition", "task_id": str(task.pk), "project_id": team.project.pk},
        )
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<div id="task-slot-{task.pk}" class="task-slot" hx-swap-oob="true">' in frame
        await get_channel_layer().group_send(
            task_group(task.pk),
            {
                "type": "task.links",
                "task_id": str(task.pk),
                "linked": [],
                "unlinked": [str(session.pk)],
            },
        )
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<div id="task-slot-{task.pk}" hx-swap-oob="delete">' in frame
        await ws.disconnect()

    run(scenario)
