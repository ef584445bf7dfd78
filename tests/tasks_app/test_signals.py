"""Waiting on signals, delivering them (with an API key or the task's signal token), and
deadlines that pass (the job function under a frozen clock)."""

from datetime import timedelta

import time_machine
from django.utils import timezone

from tasks_app.models import HistoryKind, Step, StepStatus, TaskHistory, TaskSignal
from tasks_app.tasks import expire_step_deadlines
from tests.conftest import ApiClient
from tests.factories import make_task

from .helpers import assert_error, drive, history_count

DECISION = {"decision": "approve", "reviewer": "ana", "comments": ["tight", "clear"]}


def created_with_token(api, workflow="document_approval"):
    body = api.post("/tasks", {"workflow": workflow}).json()
    return body["id"], body["signal_token"]


def wait_for_review(api, task_id, **wait):
    response = api.put(
        f"/tasks/{task_id}/steps/review",
        {
            "status": "waiting",
            "attempt": 1,
            "waiting_on": {"signal": "review_decision", **wait},
        },
    )
    assert response.status_code == 200, response.content
    return response.json()["step"]


def test_it_resolves_a_waiting_step_with_the_signal_token_and_no_api_key(api, project):
    task_id, token = created_with_token(api)
    step = wait_for_review(api, task_id, timeout_seconds=3600)
    assert step["status"] == "waiting"
    assert step["waiting_on"]["signal"] == "review_decision"

    webhook = ApiClient(None)
    response = webhook.post(
        f"/tasks/{task_id}/signals/review_decision",
        {"payload": DECISION},
        HTTP_X_SIGNAL_TOKEN=token,
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["resolved_steps"] == ["review"]
    assert body["task"]["version"] == 3
    assert "params" not in body["task"]  # a token holder learns nothing beyond the signal

    review = Step.objects.get(task_id=task_id, key="review")
    assert review.status == StepStatus.SUCCEEDED
    assert review.outputs == DECISION and review.signal_payload == DECISION
    assert (review.waiting_on, review.wait_deadline) == ("", None)
    signal = TaskSignal.objects.get(task_id=task_id)
    assert signal.consumed_by == ["review"] and signal.actor == "signal-token"
    recorded = TaskHistory.objects.get(task_id=task_id, kind=HistoryKind.SIGNAL)
    assert recorded.data["payload"] == DECISION and recorded.data["resolved"] == ["review"]
    resolved = TaskHistory.objects.get(task_id=task_id, step_key="review", to_state="succeeded")
    assert (resolved.from_state, resolved.attempt, resolved.reason) == (
        "waiting",
        1,
        "signal review_decision",
    )


def test_it_accepts_the_token_as_a_bearer_or_a_query_parameter(api):
    task_id, token = created_with_token(api)
    wait_for_review(api, task_id)
    bearer = ApiClient(token).post(
        f"/tasks/{task_id}/signals/review_decision", {"payload": {"via": "bearer"}}
    )
    assert bearer.status_code == 200
    query = ApiClient(None).post(
        f"/tasks/{task_id}/signals/other_thing?signal_token={token}", {"payload": {"via": "q"}}
    )
    assert query.status_code == 202  # stored: nothing waits on other_thing yet


def test_it_refuses_a_missing_or_wrong_token(api, project):
    task_id, token = created_with_token(api)
    nobody = ApiClient(None)
    assert_error(nobody.post(f"/tasks/{task_id}/signals/review_decision"), 401, "unauthorized")
    assert_error(
        nobody.post(
            f"/tasks/{task_id}/signals/review_decision", HTTP_X_SIGNAL_TOKEN=token[:-2] + "xx"
        ),
        401,
        "unauthorized",
    )
    assert not TaskSignal.objects.exists()


def test_it_opens_nothing_but_its_own_tasks_signals_with_a_token(api, project):
    task_id, token = created_with_token(api)
    other_id, _ = created_with_token(api)
    holder = ApiClient(token)
    assert_error(holder.post(f"/tasks/{other_id}/signals/review_decision"), 404, "not_found")
    assert_error(holder.get(f"/tasks/{task_id}"), 401, "unauthorized")
    assert_error(holder.put(f"/tasks/{task_id}/steps/review", {"status": "running"}), 401)
    assert_error(holder.post(f"/tasks/{task_id}/transitions", {"to": "sent_for_review"}), 401)
    assert not TaskSignal.objects.filter(task_id=other_id).exists()


def test_it_delivers_with_an_api_key_and_hides_other_projects_tasks(api, other_api, project):
    task = make_task(project)
    wait_for_review(api, task.pk)
    assert_error(other_api.post(f"/tasks/{task.pk}/signals/review_decision"), 404, "not_found")
    assert Step.objects.get(task=task, key="review").status == "waiting"
    response = api.post(f"/tasks/{task.pk}/signals/review_decision", {"payload": DECISION})
    assert response.status_code == 200
    assert TaskSignal.objects.get(task=task).actor.startswith("key:")


def test_it_keeps_a_signal_that_arrives_before_the_wait(api, project):
    task = make_task(project)
    early = api.post(f"/tasks/{task.pk}/signals/review_decision", {"payload": DECISION})
    assert early.status_code == 202
    assert early.json()["resolved_steps"] == [] and not early.json()["signal"]["consumed"]
    step = wait_for_review(api, task.pk, timeout_seconds=60)
    assert step["status"] == "succeeded" and step["outputs"] == DECISION
    assert TaskSignal.objects.get(task=task).consumed_by == ["review"]


def test_it_replays_a_signal_with_the_same_idempotency_key(api, project):
    task = make_task(project)
    wait_for_review(api, task.pk)
    url = f"/tasks/{task.pk}/signals/review_decision"
    first = api.post(url, {"payload": DECISION}, HTTP_IDEMPOTENCY_KEY="hook-1")
    task.refresh_from_db()
    before = (task.version, history_count(task))
    again = api.post(url, {"payload": DECISION}, HTTP_IDEMPOTENCY_KEY="hook-1")
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["signal"]["id"] == first.json()["signal"]["id"]
    assert again.json()["resolved_steps"] == ["review"]
    task.refresh_from_db()
    assert (task.version, history_count(task)) == before
    assert TaskSignal.objects.filter(task=task).count() == 1


def test_it_fails_the_waiting_attempt_when_the_signal_reports_an_error(api, project):
    task = make_task(project)
    wait_for_review(api, task.pk)
    error = {"type": "reviewer_unavailable", "message": "out of office", "detail": {}}
    api.post(f"/tasks/{task.pk}/signals/review_decision", {"error": error})
    review = Step.objects.get(task=task, key="review")
    assert (review.status, review.attempts, review.last_error) == ("pending", 1, error)


def test_it_refuses_bad_signal_input(api, project):
    task = make_task(project)
    assert_error(api.post(f"/tasks/{task.pk}/signals/Bad-Name"), 422, "invalid_input")
    assert_error(
        api.post(f"/tasks/{task.pk}/signals/ok", {"payload": [1, 2]}), 422, "invalid_input"
    )
    assert_error(api.post(f"/tasks/{task.pk}/signals/ok", {"error": {"message": "x"}}), 422)
    assert not TaskSignal.objects.exists()


def test_it_times_out_a_wait_whose_deadline_passed_with_a_frozen_clock(api, project):
    task = make_task(project)
    other = drive(make_task(project), ["sent_for_review"])
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        wait_for_review(api, task.pk, timeout_seconds=600)
        wait_for_review(api, other.pk, timeout_seconds=3600)
    with time_machine.travel(start + timedelta(seconds=599), tick=False):
        assert expire_step_deadlines() == {"tasks": 0, "steps": 0}
    assert Step.objects.get(task=task, key="review").status == "waiting"

    with time_machine.travel(start + timedelta(seconds=601), tick=False):
        assert expire_step_deadlines() == {"tasks": 1, "steps": 1}
        assert expire_step_deadlines() == {"tasks": 0, "steps": 0}  # a re-run finds nothing due

    review = Step.objects.get(task=task, key="review")
    # review allows 2 attempts: the timed-out attempt 1 leaves a retry due.
    assert (review.status, review.attempts, review.waiting_on) == ("pending", 1, "")
    assert review.last_error["type"] == "timeout"
    assert review.last_error["detail"]["signal"] == "review_decision"
    entry = TaskHistory.objects.get(task=task, step_key="review", to_state="failed")
    assert entry.actor == "deadline" and entry.error["type"] == "timeout"
    assert entry.created_at == start + timedelta(seconds=601)
    assert Step.objects.get(task=other, key="review").status == "waiting"


def test_it_fails_the_step_for_good_when_the_last_attempt_times_out(api, project):
    task = make_task(project)
    url = f"/tasks/{task.pk}/steps/review"
    api.put(url, {"status": "running", "attempt": 1})
    api.put(url, {"status": "failed", "attempt": 1, "error": {"type": "x", "message": "y"}})
    deadline = timezone.now() + timedelta(minutes=5)
    api.put(
        url,
        {
            "status": "waiting",
            "attempt": 2,
            "waiting_on": {"signal": "review_decision", "deadline": deadline.isoformat()},
        },
    )
    with time_machine.travel(deadline + timedelta(seconds=1), tick=False):
        expire_step_deadlines()
    review = Step.objects.get(task=task, key="review")
    assert (review.status, review.attempts) == ("failed", 2)
    assert review.last_error["type"] == "timeout"
    body = api.get(f"/tasks/{task.pk}").json()
    assert body["failed_steps"][0]["error"]["type"] == "timeout"
    # A signal arriving after the timeout resolves nothing and is kept for the record.
    late = api.post(f"/tasks/{task.pk}/signals/review_decision", {"payload": DECISION})
    assert late.status_code == 202
    assert Step.objects.get(task=task, key="review").status == "failed"


def test_it_expires_in_bounded_batches(api, project):
    tasks = [make_task(project) for _ in range(5)]
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        for task in tasks:
            wait_for_review(api, task.pk, timeout_seconds=1)
    with time_machine.travel(start + timedelta(seconds=5), tick=False):
        assert expire_step_deadlines(limit=2, max_batches=2) == {"tasks": 4, "steps": 4}
        assert expire_step_deadlines(limit=2) == {"tasks": 1, "steps": 1}
    assert not Step.objects.filter(status="waiting").exists()
