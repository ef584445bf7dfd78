"""API key scopes on every route of the API: `agent` (the default) and `admin`.

The routes are read from the API's routers, not listed by hand: a new route without a row in
REQUESTS fails here until someone decides its request (and so checks its scope). Each route is
called twice, in two identical fresh projects: once with an agent-scoped key, once with an
admin-scoped one. On an agent route both answer the same, and neither is 401 or 403; on an
admin route the agent key gets 403 in the error shape with nothing changed, the admin key
succeeds.
"""

from datetime import timedelta

import pytest
import time_machine
from django.forms.models import model_to_dict
from django.utils import timezone

from config.api import api as ninja_api
from core.actors import Actor
from core.errors import InvalidInput
from core.models import ApiKey, AuditEntry, KeyScope, Project, WebhookEndpoint
from core.scopes import ApiKeyAuth, route_scope
from core.services.projects import create_api_key
from core.services.webhooks import create_endpoint
from handoffs_app.api import WaitingKeyAuth
from handoffs_app.models import Handoff
from handoffs_app.services.handoffs import request_handoff
from retention_app.models import LegalHold, RetentionPolicy, RetentionRun
from retention_app.services.holds import place_hold
from retention_app.services.policies import save_policy
from sessions_app.models import Event, Session
from sessions_app.services.blobs import store_blobs
from sessions_app.services.events import EventDraft, append_events
from tasks_app.models import Step, Task
from tests.conftest import ApiClient
from tests.factories import make_artifact, make_erasure, make_project, make_session, make_task
from tests.retention.helpers import POLICY_BODY

# (method, path) -> body (None for no body). Bodies are valid where a valid one is simple, so
# most calls reach the view; the point is that both scopes get the same answer.
REQUESTS: dict[tuple[str, str], dict | None] = {
    ("GET", "/project"): None,
    ("PATCH", "/project"): {"name": "renamed-{n}"},
    ("POST", "/sessions"): {"agent": "scoped-agent"},
    ("GET", "/sessions"): None,
    ("GET", "/sessions/{session_id}"): None,
    ("DELETE", "/sessions/{session_id}"): None,  # the world's session is held: 409 for both
    ("POST", "/sessions/{session_id}/events"): {"events": [{"kind": "note", "content": {}}]},
    ("GET", "/sessions/{session_id}/events"): None,
    ("GET", "/sessions/{session_id}/state"): None,
    ("POST", "/sessions/{session_id}/snapshots"): {},
    ("POST", "/sessions/{session_id}/fork"): {"at_seq": 1},
    ("POST", "/sessions/{session_id}/pause"): {"reason": "scope test"},
    ("POST", "/sessions/{session_id}/resume"): {"reason": "scope test"},
    ("POST", "/sessions/{session_id}/close"): {"reason": "scope test"},
    ("GET", "/sessions/{session_id}/export"): None,
    ("GET", "/sessions/{session_id}/tasks"): None,
    ("POST", "/tasks"): {"workflow": "document_approval"},
    ("GET", "/tasks"): None,
    ("GET", "/tasks/{task_id}"): None,
    ("GET", "/tasks/{task_id}/history"): None,
    ("POST", "/tasks/{task_id}/transitions"): {"to": "sent_for_review"},
    ("GET", "/tasks/{task_id}/steps/{key}"): None,
    ("PUT", "/tasks/{task_id}/steps/{key}"): {"status": "running"},
    ("POST", "/tasks/{task_id}/signals/{name}"): {"payload": {}},
    ("GET", "/tasks/{task_id}/sessions"): None,
    ("POST", "/tasks/{task_id}/sessions"): {"session_ids": ["{session_id}"]},
    ("DELETE", "/tasks/{task_id}/sessions/{session_id}"): None,
    ("POST", "/workflows"): {"name": "scoped_flow"},
    ("GET", "/workflows"): None,
    ("GET", "/workflows/{name}"): None,
    ("POST", "/sessions/{session_id}/handoffs"): {"kind": "question", "payload": {"question": "?"}},
    ("GET", "/handoffs"): None,
    ("GET", "/handoffs/{handoff_id}"): None,
    ("POST", "/handoffs/{handoff_id}/cancel"): {},
    ("GET", "/retention/policy"): None,
    ("PUT", "/retention/policy"): POLICY_BODY,
    ("GET", "/retention/preview"): None,
    ("GET", "/retention/runs"): None,
    ("POST", "/sessions/{session_id}/hold"): {"reason": "litigation {n}"},
    ("DELETE", "/sessions/{session_id}/hold"): None,
    ("POST", "/retention/runs"): None,
    ("DELETE", "/retention/policy"): None,  # the world's policy is saved: reset to defaults
    ("GET", "/holds"): None,
    ("GET", "/api-keys"): None,
    ("POST", "/api-keys"): {"name": "made {n}", "scope": "agent"},
    ("DELETE", "/api-keys/{key_id}"): None,
    ("GET", "/webhooks"): None,
    ("POST", "/webhooks"): {"url": "https://hooks.example.com/{n}", "events": ["session.closed"]},
    ("DELETE", "/webhooks/{endpoint_id}"): None,
    ("POST", "/sessions/{session_id}/blobs"): {"blobs": [{"data": "c2NvcGVz"}]},
    ("POST", "/sessions/{session_id}/blobs/lookup"): {"sha256": ["{sha256}"]},
    ("GET", "/sessions/{session_id}/blobs/{sha256}"): None,
    ("PUT", "/sessions/{session_id}/artifacts/{name}"): {"a": "file"},
    ("GET", "/sessions/{session_id}/artifacts"): None,
    ("GET", "/sessions/{session_id}/artifacts/{name}"): None,
    ("DELETE", "/sessions/{session_id}/artifacts/{name}"): None,
    ("GET", "/sessions/{session_id}/export/artifacts"): None,
    ("POST", "/erasures"): {"external_id": "nobody-{n}", "preview": True},
    ("GET", "/erasures"): None,
    ("GET", "/erasures/{erasure_id}"): None,
    ("GET", "/erasures/{erasure_id}/receipt"): None,
    ("POST", "/erasures/{erasure_id}/run"): None,
}

