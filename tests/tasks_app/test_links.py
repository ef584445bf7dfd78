"""Links between tasks and sessions, from both sides (including POST/GET /sessions)."""

import uuid

from sessions_app.models import Session
from tasks_app.models import HistoryKind, TaskHistory, TaskSession
from tests.factories import make_session, make_task

from .helpers import assert_error


def linked(task):
    return set(TaskSession.objects.filter(task=task).values_list("session_id", flat=True))


def test_it_links_and_unlinks_sessions_recording_both(api, project, api_key):
    task = make_task(project)
    one, two = make_session(project), make_session(project)
    response = api.post(
        f"/tasks/{task.pk}/sessions", {"session_ids": [str(one.pk), str(two.pk), str(one.pk)]}
    )
    assert response.status_code == 200
    assert set(response.json()["linked"]) == {str(one.pk), str(two.pk)}
    assert linked(task) == {one.pk, two.pk}
    link = TaskSession.objects.get(task=task, session=one)
    assert link.linked_by == f"key:{api_key[0].prefix}"

    again = api.post(f"/tasks/{task.pk}/sessions", {"session_ids": [str(one.pk)]})
    assert again.json()["linked"] == []  # already linked: nothing new

    gone = api.delete(f"/tasks/{task.pk}/sessions/{one.pk}")
    assert gone.json() == {"unlinked": True, "session_ids": [str(two.pk)]}
    assert api.delete(f"/tasks/{task.pk}/sessions/{one.pk}").json()["unlinked"] is False
    assert linked(task) == {two.pk}
    kinds = list(
        TaskHistory.objects.filter(
            task=task, kind__in=[HistoryKind.LINK, HistoryKind.UNLINK]
        ).values_list("kind", "data__session_id")
    )
    assert kinds == [("link", str(one.pk)), ("link", str(two.pk)), ("unlink", str(one.pk))]
    task.refresh_from_db()
    assert task.version == 1  # links are not workflow state


def test_it_lists_a_tasks_sessions_and_a_sessions_tasks(api, project):
    session = make_session(project, title="drafting run")
    first = make_task(project, session_ids=[session.pk])
    second = make_task(project, "research_report", session_ids=[session.pk])
    sessions = api.get(f"/tasks/{first.pk}/sessions").json()["sessions"]
    assert [(s["id"], s["title"]) for s in sessions] == [(str(session.pk), "drafting run")]
    tasks = api.get(f"/sessions/{session.pk}/tasks").json()["tasks"]
    assert [t["id"] for t in tasks] == [str(first.pk), str(second.pk)]
    assert tasks[1]["workflow"] == {"name": "research_report", "version": 1}


def test_it_never_links_across_projects(api, other_api, project, other_project):
    task = make_task(project)
    foreign = make_session(other_project)
    assert_error(
        api.post(f"/tasks/{task.pk}/sessions", {"session_ids": [str(foreign.pk)]}), 404, "not_found"
    )
    assert_error(api.delete(f"/tasks/{task.pk}/sessions/{foreign.pk}"), 404, "not_found")
    assert_error(other_api.get(f"/tasks/{task.pk}/sessions"), 404, "not_found")
    mine = make_session(project)
    assert_error(
        other_api.post(f"/tasks/{task.pk}/sessions", {"session_ids": [str(mine.pk)]}),
        404,
        "not_found",
    )
    assert_error(other_api.get(f"/sessions/{mine.pk}/tasks"), 404, "not_found")
    assert linked(task) == set()
    api.post(f"/tasks/{task.pk}/sessions", {"session_ids": [str(mine.pk)]})
    assert_error(other_api.delete(f"/tasks/{task.pk}/sessions/{mine.pk}"), 404, "not_found")
    assert linked(task) == {mine.pk}
    assert_error(api.get("/sessions/not-a-uuid/tasks"), 422, "invalid_input")


def test_it_refuses_bad_link_input(api, project):
    task = make_task(project)
    assert_error(api.post(f"/tasks/{task.pk}/sessions", {"session_ids": []}), 422, "invalid_input")
    assert_error(api.post(f"/tasks/{task.pk}/sessions", {"session_ids": ["x"]}), 422)
    assert_error(
        api.post(f"/tasks/{task.pk}/sessions", {"session_ids": [str(uuid.uuid4())]}),
        404,
        "not_found",
    )


def test_it_links_tasks_when_a_session_opens_and_shows_them_on_the_session(api, project):
    doc, report = make_task(project), make_task(project, "research_report")
    opened = api.post("/sessions", {"agent": "writer", "task_ids": [str(doc.pk), str(report.pk)]})
    assert opened.status_code == 201
    body = opened.json()
    assert [t["id"] for t in body["tasks"]] == [str(doc.pk), str(report.pk)]
    session_id = body["id"]
    assert linked(doc) == {uuid.UUID(session_id)} and linked(report) == {uuid.UUID(session_id)}

    shown = api.get(f"/sessions/{session_id}").json()["tasks"]
    assert shown[0] == {
        "id": str(doc.pk),
        "workflow": "document_approval",
        "workflow_version": 1,
        "state": "draft_created",
        "version": 1,
        "finished": False,
    }
    plain = api.post("/sessions", {"agent": "writer"}).json()
    assert plain["tasks"] == []


def test_it_refuses_another_projects_task_when_a_session_opens(api, project, other_project):
    foreign = make_task(other_project)
    error = assert_error(
        api.post(
            "/sessions", {"agent": "writer", "external_id": "run-1", "task_ids": [str(foreign.pk)]}
        ),
        404,
        "not_found",
    )
    assert error["detail"] == {"task_ids": [str(foreign.pk)]}
    assert not Session.objects.filter(project=project).exists()
    assert linked(foreign) == set()


def test_a_fork_keeps_its_parents_task_links(api, project):
    parent = make_session(project)
    first, second, unrelated = make_task(project), make_task(project), make_task(project)
    for task in (first, second):
        response = api.post(f"/tasks/{task.pk}/sessions", {"session_ids": [str(parent.pk)]})
        assert response.status_code == 200
    response = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 0})
    assert response.status_code in (200, 201), response.content
    fork_id = uuid.UUID(response.json()["id"])
    for task in (first, second):
        assert linked(task) == {parent.pk, fork_id}
        assert TaskHistory.objects.filter(
            task=task, kind=HistoryKind.LINK, data={"session_id": str(fork_id)}
        ).exists()
    assert linked(unrelated) == set()
    # A fork of a session with no task gets none; a root session is linked to nothing.
    lone = make_session(project)
    response = api.post(f"/sessions/{lone.pk}/fork", {"at_seq": 0})
    assert not TaskSession.objects.filter(session_id=response.json()["id"]).exists()
