"""Opening a session is idempotent by `external_id` (README, DESIGN: "same external_id again →
the existing session, 200"), also when several OS processes open the same one at the same moment
(tests.multiproc: spawned interpreters, each with its own connection, released by one barrier).

A racer that misses the existing row in its look-up inserts, and the unique constraint on
(project, external_id) refuses all but one insert: the losers answer 200 with the winner's
session (sessions_app.services.sessions.open_session), never an error or a second session.
Without that handling, three of four rounds here answered a racer 503 (more than one process
got past the look-up); over ROUNDS rounds a race that never reaches the insert is unlikely.
The last test makes it certain: the session is opened in a transaction held open until every
racer waits on its row (tests.multiproc.run_behind_lock), so all of them miss it in the look-up
and all of them meet the constraint.
(A fork's external_id is raced in test_concurrent_keys.py.)
"""

import pytest

from core.actors import Actor
from core.models import AuditEntry
from sessions_app.models import Agent, Session
from sessions_app.services.sessions import get_or_register_agent, open_session
from tests.factories import make_api_key
from tests.multiproc import post_each_at_once, post_in_rounds, run_behind_lock

pytestmark = [pytest.mark.slow]

PROCESSES = 4
ROUNDS = 8


def opening(external_id: str) -> dict[str, str]:
    return {"agent": "racer", "external_id": external_id}


def answered(answer: tuple[int, dict]) -> tuple[int, object]:
    """(status, session id), or (status, body) for an answer without one."""
    status, body = answer
    return status, body.get("id", body)


def test_processes_opening_one_external_id_at_once_share_one_session(
    transactional_db, project, racers
):
    raw_key = make_api_key(project)[1]
    external_ids = [f"ticket-{n}" for n in range(ROUNDS)]

    rounds = post_in_rounds(racers, raw_key, "/sessions", [opening(e) for e in external_ids])

    for external_id, answers in zip(external_ids, rounds, strict=True):
        answers = [answered(answer) for answer in answers]
        statuses = sorted(status for status, _ in answers)
        assert statuses == [200] * (PROCESSES - 1) + [201], (external_id, answers)
        (session,) = Session.objects.filter(project=project, external_id=external_id)
        assert {session_id for _, session_id in answers} == {str(session.pk)}
        opened = AuditEntry.objects.filter(action="session.open", target_id=str(session.pk))
        assert opened.count() == 1
    assert Session.objects.filter(project=project).count() == ROUNDS
    # The agent named for the first time by all of them at once is registered once too.
    assert Agent.objects.filter(project=project, name="racer").count() == 1


def test_processes_that_all_miss_an_uncommitted_session_answer_with_it_once_committed(
    transactional_db, project, racers
):
    key, raw_key = make_api_key(project)
    # Registered beforehand, so that the racers wait on the session's row, not on the agent's.
    get_or_register_agent(project, "racer")

    def open_held() -> Session:
        session, created = open_session(
            project, agent_name="racer", actor=Actor.for_key(key), external_id="ticket-held"
        )
        assert created
        return session

    held, per_process = run_behind_lock(
        racers,
        post_each_at_once,
        [(raw_key, "/sessions", [opening("ticket-held")])] * PROCESSES,
        hold=open_held,
        inserting_into=Session,
    )

    assert [answered(answer) for (answer,) in per_process] == [(200, str(held.pk))] * PROCESSES
    assert list(Session.objects.filter(project=project)) == [held]
    assert AuditEntry.objects.filter(action="session.open").count() == 1
    assert Agent.objects.filter(project=project).count() == 1
