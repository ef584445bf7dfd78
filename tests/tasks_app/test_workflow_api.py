"""POST /workflows, GET /workflows, GET /workflows/{name}; tasks keep their version."""

from core.models import AuditEntry
from tasks_app.models import Task, WorkflowDefinition
from tasks_app.workflows import DOCUMENT_APPROVAL

from .helpers import assert_error

ONBOARDING = {
    "name": "customer_onboarding",
    "title": "Customer onboarding",
    "states": ["requested", "verifying", "active", "declined"],
    "initial": "requested",
    "terminal": ["active", "declined"],
    "transitions": [
        {"from": "requested", "to": "verifying", "name": "verify"},
        {"from": "verifying", "to": "active", "name": "activate"},
        {"from": "verifying", "to": "declined", "name": "decline"},
    ],
    "steps": [{"key": "kyc_check", "title": "KYC check", "max_attempts": 3}],
}


def test_it_lists_the_built_in_workflows(api, project):
    workflows = api.get("/workflows").json()["workflows"]
    assert [(w["name"], w["version"], w["builtin"]) for w in workflows] == [
        ("document_approval", 1, True),
        ("research_report", 1, True),
    ]
    assert workflows[0]["states"] == list(DOCUMENT_APPROVAL.states)
    assert workflows[0]["content_hash"] == DOCUMENT_APPROVAL.content_hash


def test_it_registers_a_definition_for_the_project_only(api, other_api, project, api_key):
    response = api.post("/workflows", ONBOARDING)
    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["version"], body["builtin"], body["source"]) == (
        "customer_onboarding",
        1,
        False,
        "api",
    )
    stored = WorkflowDefinition.objects.get(name="customer_onboarding")
    assert stored.project == project and stored.created_by == f"key:{api_key[0].prefix}"
    assert stored.definition["transitions"][0] == {
        "from": "requested",
        "to": "verifying",
        "name": "verify",
        "reopen": [],
    }
    assert AuditEntry.objects.filter(action="workflow.register", project=project).exists()

    created = api.post("/tasks", {"workflow": "customer_onboarding"})
    assert created.status_code == 201 and created.json()["state"] == "requested"
    assert [s["key"] for s in created.json()["steps"]] == ["kyc_check"]

    assert "customer_onboarding" not in {
        w["name"] for w in other_api.get("/workflows").json()["workflows"]
    }
    assert_error(
        other_api.post("/tasks", {"workflow": "customer_onboarding"}), 422, "unknown_workflow"
    )
    assert_error(other_api.get("/workflows/customer_onboarding"), 404, "not_found")


def test_it_is_idempotent_for_the_same_content_and_refuses_a_changed_one(api, project):
    assert api.post("/workflows", {**ONBOARDING, "version": 1}).status_code == 201
    assert api.post("/workflows", {**ONBOARDING, "version": 1}).status_code == 200
    error = assert_error(
        api.post("/workflows", {**ONBOARDING, "version": 1, "title": "Other"}),
        409,
        "workflow_version_exists",
    )
    assert error["detail"]["latest_version"] == 1
    assert_error(
        api.post("/workflows", {**DOCUMENT_APPROVAL.as_dict(), "title": "Mine"}),
        409,
        "workflow_version_exists",
    )
    assert WorkflowDefinition.objects.filter(project=project).count() == 1


def test_it_numbers_new_versions_and_tasks_keep_the_one_they_started_with(api, project):
    api.post("/workflows", ONBOARDING)
    old_task = api.post("/tasks", {"workflow": "customer_onboarding"}).json()
    v2 = {
        **ONBOARDING,
        "states": [*ONBOARDING["states"], "on_hold"],
        "transitions": [
            *ONBOARDING["transitions"],
            {"from": "verifying", "to": "on_hold", "name": "hold"},
            {"from": "on_hold", "to": "verifying", "name": "unhold"},
        ],
    }
    response = api.post("/workflows", v2)
    assert response.status_code == 201 and response.json()["version"] == 2
    assert api.get("/workflows/customer_onboarding").json()["version"] == 2
    assert api.get("/workflows/customer_onboarding", {"version": 1}).json()["version"] == 1
    assert [
        w["version"]
        for w in api.get("/workflows", {"name": "customer_onboarding"}).json()["workflows"]
    ] == [1, 2]

    new_task = api.post("/tasks", {"workflow": "customer_onboarding"}).json()
    assert new_task["workflow"]["version"] == 2
    for task in (old_task, new_task):
        api.post(f"/tasks/{task['id']}/transitions", {"to": "verifying"})
    assert_error(api.post(f"/tasks/{old_task['id']}/transitions", {"to": "on_hold"}), 422)
    assert api.post(f"/tasks/{new_task['id']}/transitions", {"to": "on_hold"}).status_code == 200
    assert Task.objects.get(pk=old_task["id"]).workflow.version == 1


def test_it_refuses_an_invalid_definition_listing_the_problems(api, project):
    dead_end = {
        **ONBOARDING,
        "states": [*ONBOARDING["states"], "limbo"],
        "transitions": [*ONBOARDING["transitions"], {"from": "requested", "to": "limbo"}],
    }
    error = assert_error(api.post("/workflows", dead_end), 422, "invalid_input")
    assert error["detail"]["problems"] == [
        "states: no terminal state can be reached from 'limbo' (a dead end)"
    ]
    assert_error(api.post("/workflows", {"name": "x"}), 422, "invalid_input")
    assert_error(api.post("/workflows", {**ONBOARDING, "version": 0}), 422, "invalid_input")
    assert not WorkflowDefinition.objects.filter(project=project).exists()
    assert_error(api.get("/workflows/nope"), 404, "not_found")
