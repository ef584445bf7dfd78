"""The queue the dashboard shows: priority then wait, filters, keyset pages, counts."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from core.errors import InvalidInput
from handoffs_app.queries import QueueFilters, filter_queue, queue_counts, queue_page
from handoffs_app.services import handoffs as svc
from tests.factories import make_session

from .helpers import AGENT, ask, operator


@pytest.fixture
def queue(project):
    """Five handoffs requested a minute apart, with mixed priorities and kinds."""
    made = {}
    start = timezone.now() - timedelta(hours=1)
    with time_machine.travel(start, tick=False) as clock:
        for name, kind, priority in [
            ("old-normal", "question", "normal"),
            ("old-high", "approval", "high"),
            ("new-normal", "approval", "normal"),
            ("urgent", "takeover", "urgent"),
            ("low", "question", "low"),
        ]:
            made[name] = ask(make_session(project), kind=kind, priority=priority)
            clock.shift(timedelta(minutes=1))
    return made


def names(rows, made):
    by_id = {h.pk: name for name, h in made.items()}
    return [by_id[r.pk] for r in rows]


def test_it_orders_by_priority_then_wait(project, queue):
    rows, cursor = queue_page(filter_queue(project, QueueFilters()))
    assert names(rows, queue) == ["urgent", "old-high", "old-normal", "new-normal", "low"]
    assert cursor is None


def test_it_pages_with_a_keyset_cursor(project, queue):
    qs = filter_queue(project, QueueFilters())
    first, cursor = queue_page(qs, limit=2)
    second, cursor2 = queue_page(qs, cursor=cursor, limit=2)
    third, cursor3 = queue_page(qs, cursor=cursor2, limit=2)
    assert names(first + second + third, queue) == [
        "urgent",
        "old-high",
        "old-normal",
        "new-normal",
        "low",
    ]
    assert cursor3 is None
    with pytest.raises(InvalidInput):
        queue_page(qs, cursor="bogus")


def test_filters_and_counts(project, queue):
    alice, bob = operator(project), operator(project)
    svc.claim_handoff(queue["old-high"], user=alice)
    svc.claim_handoff(queue["low"], user=bob)
    svc.cancel_handoff(queue["new-normal"], actor=AGENT)

    def qs(**f):
        return names(queue_page(filter_queue(project, QueueFilters(**f), user=alice))[0], queue)

    assert qs() == ["urgent", "old-high", "old-normal", "low"]
    assert qs(mine=True) == ["old-high"]
    assert qs(unclaimed=True) == ["urgent", "old-normal"]
    assert qs(kind=["question"]) == ["old-normal", "low"]
    assert qs(status=["cancelled"]) == ["new-normal"]
    assert qs(overdue=True) == []
    with pytest.raises(InvalidInput):
        filter_queue(project, QueueFilters(kind=["nope"]))
    counts = queue_counts(project, user=alice)
    assert (counts.active, counts.open, counts.claimed, counts.mine, counts.overdue) == (
        4,
        2,
        2,
        1,
        0,
    )
    assert counts.oldest_wait_since == queue["old-normal"].created_at


def test_other_projects_are_not_counted(project, other_project, queue):
    assert queue_counts(other_project).active == 0
    assert queue_page(filter_queue(other_project, QueueFilters()))[0] == []
