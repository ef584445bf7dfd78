"""The live handoff pages: the queue socket and the workspace socket check access like the pages
(anonymous 4401, another project's member 4404) and push what changed, rendered for the viewer.
Real commits through the services, on the configured channel layer."""

from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model

from handoffs_app.models import Handoff
from handoffs_app.services.handoffs import claim_handoff
from switchboard.handoffs.context import workspace_version
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session
from tests.handoffs.helpers import ask
from tests.realtime.test_list_groups import TIMEOUT, cookie_for, socket

pytestmark = pytest.mark.django_db(transaction=True)


async def frame_with(ws, text: str, frames: int = 4) -> str:
    """The first frame holding `text` (a step also appends to the session's log, whose own
    push of the conversation and state panels may come first)."""
    for _ in range(frames):
        frame = await ws.receive_from(timeout=TIMEOUT)
        if text in frame:
            return frame
    raise AssertionError(f"no frame with {text!r}")


async def refused(path: str, cookie: str | None) -> int | None:
    ws = socket(path, cookie or "none")
    connected, code = await ws.connect()
    await ws.disconnect()
    return None if connected else code


def test_sockets_check_access_like_the_pages(team: Team):
    handoff = ask(make_session(team.project), "question")
    outsider = cookie_for(team.outsider)

    async def scenario():
        for path in (f"/ws/projects/{team.project.pk}/handoffs/", f"/ws/handoffs/{handoff.pk}/"):
            assert await refused(path, None) == 4401
            assert await refused(path, outsider) == 4404
        assert await refused(f"/ws/projects/{team.project.pk}/handoffs/?kind=nope", outsider)

    async_to_sync(scenario)()


def test_a_superuser_who_is_no_member_watches_the_workspace(team: Team):
    handoff = ask(make_session(team.project), "question")
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    cookie, outsider = cookie_for(root), cookie_for(team.outsider)

    async def scenario():
        ws = socket(f"/ws/handoffs/{handoff.pk}/", cookie)
        assert (await ws.connect())[0]
        first = await ws.receive_from(timeout=TIMEOUT)  # caught up at connect, as an admin
        assert 'id="claim-button"' in first
        await ws.disconnect()
        assert await refused(f"/ws/handoffs/{handoff.pk}/", outsider) == 4404

    async_to_sync(scenario)()


def test_the_queue_shows_new_requests_and_who_claimed_them(team: Team):
    session = make_session(team.project, agent="refunds", title="Refund")
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/handoffs/", cookie)
        assert (await ws.connect())[0]
        handoff = await sync_to_async(ask)(session, "approval")
        frame = await frame_with(ws, f'id="handoff-row-{handoff.pk}"')
        assert 'id="nav-handoff-count"' in frame and ">1</span>" in frame
        await sync_to_async(claim_handoff)(handoff, user=team.operator)
        frame = await frame_with(ws, f'<td class="holder">{team.operator.username}</td>')
        await ws.disconnect()

    async_to_sync(scenario)()


def test_the_queue_and_the_count_show_what_came_between_the_render_and_the_join(team: Team):
    # The page rendered before this request was made; its sockets join after: no notice of the
    # request will ever reach them, so they render what is there on joining.
    handoff = ask(make_session(team.project, title="Refund"), "approval")
    cookie = cookie_for(team.viewer)

    async def scenario():
        for path, shown in (
            (f"/ws/projects/{team.project.pk}/handoffs/", f'id="handoff-row-{handoff.pk}"'),
            (f"/ws/projects/{team.project.pk}/nav/", 'id="nav-handoff-count"'),
        ):
            ws = socket(path, cookie)
            assert (await ws.connect())[0]
            first = await ws.receive_from(timeout=TIMEOUT)
            assert shown in first and ">1</span>" in first
            await ws.disconnect()

    async_to_sync(scenario)()


def test_the_workspace_shows_someone_elses_claim_and_no_actions(team: Team):
    handoff = ask(make_session(team.project, title="Refund"), "approval")
    cookie = cookie_for(team.admin)

    async def scenario():
        ws = socket(f"/ws/handoffs/{handoff.pk}/", cookie)
        assert (await ws.connect())[0]
        first = await ws.receive_from(timeout=TIMEOUT)  # caught up at connect
        assert 'id="claim-button"' in first
        await sync_to_async(claim_handoff)(handoff, user=team.operator)
        frame = await frame_with(ws, "Held by")
        assert f"Held by <strong>{team.operator.username}</strong>" in frame
        assert 'id="claim-button"' not in frame and 'id="accept-button"' not in frame
        assert "reassign" in frame  # an admin may still reassign it
        await ws.disconnect()

    async_to_sync(scenario)()


def test_the_workspace_catches_up_at_connect_only_when_something_changed_since_its_render(
    team: Team,
):
    # A catch-up frame rendered while the person claims could reach the page after the claim's
    # own answer and show it unclaimed again: a page still at its render's version gets none.
    handoff = ask(make_session(team.project, title="Refund"), "approval")
    rendered_at = workspace_version(Handoff.objects.get(pk=handoff.pk))
    cookie = cookie_for(team.operator)
    path = f"/ws/handoffs/{handoff.pk}/?since={quote(rendered_at)}"

    async def scenario():
        ws = socket(path, cookie)
        assert (await ws.connect())[0]
        await sync_to_async(claim_handoff)(handoff, user=team.operator)
        # Frames until the claim's push (the presence line comes first): no catch-up among them.
        frames = [await ws.receive_from(timeout=TIMEOUT)]
        while "You hold this handoff" not in frames[-1]:
            frames.append(await ws.receive_from(timeout=TIMEOUT))
        assert not any('id="claim-button"' in frame for frame in frames)
        await ws.disconnect()
        # The claim changed it since that render: a page rendered then is caught up.
        ws = socket(path, cookie)
        assert (await ws.connect())[0]
        first = await ws.receive_from(timeout=TIMEOUT)
        assert "You hold this handoff" in first and 'id="accept-button"' in first
        await ws.disconnect()

    async_to_sync(scenario)()


def test_the_session_page_timeline_follows_handoff_steps(team: Team):
    session = make_session(team.project, title="Refund")
    handoff = ask(session, "approval")
    session.refresh_from_db()
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/sessions/{session.pk}/?after_seq={session.head_seq}", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(claim_handoff)(handoff, user=team.operator)
        frame = await frame_with(ws, 'id="timeline"')
        assert f"approval: claimed by {team.operator.username}" in frame
        await ws.disconnect()

    async_to_sync(scenario)()
