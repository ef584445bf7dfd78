"""Retention's changes reach live pages like every other change: a real uvicorn server, a
websocket client signed in as a member, and the jobs run in this process (their outboxed
domain events cross to the server through the Redis channel layer). The sessions list and the
session page update when a job closes, compacts or deletes a session, and when a legal hold
(a session's, an agent's, the project's) is placed or lifted; the list shows a hold badge."""

import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from websockets.sync.client import connect

from core.actors import Actor
from retention_app.services.holds import lift_hold, place_hold
from retention_app.services.jobs import run_job_for_project
from retention_app.services.policies import save_policy
from sessions_app.services.lifecycle import archive_session
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_session
from tests.realtime.test_cross_process import receive_until, signed_in_cookie
from tests.retention.helpers import SYSTEM, append, conversation, later
from tests.servers import asgi_server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.requires_redis("live updates from jobs in another process"),
]

POLICY = {
    "close_idle_after": 3600,
    "close_paused_after": None,
    "archive_closed_after": None,
    "compact_after": 1,
    "delete_after": 1,
    "outcome_compact_after": None,
    "outcome_delete_after": None,
    "keep_outcomes": [],
    "keep_tags": [],
}
ADMIN = Actor.system("tests")


def socket(base_url: str, path: str, cookie: str):
    headers = {"Cookie": f"{django_settings.SESSION_COOKIE_NAME}={cookie}"}
    return connect(
        base_url.replace("http://", "ws://") + path,
        origin=base_url,
        additional_headers=headers,
        proxy=None,
        open_timeout=10,
    )


def row_frame(ws, session, *must: str) -> str:
    """The next frame that renders `session`'s row containing every one of `must`."""
    marker = f'id="session-row-{session.pk}"'
    for _ in range(10):
        frame = receive_until(ws, marker, timeout=8)
        row = frame[frame.index(marker) :].split("</tr>")[0]
        if all(text in row for text in must):
            return row
    raise AssertionError(f"no row of {session.pk} with {must}")


def row_without(ws, session, text: str) -> str:
    marker = f'id="session-row-{session.pk}"'
    for _ in range(10):
        frame = receive_until(ws, marker, timeout=8)
        row = frame[frame.index(marker) :].split("</tr>")[0]
        if text not in row:
            return row
    raise AssertionError(f"{session.pk}'s row kept {text!r}")


def test_the_sessions_list_follows_jobs_and_holds_live(team: Team):
    save_policy(team.project, POLICY, actor=SYSTEM)
    session = make_session(team.project, agent="alpha", title="Kept then gone")
    other = make_session(team.project, agent="beta", title="Bystander")
    append(session, conversation(30))
    with asgi_server() as base_url:
        cookie = signed_in_cookie(base_url, team.viewer.username)
        with socket(base_url, f"/ws/projects/{team.project.pk}/?view=sessions", cookie) as ws:
            # The idle rule closes it (job): the row shows closed.
            run_job_for_project("enforce_retention", team.project.pk, now=later(), trigger="t")
            row_frame(ws, session, "status-closed")

            # A session's hold: its row gains the badge; lifted: loses it.
            hold, _ = place_hold(team.project, session=session, reason="audit", actor=ADMIN)
            row_frame(ws, session, "legal hold")
            lift_hold(hold, actor=ADMIN)
            row_without(ws, session, "legal hold")

            # The project's hold: every shown row gains it (the bystander too).
            project_hold, _ = place_hold(team.project, reason="litigation", actor=ADMIN)
            row_frame(ws, other, "legal hold")
            lift_hold(project_hold, actor=ADMIN)
            row_without(ws, other, "legal hold")

            # Compaction (job): the row says compacted.
            run_job_for_project("compact_sessions", team.project.pk, now=later(), trigger="t")
            row_frame(ws, session, "compacted")

            # Deletion (job): the row goes.
            session.refresh_from_db()
            archive_session(session, actor=SYSTEM, reason="done")
            run_job_for_project("enforce_retention", team.project.pk, now=later(), trigger="t")
            receive_until(ws, f'<tr id="session-row-{session.pk}" hx-swap-oob="delete">', 8)


def test_the_list_page_shows_a_hold_badge_on_held_rows(team: Team):
    held = make_session(team.project, agent="alpha", title="Held")
    free = make_session(team.project, agent="beta", title="Free")
    place_hold(team.project, agent=held.agent, reason="agent review", actor=ADMIN)
    body = team.client("viewer").get(reverse("dashboard:session_list", args=[team.project.pk]))
    html = body.content.decode()
    held_row = html[html.index(f'id="session-row-{held.pk}"') :].split("</tr>")[0]
    free_row = html[html.index(f'id="session-row-{free.pk}"') :].split("</tr>")[0]
    assert "legal hold" in held_row and "legal hold" not in free_row


def test_the_session_page_follows_holds_compaction_and_deletion_live(team: Team):
    save_policy(team.project, POLICY, actor=SYSTEM)
    session = make_session(team.project, agent="alpha", title="Watched")
    append(session, conversation(30))
    with asgi_server() as base_url:
        cookie = signed_in_cookie(base_url, team.viewer.username)
        with socket(base_url, f"/ws/sessions/{session.pk}/?rows=1", cookie) as ws:
            # The agent's hold covers it: the header says so; lifted, it no longer does.
            hold, _ = place_hold(team.project, agent=session.agent, reason="r", actor=ADMIN)
            receive_until(ws, "legal hold (agent)", 8)
            lift_hold(hold, actor=ADMIN)
            frame = receive_until(ws, 'id="session-header"', 8)
            assert "legal hold" not in frame

            # The session's own hold.
            hold, _ = place_hold(team.project, session=session, reason="r", actor=ADMIN)
            receive_until(ws, "legal hold (session)", 8)
            lift_hold(hold, actor=ADMIN)

            run_job_for_project("enforce_retention", team.project.pk, now=later(), trigger="t")
            receive_until(ws, "status-closed", 8)
            run_job_for_project("compact_sessions", team.project.pk, now=later(), trigger="t")
            session.refresh_from_db()
            receive_until(ws, f"compacted to {session.compacted_through_seq}", 8)

            archive_session(session, actor=SYSTEM, reason="done")
            run_job_for_project("enforce_retention", team.project.pk, now=later(), trigger="t")
            receive_until(ws, "This session was deleted by retention", 8)
