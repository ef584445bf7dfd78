"""Probe 5: racing claims on one handoff, from the outside (issue 23, invariant 7).

Eight operators, each in a process of their own (tests/multiproc.py) with their own signed-in
session, press "Claim" on the same open handoff at the same moment, through the dashboard's
claim URL; round after round on fresh handoffs. Each round: exactly one claim wins (redirect to
the workspace), the seven others get 409; the handoff is held by the winner, its log has one
claim record and the audit one claim entry.
"""

import pytest
from django.conf import settings
from django.test import Client

from core.models import AuditEntry, Role
from handoffs_app.models import Handoff
from sessions_app.models import Event
from tests.factories import make_member, make_project, make_session
from tests.handoffs.helpers import ask
from tests.multiproc import ProcessPool
from tests.probes import racers
from tests.probes.summary import report

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PROCESSES = 8
ROUNDS = 10


def test_probe_claim_race():
    project = make_project()
    people = [make_member(project, Role.OPERATOR) for _ in range(PROCESSES)]
    keys = []
    for person in people:
        client = Client()
        client.force_login(person)
        keys.append(client.cookies[settings.SESSION_COOKIE_NAME].value)

    answers: dict[str, int] = {}
    with ProcessPool(PROCESSES) as pool:
        for _ in range(ROUNDS):
            session = make_session(project)
            handoff = ask(session)
            workspace = f"/handoffs/{handoff.pk}/"
            results = pool.run(racers.claim_over_http, [(str(handoff.pk), k) for k in keys])
            for result in results:
                kind = "won" if result == f"302 {workspace}" else result
                answers[kind] = answers.get(kind, 0) + 1
            assert results.count(f"302 {workspace}") == 1, results
            assert sorted(set(results) - {f"302 {workspace}"}) == ["409"], results
            winner = people[results.index(f"302 {workspace}")]
            handoff.refresh_from_db()
            assert (handoff.status, handoff.lease_holder_id) == ("claimed", winner.pk)
            claims = Event.objects.filter(session=session, kind="handoff", content__step="claimed")
            assert [c.actor for c in claims] == [f"user:{winner.get_username()}"]
            audit = AuditEntry.objects.filter(action="handoff.claimed", target_id=str(handoff.pk))
            assert audit.count() == 1

    report(
        "claim race",
        processes=PROCESSES,
        rounds=ROUNDS,
        claims=PROCESSES * ROUNDS,
        winners=answers.get("won", 0),
        conflicts_409=answers.get("409", 0),
    )
    assert answers == {"won": ROUNDS, "409": ROUNDS * (PROCESSES - 1)}
    assert Handoff.objects.filter(project=project, status="claimed").count() == ROUNDS
