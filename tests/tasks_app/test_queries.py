"""Read paths stay at a fixed number of queries however many tasks, steps and links there are;
the OpenAPI schema documents the task endpoints."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from tasks_app.queries import tasks_for_session
from tests.factories import make_session, make_task

from .helpers import drive


def queries_for(call) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured)


def test_it_lists_tasks_with_their_steps_in_constant_queries(api, project):
    make_task(project)
    api.get("/tasks")  # warm: built-ins registered, key touched
    few = queries_for(lambda: api.get("/tasks"))
    for _ in range(6):
        drive(make_task(project, "research_report"), ["drafting"])
    many = queries_for(lambda: api.get("/tasks"))
    assert many == few <= 5
    assert len(api.get("/tasks").json()["tasks"]) == 7


def test_it_reads_a_task_in_constant_queries(api, project):
    session = make_session(project)
    task = make_task(project, session_ids=[session.pk])
    api.get(f"/tasks/{task.pk}")
    before = queries_for(lambda: api.get(f"/tasks/{task.pk}"))
    drive(task, ["sent_for_review", "changes_requested", "sent_for_review"])
    for _ in range(3):
        api.post(f"/tasks/{task.pk}/sessions", {"session_ids": [str(make_session(project).pk)]})
    assert queries_for(lambda: api.get(f"/tasks/{task.pk}")) == before <= 6


def test_it_gives_the_session_page_its_tasks_with_steps_in_two_queries(project):
    session = make_session(project)
    for workflow in ("document_approval", "research_report", "research_report"):
        make_task(project, workflow, session_ids=[session.pk])

    def panel():
        for task in tasks_for_session(session):
            [(s.status, s.attempts, s.last_error, s.agent) for s in task.steps.all()]

    assert queries_for(panel) == 2


def test_it_documents_the_task_endpoints_in_the_openapi_schema(api):
    schema = api.get("/api/v1/openapi.json").json()
    paths = schema["paths"]
    for path in (
        "/api/v1/tasks",
        "/api/v1/tasks/{task_id}",
        "/api/v1/tasks/{task_id}/transitions",
        "/api/v1/tasks/{task_id}/steps/{key}",
        "/api/v1/tasks/{task_id}/signals/{name}",
        "/api/v1/workflows",
    ):
        assert path in paths, path
    signal_security = paths["/api/v1/tasks/{task_id}/signals/{name}"]["post"]["security"]
    assert {"SignalTokenHeader": []} in signal_security
    assert schema["components"]["securitySchemes"]["SignalTokenHeader"]["name"] == "X-Signal-Token"
