"""Creating a task is idempotent by `external_id` (POST /tasks: "the task with this external_id",
200), also when several OS processes create the same one at the same moment (tests.multiproc:
spawned interpreters, each with its own connection, released by one barrier).

A racer that misses the existing row in its look-up inserts, and the unique constraint on
(project, external_id) refuses all but one insert: the losers answer 200 with the winner's task
and no signal token (tasks_app.services.tasks.create_task), never an error or a second task.
Over ROUNDS rounds a race that never reaches the insert is unlikely (see
tests/sessions_app/test_concurrent_open.py); the last test makes it certain: the task is created
in a transaction held open until every racer waits on its row (tests.multiproc.run_behind_lock).
"""

import pytest

from core.actors import Actor
from core.models import AuditEntry
from tasks_app.models import HistoryKind, Step, Task, TaskHistory
from tasks_app.services.tasks import create_task
from tasks_app.services.workflows import ensure_builtin_workflows
from tests.factories import make_api_key
from tests.multiproc import post_each_at_once, post_in_rounds, run_behind_lock

pytestmark = [pytest.mark.slow]

PROCESSES = 4
ROUNDS = 8


def creating(external_id: str) -> dict[str, str]:
    return {"workflow": "research_report", "external_id": external_id}


def answered(answer: tuple[int, dict]) -> tuple[int, object, bool]:
    """(status, task id or the body without one, whether a signal token came back)."""
    status, body = answer
    return status, body.get("id", body), "signal_token" in body


def test_processes_creating_one_external_id_at_once_share_one_task(
    transactional_db, project, racers
):
    raw_key = make_api_key(project)[1]
    external_ids = [f"job-{n}" for n in range(ROUNDS)]

    rounds = post_in_rounds(racers, raw_key, "/tasks", [creating(e) for e in external_ids])

    for external_id, answers in zip(external_ids, rounds, strict=True):
        answers = sorted(map(answered, answers), key=lambda a: (a[0], a[2]))
        statuses = [(status, token) for status, _, token in answers]
        assert statuses == [(200, False)] * (PROCESSES - 1) + [(201, True)], (external_id, answers)
        (task,) = Task.objects.filter(project=project, external_id=external_id)
        assert {task_id for _, task_id, _ in answers} == {str(task.pk)}
        created = TaskHistory.objects.filter(task=task, kind=HistoryKind.CREATED)
        assert created.count() == 1
        assert AuditEntry.objects.filter(action="task.create", target_id=str(task.pk)).count() == 1
        # Only the winner's steps: one set, as the workflow declares them.
        keys = list(
            Step.objects.filter(task=task).order_by("position").values_list("key", flat=True)
        )
        assert len(keys) == len(set(keys)) > 0
    assert Task.objects.filter(project=project).count() == ROUNDS


def test_processes_that_all_miss_an_uncommitted_task_answer_with_it_once_committed(
    transactional_db, project, racers
):
    key, raw_key = make_api_key(project)
    # Registered beforehand, so that the racers wait on the task's row, not on the workflows'.
    ensure_builtin_workflows()

    def create_held() -> Task:
        created = create_task(
            project, workflow="research_report", actor=Actor.for_key(key), external_id="job-held"
        )
        assert created.created
        return created.task

    held, per_process = run_behind_lock(
        racers,
        post_each_at_once,
        [(raw_key, "/tasks", [creating("job-held")])] * PROCESSES,
        hold=create_held,
        inserting_into=Task,
    )

    answers = [answered(answer) for (answer,) in per_process]
    assert answers == [(200, str(held.pk), False)] * PROCESSES
    assert list(Task.objects.filter(project=project)) == [held]
    assert TaskHistory.objects.filter(task=held, kind=HistoryKind.CREATED).count() == 1
    assert AuditEntry.objects.filter(action="task.create").count() == 1
    keys = list(Step.objects.filter(task=held).values_list("key", flat=True))
    assert len(keys) == len(set(keys)) > 0
    assert Step.objects.count() == len(keys)
