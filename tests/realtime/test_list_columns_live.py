"""Live updates of what issue 13 added: the sessions list's budget and task columns follow
appends and task changes, and the overview's tasks card follows task changes. Real commits
(transactional tests), so the services' after-commit broadcasts reach the sockets."""

import pytest
from asgiref.sync import sync_to_async

from core.actors import Actor
from sessions_app.services.events import EventDraft, append_events
from tasks_app.services.links import link_sessions, unlink_session
from tasks_app.services.steps import update_step
from tasks_app.services.transitions import transition_task
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session, make_task
from tests.realtime.test_consumers import TIMEOUT, cookie_for, run, socket

pytestmark = pytest.mark.django_db(transaction=True)

OPS = Actor.system("agent")


def spend(session, tokens: int) -> None:
    append_events(
        session,
        [EventDraft(kind="message", role="user", content={"text": "hi"}, tokens=tokens)],
        actor=OPS,
    )


def test_a_list_row_follows_its_budget_and_its_tasks_state_and_links(team: Team):
    session = make_session(team.project, title="Budgeted", budget_max_tokens=1000)
    other = make_session(team.project, title="Untouched")
    task = make_task(team.project, session_ids=[str(session.pk)])
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=sessions", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(spend)(session, 850)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="session-row-{session.pk}" class="session-row" hx-swap-oob="true">' in frame
        assert 'class="budget-bar near"' in frame and 'class="pct-85"' in frame

        # The task moves on: the row's task column says so, though the session did not change.
        await sync_to_async(transition_task)(task, transition="submit", actor=OPS)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="session-row-{session.pk}" class="session-row" hx-swap-oob="true">' in frame
        assert ">sent for review</a>" in frame
        assert f"session-row-{other.pk}" not in frame

        # A second task linked: "+1"; then unlinked again, and the other row gets the first.
        second = await sync_to_async(make_task)(team.project, workflow="research_report")
        await sync_to_async(link_sessions)(second, [session.pk], actor=OPS)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert 'title="2 linked tasks">+1</span>' in frame
        await sync_to_async(unlink_session)(second, session.pk, actor=OPS)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert "+1</span>" not in frame and ">sent for review</a>" in frame
        await sync_to_async(link_sessions)(second, [other.pk], actor=OPS)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="session-row-{other.pk}" class="session-row" hx-swap-oob="true">' in frame
        assert ">researching</a>" in frame

        # Past the limit: red.
        await sync_to_async(spend)(session, 400)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert 'class="budget-bar over"' in frame and "125% · exceeded" in frame
        await ws.disconnect()

    run(scenario)


def test_a_task_change_does_not_move_a_row_of_the_recently_active_sort(team: Team):
    """A task's change is not the session's activity: on "recently active" the row is replaced
    where it is, not moved to the top."""
    linked = make_session(team.project, title="Linked, older")
    make_session(team.project, title="Newer")
    task = make_task(team.project, session_ids=[str(linked.pk)])
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=sessions&sort=-updated", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(transition_task)(task, transition="submit", actor=OPS)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="session-row-{linked.pk}" class="session-row" hx-swap-oob="true">' in frame
        assert "afterbegin" not in frame and 'hx-swap-oob="delete"' not in frame
        await ws.disconnect()

    run(scenario)


def test_a_has_task_filtered_list_drops_a_row_whose_task_was_unlinked(team: Team):
    session = make_session(team.project, title="Linked")
    task = make_task(team.project, session_ids=[str(session.pk)])
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=sessions&has_task=yes", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(unlink_session)(task, session.pk, actor=OPS)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert f'<tr id="session-row-{session.pk}" hx-swap-oob="delete">' in frame
        await ws.disconnect()

    run(scenario)


def test_the_overview_pushes_its_tasks_card_when_a_task_changes(team: Team):
    task = make_task(team.project, external_id="doc-9")
    cookie = cookie_for(team.viewer)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/?view=overview", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(update_step)(
            task, "review", status="waiting", actor=OPS, waiting_on="review_decision"
        )
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert '<section id="tasks-attention"' in frame and 'hx-swap-oob="true"' in frame
        assert "doc-9" in frame and "<code>review_decision</code>" in frame
        # Only the tasks card: the sessions' parts did not change.
        assert 'id="status-counts"' not in frame and 'id="waiting"' not in frame
        await ws.disconnect()

    run(scenario)
