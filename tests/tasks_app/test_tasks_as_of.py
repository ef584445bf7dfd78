"""tasks_app.queries.tasks_as_of: a task as it was at a time, rebuilt from its history.

The task is driven through the services (attempts, a failure with a retry, a wait with a
deadline resolved by a signal, a loop reopening steps, a terminal state skipping the rest). At
checkpoints between the steps the live rows are recorded; the rebuild at each checkpoint's time
must give exactly those values.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.actors import Actor
from tasks_app.models import Step, Task
from tasks_app.queries import tasks_as_of, tasks_for_session
from tasks_app.services.signals import deliver_signal
from tasks_app.services.steps import update_step
from tasks_app.services.transitions import transition_task
from tests.factories import make_project, make_session, make_task

pytestmark = pytest.mark.django_db

AGENT = Actor.system("agent")
STEP_FIELDS = (
    "status",
    "round",
    "attempts",
    "last_error",
    "inputs",
    "outputs",
    "branch",
    "waiting_on",
    "wait_deadline",
    "signal_payload",
    "agent_id",
    "started_at",
    "finished_at",
)


def _live(task: Task) -> dict:
    task = Task.objects.get(pk=task.pk)
    steps = {
        step.key: {name: getattr(step, name) for name in STEP_FIELDS}
        for step in Step.objects.filter(task=task)
    }
    return {
        "state": task.state,
        "version": task.version,
        "finished_at": task.finished_at,
        "steps": steps,
    }


def _rebuilt(task: Task, when) -> dict:
    (past,) = tasks_as_of(list(tasks_for_session_or_task(task)), when)
    assert past.existed
    steps = {
        step.key: {name: getattr(step, name) for name in STEP_FIELDS}
        for step in past.task.steps.all()
    }
    return {
        "state": past.task.state,
        "version": past.task.version,
        "finished_at": past.task.finished_at,
        "steps": steps,
    }


def tasks_for_session_or_task(task: Task):
    """The task loaded as the session page loads it (workflow joined, steps prefetched)."""
    session = task.sessions.get()
    return tasks_for_session(session)


def test_it_rebuilds_state_version_and_every_step_at_each_moment():
    project = make_project()
    session = make_session(project)
    before_creation = timezone.now()
    task = make_task(project, session_ids=[str(session.pk)])
    checkpoints = [(timezone.now(), _live(task))]

    def checkpoint():
        checkpoints.append((timezone.now(), _live(task)))

    update_step(
        task, "draft", status="running", actor=AGENT, inputs={"outline": "x"}, agent_name="writer"
    )
    checkpoint()
    update_step(
        task, "draft", status="failed", actor=AGENT, error={"type": "Timeout", "message": "slow"}
    )
    checkpoint()  # attempt 1 failed: pending, a retry is due
    update_step(task, "draft", status="running", actor=AGENT)
    update_step(
        task, "draft", status="succeeded", actor=AGENT, outputs={"doc": "v1"}, branch="main"
    )
    transition_task(task, "sent_for_review", actor=AGENT)
    update_step(task, "review", status="running", actor=AGENT)
    update_step(
        task,
        "review",
        status="waiting",
        actor=AGENT,
        waiting_on="review_decision",
        wait_deadline=timezone.now() + timedelta(days=1),
    )
    checkpoint()  # waiting on a signal, with a deadline
    deliver_signal(task, "review_decision", actor=AGENT, payload={"verdict": "changes"})
    checkpoint()  # the signal resolved the wait: succeeded with the payload as outputs
    transition_task(task, "changes_requested", actor=AGENT)
    transition_task(task, "sent_for_review", actor=AGENT)
    checkpoint()  # resubmit reopened review and revise: round 2, clean
    transition_task(task, "approved", actor=AGENT)
    transition_task(task, "published", actor=AGENT)
    checkpoint()  # terminal: the unfinished steps were skipped

    assert len({c[1]["version"] for c in checkpoints}) == len(checkpoints)
    for when, live in checkpoints:
        assert _rebuilt(task, when) == live, when
    # Between two checkpoints the earlier one still holds (nothing of the later rows leaks).
    middle = checkpoints[3][0] + (checkpoints[4][0] - checkpoints[3][0]) / 1000
    assert _rebuilt(task, middle)["steps"]["review"]["status"] == "waiting"
    # Before its creation the task did not exist; the live task is handed back untouched.
    (past,) = tasks_as_of(list(tasks_for_session_or_task(task)), before_creation)
    assert not past.existed
    assert past.task.state == "published"


def test_it_reads_every_task_in_one_query(django_assert_num_queries):
    project = make_project()
    session = make_session(project)
    for _ in range(3):
        task = make_task(project, session_ids=[str(session.pk)])
        transition_task(task, "sent_for_review", actor=AGENT)
    tasks = list(tasks_for_session(session))
    with django_assert_num_queries(1):
        rebuilt = tasks_as_of(tasks, timezone.now())
        states = [
            (p.existed, p.task.state, [s.status for s in p.task.steps.all()]) for p in rebuilt
        ]
    assert states == [(True, "sent_for_review", ["pending"] * 4)] * 3
    assert tasks_as_of([], timezone.now()) == []
