"""POST /tasks, GET /tasks/{id}, GET /tasks (filters, cursor pagination)."""

import uuid

from core.models import AuditEntry
from tasks_app.models import HistoryKind, Step, StepStatus, Task, TaskHistory, TaskSession
from tasks_app.services.tasks import hash_signal_token
from tests.factories import make_session, make_task

from .helpers import assert_error, drive


def test_it_creates_a_task_in_the_initial_state_with_its_declared_steps(api, project, api_key):
    session = make_session(project)
    response = api.post(
        "/tasks",
        {
            "workflow": "document_approval",
            "params": {"document_id": "doc-42", "reviewers": ["ana"]},
            "metadata": {"source": "crm"},
            "session_ids": [str(session.pk)],
        },
    )
    assert response.status_code == 201
    body = response.json()
    task = Task.objects.get(pk=body["id"])
    assert task.project == project
    assert (task.workflow.name, task.workflow.version) == ("document_approval", 1)
    assert task.state == "draft_created" and task.version == 1
    assert task.params == {"document_id": "doc-42", "reviewers": ["ana"]}
    assert task.metadata == {"source": "crm"}
    assert task.initiated_by == f"key:{api_key[0].prefix}"
    assert task.initiated_by_key == api_key[0]
    assert [(s.key, s.status, s.max_attempts) for s in Step.objects.filter(task=task)] == [
        ("draft", "pending", 3),
        ("review", "pending", 2),
        ("revise", "pending", 3),
        ("publish", "pending", 5),
    ]
    assert list(TaskSession.objects.filter(task=task).values_list("session_id", flat=True)) == [
        session.pk
    ]
    created = TaskHistory.objects.get(task=task, kind=HistoryKind.CREATED)
    assert created.to_state == "draft_created"
    assert AuditEntry.objects.filter(action="task.create", target_id=str(task.pk)).exists()
    # The signal token is shown once, stored only as its hash.
    assert body["signal_token"].startswith("sbt_")
    assert task.signal_token_hash == hash_signal_token(body["signal_token"])
    assert body["workflow"] == {"name": "document_approval", "version": 1}
    assert body["allowed_transitions"] == [{"to": "sent_for_review", "name": "submit"}]
    assert body["session_ids"] == [str(session.pk)]
    assert [s["status"] for s in body["steps"]] == ["pending"] * 4


def test_it_returns_the_existing_task_for_a_repeated_external_id(api, project):
    first = api.post("/tasks", {"workflow": "research_report", "external_id": "job-7"})
    again = api.post("/tasks", {"workflow": "research_report", "external_id": "job-7"})
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert "signal_token" not in again.json()
    assert Task.objects.filter(project=project, external_id="job-7").count() == 1


def test_it_refuses_an_unknown_workflow_naming_the_available_ones(api, project):
    error = assert_error(api.post("/tasks", {"workflow": "nope"}), 422, "unknown_workflow")
    assert {"document_approval", "research_report"} <= set(error["detail"]["available"])
    error = assert_error(
        api.post("/tasks", {"workflow": "document_approval", "workflow_version": 9}),
        422,
        "unknown_workflow",
    )
    assert not Task.objects.filter(project=project).exists()


def test_it_refuses_malformed_input_writing_nothing(api, project):
    assert_error(api.post("/tasks", {}), 422, "invalid_input")
    assert_error(api.post("/tasks", {"workflow": "document_approval", "params": [1]}), 422)
    assert_error(
        api.post("/tasks", {"workflow": "document_approval", "session_ids": ["not-a-uuid"]}), 422
    )
    assert not Task.objects.filter(project=project).exists()


def test_it_refuses_another_projects_session_writing_nothing(api, project, other_project):
    foreign = make_session(other_project)
    error = assert_error(
        api.post("/tasks", {"workflow": "document_approval", "session_ids": [str(foreign.pk)]}),
        404,
        "not_found",
    )
    assert error["detail"] == {"session_ids": [str(foreign.pk)]}
    assert not Task.objects.filter(project=project).exists()


