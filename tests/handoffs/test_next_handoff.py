"""The next waiting handoff (the workspace's and the queue's "n", issue 26 §4): the first open
one after the current in the queue's order (priority, then wait), from the top when none is
after it, never the current one, never one someone holds or that is over."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from handoffs_app.queries import next_waiting_handoff
from handoffs_app.services import handoffs as svc
from tests.factories import make_project, make_session

from .helpers import AGENT, ask, operator


@pytest.fixture
def queue(project):
    """Five handoffs asked a minute apart; queue order: urgent, high, normal-1, normal-2, low."""
    made = {}
    start = timezone.now() - timedelta(hours=1)
    with time_machine.travel(start, tick=False) as clock:
        for name, priority in [
            ("normal-1", "normal"),
            ("high", "high"),
            ("normal-2", "normal"),
            ("urgent", "urgent"),
            ("low", "low"),
        ]:
            made[name] = ask(make_session(project), kind="question", priority=priority)
            clock.shift(timedelta(minutes=1))
    return made


def name_of(handoff, made):
    if handoff is None:
        return None
    return next(name for name, h in made.items() if h.pk == handoff.pk)


def test_it_starts_at_the_top_of_the_queue(project, queue):
    assert name_of(next_waiting_handoff(project), queue) == "urgent"


def test_it_follows_the_queues_order_after_the_current_one(project, queue):
    walked = []
    current = queue["urgent"]
    for _ in range(4):
        current = next_waiting_handoff(project, after=current)
        walked.append(name_of(current, queue))
    assert walked == ["high", "normal-1", "normal-2", "low"]


def test_it_skips_held_and_finished_handoffs(project, queue):
    svc.claim_handoff(queue["high"], user=operator(project))
    svc.cancel_handoff(queue["normal-1"], actor=AGENT)
    assert name_of(next_waiting_handoff(project, after=queue["urgent"]), queue) == "normal-2"


def test_it_wraps_to_the_top_and_never_returns_the_current_one(project, queue):
    assert name_of(next_waiting_handoff(project, after=queue["low"]), queue) == "urgent"
    for name in ("urgent", "high", "normal-1", "normal-2"):
        svc.cancel_handoff(queue[name], actor=AGENT)
    assert next_waiting_handoff(project, after=queue["low"]) is None


def test_it_stays_in_the_project(project, queue):
    other = make_project()
    assert next_waiting_handoff(other) is None
    elsewhere = ask(make_session(other), kind="question")
    assert next_waiting_handoff(project, after=queue["low"]).project_id == project.pk
    assert next_waiting_handoff(other, after=elsewhere) is None
