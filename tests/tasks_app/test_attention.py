"""Tasks needing attention (the overview's tasks card): which tasks wait on a signal and which
are stuck (a step failed for good, waits past its deadline, or has run or waited for its
retry too long without an update), for unfinished tasks of one project only."""

from datetime import timedelta

import time_machine
from django.utils import timezone

from core.actors import Actor
from tasks_app.queries import tasks_needing_attention
from tasks_app.services.steps import update_step
from tasks_app.services.transitions import transition_task
from tests.factories import make_project, make_task

OPS = Actor.system("tests")
STUCK_AFTER = timedelta(minutes=30)


def fail(task, key: str, times: int) -> None:
    for n in range(times):
        update_step(task, key, status="running", actor=OPS)
        update_step(
            task, key, status="failed", actor=OPS, error={"type": "boom", "message": f"try {n}"}
        )


def attention(project, now=None):
    return tasks_needing_attention(project, now=now or timezone.now(), stuck_after=STUCK_AFTER)


def keyed(rows) -> dict[str, tuple[str, str]]:
    return {row.step.task.external_id: (row.step.key, row.reason) for row in rows}


def test_it_sorts_unfinished_tasks_into_waiting_and_stuck_with_the_reason(db):
    project = make_project()
    now = timezone.now()
    waits = make_task(project, external_id="waits")
    update_step(
        waits,
        "review",
        status="waiting",
        actor=OPS,
        waiting_on="review_decision",
        wait_deadline=now + timedelta(days=1),
    )
    no_deadline = make_task(project, external_id="waits-forever")
    update_step(no_deadline, "review", status="waiting", actor=OPS, waiting_on="review_decision")
    with time_machine.travel(now - timedelta(hours=2), tick=False):
        overdue = make_task(project, external_id="overdue")
        update_step(
            overdue,
            "review",
            status="waiting",
            actor=OPS,
            waiting_on="review_decision",
            wait_deadline=now - timedelta(hours=1),
        )
        quiet = make_task(project, external_id="quiet")
        update_step(quiet, "draft", status="running", actor=OPS)
        retry = make_task(project, "research_report", external_id="retry-due")
        fail(retry, "research", 1)
    with time_machine.travel(now - timedelta(minutes=5), tick=False):
        busy = make_task(project, external_id="busy")
        update_step(busy, "draft", status="running", actor=OPS)
        fresh_retry = make_task(project, "research_report", external_id="fresh-retry")
        fail(fresh_retry, "research", 1)
    failed = make_task(project, "research_report", external_id="failed")
    fail(failed, "research", 3)
    # Finished with a failed step: history, not attention.
    abandoned = make_task(project, "research_report", external_id="abandoned")
    fail(abandoned, "research", 3)
    transition_task(abandoned, transition="abandon", actor=OPS)
    # Another project's stuck task is never counted here.
    fail(make_task(make_project(), "research_report", external_id="elsewhere"), "research", 3)

    found = attention(project, now)

    assert keyed(found.waiting) == {
        "waits": ("review", "waiting"),
        "waits-forever": ("review", "waiting"),
    }
    assert keyed(found.stuck) == {
        "overdue": ("review", "overdue"),
        "quiet": ("draft", "no_progress"),
        "retry-due": ("research", "retry_due"),
        "failed": ("research", "failed"),
    }
    # Stuck the longest first: the two-hour-old ones, then the one that failed just now.
    assert [row.step.task.external_id for row in found.stuck][-1] == "failed"
    assert (found.waiting_count, found.stuck_count) == (2, 4)


def test_it_lists_each_task_once_and_at_most_the_limit_but_counts_them_all(db):
    project = make_project()
    for n in range(7):
        task = make_task(project, external_id=f"t{n}")
        # Two waiting steps in one task: the task is listed and counted once.
        for key in ("review", "publish"):
            update_step(task, key, status="waiting", actor=OPS, waiting_on="go")
    found = tasks_needing_attention(project, now=timezone.now(), stuck_after=STUCK_AFTER, limit=5)
    assert len(found.waiting) == 5
    assert len({row.step.task_id for row in found.waiting}) == 5
    assert found.waiting_count == 7 and found.stuck_count == 0 and found.stuck == []


def test_a_wait_past_its_deadline_moves_from_waiting_to_stuck_by_the_clock(db):
    project = make_project()
    now = timezone.now()
    task = make_task(project, external_id="soon")
    update_step(
        task,
        "review",
        status="waiting",
        actor=OPS,
        waiting_on="review_decision",
        wait_deadline=now + timedelta(minutes=10),
    )
    assert keyed(attention(project, now).waiting) == {"soon": ("review", "waiting")}
    later = attention(project, now + timedelta(minutes=11))
    assert later.waiting == [] and keyed(later.stuck) == {"soon": ("review", "overdue")}