def test_it_needs_an_api_key(project):
    from tests.conftest import ApiClient

    assert_error(
        ApiClient(None).post("/tasks", {"workflow": "document_approval"}), 401, "unauthorized"
    )
    assert_error(ApiClient("sb_nope_nope").get("/tasks"), 401, "unauthorized")


def test_it_reads_a_task_with_steps_and_recent_history(api, project):
    task = drive(make_task(project, "research_report"), ["drafting", "reviewing"])
    body = api.get(f"/tasks/{task.pk}").json()
    assert body["state"] == "reviewing" and body["version"] == 3
    assert [s["key"] for s in body["steps"]] == ["research", "draft", "review", "publish"]
    assert [(h["kind"], h["from"], h["to"]) for h in body["history"]] == [
        ("created", None, "researching"),
        ("transition", "researching", "drafting"),
        ("transition", "drafting", "reviewing"),
    ]
    assert body["failed_steps"] == [] and body["waiting"] == []
    assert "signal_token" not in body
    limited = api.get(f"/tasks/{task.pk}", {"history_limit": 1}).json()
    assert [h["to"] for h in limited["history"]] == ["reviewing"]


def test_it_hides_another_projects_task(api, other_api, project):
    task = make_task(project)
    assert_error(other_api.get(f"/tasks/{task.pk}"), 404, "not_found")
    assert_error(other_api.get(f"/tasks/{task.pk}/history"), 404, "not_found")
    assert_error(other_api.get(f"/tasks/{task.pk}/steps/draft"), 404, "not_found")
    assert_error(api.get(f"/tasks/{uuid.uuid4()}"), 404, "not_found")
    assert other_api.get("/tasks").json()["tasks"] == []


def test_it_lists_tasks_newest_first_with_a_cursor(api, project, other_project):
    tasks = [make_task(project) for _ in range(5)]
    make_task(other_project)
    first = api.get("/tasks", {"limit": 2}).json()
    assert [t["id"] for t in first["tasks"]] == [str(t.pk) for t in reversed(tasks[-2:])]
    seen = [t["id"] for t in first["tasks"]]
    cursor = first["next_cursor"]
    while cursor:
        page = api.get("/tasks", {"limit": 2, "cursor": cursor}).json()
        seen += [t["id"] for t in page["tasks"]]
        cursor = page["next_cursor"]
    assert seen == [str(t.pk) for t in reversed(tasks)]
    assert_error(api.get("/tasks", {"cursor": "garbage!"}), 422, "invalid_input")
    assert_error(api.get("/tasks", {"limit": 0}), 422, "invalid_input")


def test_it_filters_tasks_by_workflow_state_step_status_and_session(api, project):
    session = make_session(project)
    doc = make_task(project, "document_approval", session_ids=[session.pk])
    report = drive(make_task(project, "research_report"), ["drafting"])
    Step.objects.filter(task=report, key="research").update(status=StepStatus.FAILED)

    def ids(**query):
        return [t["id"] for t in api.get("/tasks", query).json()["tasks"]]

    assert ids(workflow="research_report") == [str(report.pk)]
    assert ids(state="draft_created") == [str(doc.pk)]
    assert set(ids(state=["draft_created", "drafting"])) == {str(doc.pk), str(report.pk)}
    assert ids(step_status="failed") == [str(report.pk)]
    assert ids(session=str(session.pk)) == [str(doc.pk)]
    assert ids(workflow="research_report", state="researching") == []
    assert_error(api.get("/tasks", {"step_status": "exploded"}), 422, "invalid_input")


def test_it_refuses_bad_read_parameters(api, project):
    task = make_task(project)
    assert_error(api.get(f"/tasks/{task.pk}", {"history_limit": -1}), 422, "invalid_input")
    assert_error(api.get(f"/tasks/{task.pk}/history", {"limit": 0}), 422, "invalid_input")
    assert_error(api.get("/tasks/not-a-uuid"), 422, "invalid_input")
    page = api.get(f"/tasks/{task.pk}/history", {"after_id": 0, "limit": 1}).json()
    assert [h["kind"] for h in page["history"]] == ["created"] and page["has_more"] is False
