"""Invariant 7: of concurrent claims on one handoff, exactly one wins; the others get 409.

Several OS processes (tests/multiproc.py) each claim the same handoff at once, over many
rounds; each round ends with one winner, 409s for the rest, one `claimed` record in the log
and one claim audit entry.
"""

import pytest

from core.models import AuditEntry
from handoffs_app.models import Handoff
from sessions_app.models import Event
from tests.factories import make_session
from tests.multiproc import ProcessPool

from . import racers
from .helpers import ask, operator

pytestmark = [pytest.mark.slow]

PROCESSES = 4
ROUNDS = 25


def test_exactly_one_claim_wins_each_round(transactional_db, project):
    users = [operator(project) for _ in range(PROCESSES)]
    tally = {"won": 0, "409:handoff_already_claimed": 0}
    with ProcessPool(PROCESSES) as pool:
        for _ in range(ROUNDS):
            session = make_session(project)
            handoff = ask(session)
            results = pool.run(racers.claim, [(str(handoff.pk), u.pk) for u in users])
            assert results.count("won") == 1, results
            assert sorted(set(results) - {"won"}) == ["409:handoff_already_claimed"], results
            for result in results:
                tally[result] += 1
            handoff.refresh_from_db()
            winner = users[results.index("won")]
            assert (handoff.status, handoff.lease_holder_id) == ("claimed", winner.pk)
            claims = Event.objects.filter(session=session, kind="handoff", content__step="claimed")
            assert claims.count() == 1
            assert claims.get().actor == f"user:{winner.username}"
            assert (
                AuditEntry.objects.filter(
                    action="handoff.claimed", target_id=str(handoff.pk)
                ).count()
                == 1
            )
    assert tally == {"won": ROUNDS, "409:handoff_already_claimed": ROUNDS * (PROCESSES - 1)}
    print(f"\nclaim race: {ROUNDS} rounds x {PROCESSES} processes: {tally}")
    assert Handoff.objects.filter(status="claimed").count() == ROUNDS
