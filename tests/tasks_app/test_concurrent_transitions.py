"""Two OS processes transition the same task with the same expected_version at the same moment:
exactly one wins, the other gets 409, and the history shows one transition."""

import pytest

from tasks_app.models import HistoryKind, TaskHistory
from tests.factories import make_api_key, make_task
from tests.multiproc import barrier, run_in_processes

from .helpers import drive

pytestmark = [pytest.mark.slow]

ROUNDS = 5


def transition_each_at_once(raw_key: str, task_ids: list[str], to: str) -> list[tuple[int, str]]:
    """In a child process: for each task, wait for the other process, then transition it."""
    from tests.conftest import ApiClient

    client = ApiClient(raw_key)
    results = []
    for task_id in task_ids:
        barrier().wait()
        response = client.post(
            f"/tasks/{task_id}/transitions", {"to": to, "expected_version": 3, "reason": f"to {to}"}
        )
        body = response.json()
        results.append(
            (response.status_code, body["error"]["code"] if "error" in body else body["state"])
        )
    return results


def test_it_lets_exactly_one_of_two_processes_win_each_race(transactional_db, project):
    raw_key = make_api_key(project)[1]
    tasks = [
        drive(make_task(project, "research_report"), ["drafting", "reviewing"])
        for _ in range(ROUNDS)
    ]
    assert {t.version for t in tasks} == {3}
    task_ids = [str(t.pk) for t in tasks]

    # Both moves are legal from `reviewing`; only the expected_version can stop one of them.
    approve, revise = run_in_processes(
        transition_each_at_once,
        [(raw_key, task_ids, "publishing"), (raw_key, task_ids, "drafting")],
    )
    for task, a, b in zip(tasks, approve, revise, strict=True):
        outcomes = sorted([a, b])
        assert outcomes[0][0] == 200 and outcomes[1] == (409, "version_mismatch"), outcomes
        winner_state = outcomes[0][1]
        task.refresh_from_db()
        assert (task.state, task.version) == (winner_state, 4)
        moves = TaskHistory.objects.filter(
            task=task, kind=HistoryKind.TRANSITION, from_state="reviewing"
        )
        assert [(m.to_state, m.reason) for m in moves] == [(winner_state, f"to {winner_state}")]