# The routes that need an admin-scoped key.
ADMIN_ROUTES = {
    ("PATCH", "/project"),
    ("GET", "/retention/policy"),
    ("PUT", "/retention/policy"),
    ("GET", "/retention/preview"),
    ("GET", "/retention/runs"),
    ("POST", "/sessions/{session_id}/hold"),
    ("DELETE", "/sessions/{session_id}/hold"),
    ("POST", "/retention/runs"),
    ("DELETE", "/retention/policy"),
    ("GET", "/holds"),
    ("GET", "/api-keys"),
    ("POST", "/api-keys"),
    ("DELETE", "/api-keys/{key_id}"),
    ("GET", "/webhooks"),
    ("POST", "/webhooks"),
    ("DELETE", "/webhooks/{endpoint_id}"),
    ("POST", "/erasures"),
    ("GET", "/erasures"),
    ("GET", "/erasures/{erasure_id}"),
    ("GET", "/erasures/{erasure_id}/receipt"),
    ("POST", "/erasures/{erasure_id}/run"),
}


def _routes() -> dict[tuple[str, str], object]:
    """Every operation as routed: the bound copies, which carry the auth they run with."""
    return {
        (method, path): operation
        for router in ninja_api._get_bound_routers()
        for path, path_view in router.path_operations.items()
        for operation in path_view.operations
        for method in operation.methods
    }


ROUTES = _routes()


