"""POST /tasks/{id}/transitions: validated moves, optimistic concurrency, history and audit."""

from core.models import AuditEntry
from tasks_app.models import HistoryKind, Step, StepStatus, TaskHistory
from tests.factories import make_task

from .helpers import assert_error, drive, history_count


def test_it_moves_the_task_and_records_who_why_and_from_where(api, project, api_key):
    task = make_task(project)
    response = api.post(
        f"/tasks/{task.pk}/transitions",
        {"to": "sent_for_review", "expected_version": 1, "reason": "ready"},
    )
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "sent_for_review" and body["version"] == 2
    assert {t["to"] for t in body["allowed_transitions"]} == {
        "changes_requested",
        "approved",
        "rejected",
    }
    task.refresh_from_db()
    assert (task.state, task.version, task.finished_at) == ("sent_for_review", 2, None)
    entry = TaskHistory.objects.get(task=task, kind=HistoryKind.TRANSITION)
    assert (entry.actor, entry.from_state, entry.to_state, entry.reason) == (
        f"key:{api_key[0].prefix}",
        "draft_created",
        "sent_for_review",
        "ready",
    )
    assert entry.data == {"transition": "submit"} and entry.task_version == 2
    audit = AuditEntry.objects.get(action="task.transition", target_id=str(task.pk))
    assert audit.detail["to"] == "sent_for_review" and audit.api_key == api_key[0]


def test_it_accepts_a_named_transition(api, project):
    task = make_task(project)
    response = api.post(f"/tasks/{task.pk}/transitions", {"transition": "submit"})
    assert response.json()["state"] == "sent_for_review"


def test_it_refuses_a_stale_expected_version_writing_nothing(api, project):
    task = drive(make_task(project), ["sent_for_review"])
    error = assert_error(
        api.post(f"/tasks/{task.pk}/transitions", {"to": "approved", "expected_version": 1}),
        409,
        "version_mismatch",
    )
    assert error["detail"] == {"expected_version": 1, "version": 2, "state": "sent_for_review"}
    task.refresh_from_db()
    assert (task.state, task.version, history_count(task)) == ("sent_for_review", 2, 2)


def test_it_refuses_an_illegal_move_naming_the_allowed_ones(api, project):
    task = make_task(project)
    error = assert_error(
        api.post(f"/tasks/{task.pk}/transitions", {"to": "published"}), 409, "invalid_transition"
    )
    assert error["detail"]["allowed"] == ["sent_for_review"]
    assert error["detail"]["allowed_transitions"] == [{"to": "sent_for_review", "name": "submit"}]
    assert "sent_for_review" in error["message"]


def test_it_refuses_any_move_out_of_a_terminal_state(api, project):
    task = drive(make_task(project), ["sent_for_review", "rejected"])
    error = assert_error(
        api.post(f"/tasks/{task.pk}/transitions", {"to": "sent_for_review"}),
        409,
        "invalid_transition",
    )
    assert error["detail"]["allowed"] == []
    assert "terminal" in error["message"]


def test_it_refuses_bad_input_with_422(api, project):
    task = make_task(project)
    assert_error(api.post(f"/tasks/{task.pk}/transitions", {}), 422, "invalid_input")
    error = assert_error(
        api.post(f"/tasks/{task.pk}/transitions", {"to": "mars"}), 422, "invalid_input"
    )
    assert "draft_created" in error["detail"]["states"]
    assert_error(
        api.post(f"/tasks/{task.pk}/transitions", {"to": "sent_for_review", "expected_version": 0}),
        422,
    )
    assert history_count(task) == 1


def test_it_hides_another_projects_task(other_api, project):
    task = make_task(project)
    assert_error(
        other_api.post(f"/tasks/{task.pk}/transitions", {"to": "sent_for_review"}), 404, "not_found"
    )
    task.refresh_from_db()
    assert task.state == "draft_created"


def test_it_refuses_the_wrong_method(api, project):
    task = make_task(project)
    assert api.get(f"/tasks/{task.pk}/transitions").status_code == 405


def test_it_finishes_the_task_and_skips_what_was_still_to_do(api, project):
    task = drive(make_task(project), ["sent_for_review"])
    api.put(
        f"/tasks/{task.pk}/steps/review",
        {"status": "waiting", "waiting_on": {"signal": "review_decision"}},
    )
    api.post(f"/tasks/{task.pk}/transitions", {"to": "rejected", "reason": "off-topic"})
    task.refresh_from_db()
    assert task.finished_at is not None
    statuses = dict(Step.objects.filter(task=task).values_list("key", "status"))
    assert statuses == {
        "draft": "skipped",
        "review": "skipped",
        "revise": "skipped",
        "publish": "skipped",
    }
    skipped = TaskHistory.objects.get(task=task, step_key="review", to_state=StepStatus.SKIPPED)
    assert skipped.from_state == "waiting" and skipped.reason == "task reached rejected"
    assert Step.objects.get(task=task, key="review").waiting_on == ""


def test_it_lets_the_review_loop_run_the_review_again(api, project):
    task = drive(make_task(project), ["sent_for_review"])
    url = f"/tasks/{task.pk}/steps/review"
    api.put(url, {"status": "succeeded", "outputs": {"decision": "changes"}, "branch": "changes"})
    api.post(f"/tasks/{task.pk}/transitions", {"to": "changes_requested"})
    api.post(f"/tasks/{task.pk}/transitions", {"transition": "resubmit"})
    second = api.put(url, {"status": "succeeded", "attempt": 1, "outputs": {"decision": "ok"}})
    assert second.status_code == 200 and not second.json()["replayed"]
    step = second.json()["step"]
    assert (step["round"], step["attempts"], step["outputs"]) == (2, 1, {"decision": "ok"})
    rounds = TaskHistory.objects.filter(task=task, step_key="review", to_state="succeeded")
    assert [(h.round, h.data["outputs"]) for h in rounds] == [
        (1, {"decision": "changes"}),
        (2, {"decision": "ok"}),
    ]
