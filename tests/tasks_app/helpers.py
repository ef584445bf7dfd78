"""Shared assertions and drivers for the task-store tests."""

from collections import deque
from typing import Any

from core.actors import Actor
from tasks_app.models import Task, TaskHistory
from tasks_app.services.transitions import transition_task
from tasks_app.workflows import WorkflowSpec

TESTER = Actor.system("tests")


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """The response is the API's one error shape, with this status (and code)."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "detail"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


def history_count(task: Task | str) -> int:
    task_id = task.pk if isinstance(task, Task) else task
    return TaskHistory.objects.filter(task_id=task_id).count()


def shortest_paths(spec: WorkflowSpec) -> dict[str, list[str]]:
    """For each reachable state, the targets of a shortest legal path from the initial state."""
    paths: dict[str, list[str]] = {spec.initial: []}
    queue = deque([spec.initial])
    while queue:
        state = queue.popleft()
        for transition in spec.allowed_from(state):
            if transition.target not in paths:
                paths[transition.target] = [*paths[state], transition.target]
                queue.append(transition.target)
    return paths


def drive(task: Task, targets: list[str]) -> Task:
    for target in targets:
        transition_task(task, target, actor=TESTER)
    return task