def _world(project: Project) -> dict[str, object]:
    session = make_session(project)
    append_events(
        session,
        [EventDraft(kind="message", role="user", content={"text": "hello"})],
        actor=Actor.system("tests"),
    )
    task = make_task(project)
    (blob,) = store_blobs(session, [b"a blob"])
    make_artifact(session, "document_approval")  # the {name} of artifacts' routes (_fill)
    # A standing hold, so lifting it (DELETE …/hold) has one to lift.
    place_hold(project, session=session, reason="scope test", actor=Actor.system("tests"))
    # A saved policy (DELETE /retention/policy resets it), a key to revoke, an endpoint to delete.
    save_policy(project, POLICY_BODY, actor=Actor.system("tests"))
    spare_key, _ = create_api_key(project, name="spare", actor=Actor.system("tests"))
    endpoint, _ = create_endpoint(
        project,
        url="https://hooks.example.com/",
        events=["session.closed"],
        actor=Actor.system("t"),
    )
    handoff = request_handoff(
        make_session(project), kind="question", payload={"question": "?"}, actor=Actor.system("t")
    ).handoff
    return {
        "erasure_id": str(make_erasure(project).pk),
        "session_id": str(session.pk),
        "task_id": str(task.pk),
        "handoff_id": str(handoff.pk),
        "key": "draft",
        "name": "",
        "key_id": spare_key.pk,
        "endpoint_id": endpoint.pk,
        "sha256": blob.sha256,
    }


def _fill(template: str, ids: dict[str, object], n: int) -> str:
    values = {**ids, "name": "document_approval", "n": n}
    if "/signals/" in template:
        values["name"] = "reviewer_answered"
    return template.format(**values)


def _fill_body(body, ids, n):
    if isinstance(body, dict):
        return {k: _fill_body(v, ids, n) for k, v in body.items()}
    if isinstance(body, list):
        return [_fill_body(v, ids, n) for v in body]
    if isinstance(body, str):
        return _fill(body, ids, n)
    return body


def _call(client: ApiClient, method: str, path: str, body):
    if method == "PATCH":
        return client.client.patch(
            f"/api/v1{path}",
            data=body or {},
            content_type="application/json",
            headers=client.headers,
        )
    if method == "DELETE":
        return client.delete(path)
    fn = getattr(client, method.lower())
    return fn(path, body) if body is not None else fn(path)


def _state(project: Project) -> tuple:
    """Everything a request could change in the project."""
    return (
        Project.objects.get(pk=project.pk).name,
        [model_to_dict(s) for s in Session.objects.filter(project=project).order_by("pk")],
        Event.objects.filter(session__project=project).count(),
        sorted(Task.objects.filter(project=project).values_list("pk", "state", "version")),
        sorted(Step.objects.filter(task__project=project).values_list("pk", "status")),
        AuditEntry.objects.filter(project=project).count(),
        sorted(Handoff.objects.filter(project=project).values_list("pk", "status")),
        sorted(LegalHold.objects.filter(project=project).values_list("pk", "released_at")),
        RetentionPolicy.objects.filter(project=project).count(),
        RetentionRun.objects.filter(project=project).count(),
        sorted(ApiKey.objects.filter(project=project).values_list("pk", "revoked_at")),
        sorted(WebhookEndpoint.objects.filter(project=project).values_list("pk", flat=True)),
    )


def _client(project: Project, scope: str) -> ApiClient:
    _, raw = create_api_key(project, name=f"{scope} key", scope=scope, actor=Actor.system("t"))
    return ApiClient(raw)


def test_it_has_a_request_for_every_route_and_knows_which_need_admin():
    assert set(ROUTES) == set(REQUESTS), (
        "An API route was added or removed: add it to REQUESTS (and decide its scope) or drop it."
    )
    admin = {route for route, operation in ROUTES.items() if route_scope(operation) == "admin"}
    assert admin == ADMIN_ROUTES
    for route, operation in ROUTES.items():
        # Every route authenticates (a key, or for signals a key or the task's signal token).
        assert operation.auth_callbacks, route
        if route_scope(operation) == "agent" and "/signals/" not in route[1]:
            # The handoff long-poll's auth (WaitingKeyAuth) checks the same API key and hands
            # its connection back before the wait; the agent scope is every key's, so it
            # needs no scope check of its own.
            agent_auth = (ApiKeyAuth, WaitingKeyAuth)
            assert any(isinstance(cb, agent_auth) for cb in operation.auth_callbacks), route


