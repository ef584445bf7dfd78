"""Both example workflows, exhaustively: every illegal transition is refused (409, naming the
allowed ones, nothing written) and every legal path reaches a terminal state."""

import pytest
from django.utils import timezone

from tasks_app.errors import InvalidTransition
from tasks_app.models import HistoryKind, Step, StepStatus, TaskHistory
from tasks_app.services.transitions import transition_task
from tasks_app.workflows import BUILTIN_WORKFLOWS, WorkflowSpec
from tests.factories import make_task

from .helpers import TESTER, assert_error, drive, history_count, shortest_paths

WORKFLOWS = sorted(BUILTIN_WORKFLOWS)


def legal_paths(spec: WorkflowSpec) -> list[list[tuple[str, str]]]:
    """Every maximal path from the initial state using each transition at most once (so loops
    are taken once, and the enumeration is finite), as (name, target) pairs."""
    paths: list[list[tuple[str, str]]] = []

    def walk(state: str, used: frozenset, path: list[tuple[str, str]]) -> None:
        options = [t for t in spec.allowed_from(state) if (t.source, t.target) not in used]
        if not options:
            paths.append(path)
            return
        for t in options:
            walk(t.target, used | {(t.source, t.target)}, [*path, (t.name, t.target)])

    walk(spec.initial, frozenset(), [])
    return paths


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_it_refuses_every_illegal_transition(api, project, workflow):
    spec = BUILTIN_WORKFLOWS[workflow]
    refused = 0
    for state, path in shortest_paths(spec).items():
        task = drive(make_task(project, workflow), path)
        assert task.state == state
        before = (task.version, history_count(task))
        for target in spec.states:
            if target in spec.allowed_targets(state):
                continue
            response = api.post(
                f"/tasks/{task.pk}/transitions", {"to": target, "expected_version": task.version}
            )
            error = assert_error(response, 409, "invalid_transition")
            assert error["detail"]["allowed"] == spec.allowed_targets(state)
            assert error["detail"]["state"] == state
            task.refresh_from_db()
            assert (task.version, history_count(task)) == before
            assert task.state == state
            refused += 1
    assert refused == len(spec.states) ** 2 - len(spec.transitions)


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_it_refuses_a_named_transition_from_the_wrong_state(project, workflow):
    spec = BUILTIN_WORKFLOWS[workflow]
    task = make_task(project, workflow)
    foreign = next(t for t in spec.transitions if t.source != spec.initial and t.name)
    if spec.find_transition(spec.initial, name=foreign.name):
        pytest.skip("that name is also legal from the initial state")
    with pytest.raises(InvalidTransition) as caught:
        transition_task(task, transition=foreign.name, actor=TESTER)
    assert caught.value.detail["allowed_transitions"] == [
        {"to": t.target, "name": t.name} for t in spec.allowed_from(spec.initial)
    ]


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_it_reaches_a_terminal_state_on_every_legal_path(project, workflow):
    spec = BUILTIN_WORKFLOWS[workflow]
    paths = legal_paths(spec)
    assert len(paths) >= 4
    for path in paths:
        task = make_task(project, workflow)
        for name, target in path:
            # Alternate between naming the transition and naming the target state.
            if len(name) % 2:
                transition_task(task, transition=name, actor=TESTER)
            else:
                transition_task(task, target, actor=TESTER)
            assert task.state == target
        assert spec.is_terminal(task.state), path
        task.refresh_from_db()
        assert task.finished_at is not None
        assert task.version == 1 + len(path)
        transitions = TaskHistory.objects.filter(task=task, kind=HistoryKind.TRANSITION)
        assert [h.to_state for h in transitions.order_by("id")] == [t for _, t in path]
        # A finished task waits for nothing: its unstarted steps were skipped.
        assert not Step.objects.filter(
            task=task, status__in=[StepStatus.PENDING, StepStatus.WAITING]
        ).exists()


def test_it_runs_a_reopened_step_as_a_new_round(project):
    task = drive(make_task(project, "research_report"), ["drafting", "reviewing"])
    review = Step.objects.get(task=task, key="review")
    review.status, review.attempts = StepStatus.SUCCEEDED, 1
    # What the first round left (Step.start_clean clears all of it; inputs stay).
    review.last_error = {"type": "Timeout", "message": "slow"}
    review.outputs, review.branch, review.inputs = {"verdict": "revise"}, "revise", {"doc": 1}
    review.waiting_on, review.signal_payload = "editor", {"ok": True}
    review.wait_deadline = review.started_at = review.finished_at = timezone.now()
    review.save()
    transition_task(task, transition="revise", actor=TESTER, reason="needs a second pass")
    review.refresh_from_db()
    assert (review.status, review.round, review.attempts) == (StepStatus.PENDING, 2, 0)
    assert (review.last_error, review.outputs, review.branch, review.waiting_on) == (
        None,
        {},
        "",
        "",
    )
    assert review.signal_payload is None and review.wait_deadline is None
    assert review.started_at is None and review.finished_at is None
    assert review.inputs == {"doc": 1}
    reopened = TaskHistory.objects.get(task=task, step_key="review", round=2)
    assert reopened.reason == "reopened by revise"
    assert reopened.from_state == StepStatus.SUCCEEDED
    # Untouched by that transition:
    research = Step.objects.get(task=task, key="research")
    assert research.round == 1