@pytest.mark.parametrize(("method", "path"), sorted(REQUESTS), ids=lambda v: str(v))
def test_each_route_answers_as_its_scope_says(db, method, path):
    needs_admin = (method, path) in ADMIN_ROUTES
    answers = {}
    for n, scope in enumerate((KeyScope.AGENT, KeyScope.ADMIN)):
        project = make_project()
        ids = _world(project)
        client = _client(project, scope)
        before = _state(project)
        response = _call(
            client, method, _fill(path, ids, n), _fill_body(REQUESTS[(method, path)], ids, n)
        )
        content = b"(streamed)" if response.streaming else response.content
        answers[scope] = response.status_code
        if needs_admin and scope == KeyScope.AGENT:
            assert response.status_code == 403, content
            error = response.json()["error"]
            assert set(error) == {"code", "message", "detail"}
            assert error["code"] == "forbidden"
            assert error["detail"] == {"required_scope": "admin", "scope": "agent"}
            assert _state(project) == before
        else:
            assert response.status_code not in (401, 403), (scope, content)
    if needs_admin:
        assert 200 <= answers[KeyScope.ADMIN] < 300
    else:
        assert answers[KeyScope.AGENT] == answers[KeyScope.ADMIN]


def test_an_agent_key_is_refused_before_its_body_is_read(db):
    project = make_project()
    agent = _client(project, KeyScope.AGENT)
    response = agent.client.patch(
        "/api/v1/project",
        data={"name": ""},
        content_type="application/json",
        headers=agent.headers,
    )
    assert response.status_code == 403  # not 422: the scope is checked first
    response = agent.client.patch(
        "/api/v1/project",
        data="not json",
        content_type="application/json",
        headers=agent.headers,
    )
    assert response.status_code == 403


def test_an_admin_key_renames_the_project_and_the_audit_names_the_key(db):
    project = make_project()
    other = make_project()
    admin = _client(project, KeyScope.ADMIN)
    response = admin.client.patch(
        "/api/v1/project",
        data={"name": "Acme support"},
        content_type="application/json",
        headers=admin.headers,
    )
    assert response.status_code == 200
    assert response.json() == {"id": project.pk, "name": "Acme support", "key_scope": "admin"}
    assert Project.objects.get(pk=project.pk).name == "Acme support"
    entry = AuditEntry.objects.get(project=project, action="project.rename")
    key = ApiKey.objects.get(project=project, scope="admin")
    assert entry.actor == f"key:{key.prefix}" and entry.api_key == key
    assert entry.detail == {"from": project.name, "to": "Acme support"}

    # Another project's name is taken: 409, nothing changed.
    response = admin.client.patch(
        "/api/v1/project",
        data={"name": other.name},
        content_type="application/json",
        headers=admin.headers,
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    assert Project.objects.get(pk=project.pk).name == "Acme support"


def test_an_admin_key_reaches_only_its_own_project(db):
    project, other = make_project(), make_project()
    admin = _client(project, KeyScope.ADMIN)
    assert admin.get("/project").json()["id"] == project.pk
    other_session = make_session(other)
    assert admin.get(f"/sessions/{other_session.pk}").status_code == 404


def test_an_expired_key_answers_401_everywhere(db):
    project = make_project()
    session = make_session(project)
    expiry = timezone.now() + timedelta(hours=1)
    _, raw = create_api_key(
        project, name="short", scope=KeyScope.ADMIN, expires_at=expiry, actor=Actor.system("t")
    )
    client = ApiClient(raw)
    assert client.get(f"/sessions/{session.pk}").status_code == 200
    with time_machine.travel(expiry + timedelta(seconds=1)):
        for path in (f"/sessions/{session.pk}", "/project", "/tasks"):
            response = client.get(path)
            assert response.status_code == 401, path
            assert response.json()["error"]["code"] == "unauthorized"


def test_a_key_cannot_be_made_already_expired_or_with_an_unknown_scope(db):
    project = make_project()
    for kwargs in (
        {"expires_at": timezone.now() - timedelta(minutes=1)},
        {"expires_at": timezone.now()},
        {"scope": "root"},
        {"name": "   "},
    ):
        with pytest.raises(InvalidInput):
            create_api_key(project, **{"name": "k", **kwargs}, actor=Actor.system("t"))
    assert not ApiKey.objects.filter(project=project).exists()
    assert not AuditEntry.objects.filter(project=project).exists()
