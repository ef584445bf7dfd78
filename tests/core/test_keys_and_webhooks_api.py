"""API keys and webhook endpoints managed with an admin key (issue 24, admin API parity):
listed without their secrets, created with the secret shown once, revoked or deleted, audited,
through the services the dashboard uses."""

import pytest

from core.actors import Actor
from core.models import ApiKey, AuditEntry, KeyScope, WebhookEndpoint
from core.services.projects import hash_secret
from core.services.webhooks import create_endpoint
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_project

pytestmark = pytest.mark.django_db
SYSTEM = Actor.system("tests")


@pytest.fixture
def admin_key(project):
    return make_api_key(project, name="admin", scope=KeyScope.ADMIN)


@pytest.fixture
def admin(admin_key):
    return ApiClient(admin_key[1])


def _prefix(admin_key) -> str:
    return f"key:{admin_key[0].prefix}"


# --- API keys -----------------------------------------------------------------------------------


def test_it_creates_a_key_shown_once_and_hashed_at_rest(project, admin, admin_key):
    response = admin.post("/api-keys", {"name": "ingest worker", "scope": "agent"})
    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    raw = body["key"]
    stored = ApiKey.objects.get(pk=body["id"])
    assert stored.project == project and stored.name == "ingest worker"
    assert stored.scope == "agent" and raw.startswith(f"sb_{stored.prefix}_")
    assert stored.hashed_secret == hash_secret(raw) and raw not in stored.hashed_secret
    assert body["prefix"] == stored.prefix and body["revoked_at"] is None and body["active"]
    entry = AuditEntry.objects.get(project=project, action="api_key.create", target_id=stored.pk)
    assert entry.actor == _prefix(admin_key) and entry.api_key == admin_key[0]
    # The new key works at once, with its scope.
    created = ApiClient(raw)
    assert created.get("/project").json()["key_scope"] == "agent"
    assert created.get("/api-keys").status_code == 403


def test_it_lists_the_keys_without_their_secrets(project, admin, admin_key, other_project):
    _, agent_raw = make_api_key(project, name="agent")
    make_api_key(other_project, name="theirs")
    ApiClient(agent_raw).get("/project")  # used: last_used_at set
    response = admin.get("/api-keys")
    assert response.status_code == 200
    keys = response.json()["api_keys"]
    assert {k["name"] for k in keys} == {"admin", "agent"}
    agent = next(k for k in keys if k["name"] == "agent")
    assert agent["last_used_at"] is not None and agent["scope"] == "agent"
    assert set(agent) == {
        "id",
        "name",
        "prefix",
        "scope",
        "created_at",
        "created_by",
        "last_used_at",
        "expires_at",
        "revoked_at",
        "active",
    }
    text = response.content.decode()
    for stored in ApiKey.objects.all():
        assert stored.hashed_secret not in text
    secret_part = agent_raw.removeprefix(f"sb_{agent['prefix']}_")
    assert len(secret_part) >= 24 and secret_part not in text


@pytest.mark.parametrize(
    "body",
    [
        {"name": ""},
        {"name": "x" * 101},
        {"name": "k", "scope": "root"},
        {"name": "k", "expires_at": "2001-01-01T00:00:00Z"},
        {"name": "k", "expires_at": "tomorrow"},
        {"name": "k", "secret": "mine"},
        {},
    ],
)
def test_it_refuses_a_bad_key_request_and_writes_nothing(project, admin, body):
    before = ApiKey.objects.count()
    response = admin.post("/api-keys", body)
    assert response.status_code == 422, response.content
    assert set(response.json()["error"]) == {"code", "message", "detail"}
    assert ApiKey.objects.count() == before


def test_a_revoked_key_answers_401_at_once_and_the_revocation_is_audited(project, admin, admin_key):
    victim, raw = make_api_key(project, name="victim")
    victim_client = ApiClient(raw)
    assert victim_client.get("/project").status_code == 200  # cached by this process
    response = admin.delete(f"/api-keys/{victim.pk}")
    assert response.status_code == 200, response.content
    assert response.json()["revoked_at"] is not None and not response.json()["active"]
    assert victim_client.get("/project").status_code == 401
    entry = AuditEntry.objects.get(project=project, action="api_key.revoke")
    assert entry.actor == _prefix(admin_key) and entry.target_id == str(victim.pk)
    # Again: the same answer, nothing more recorded.
    assert admin.delete(f"/api-keys/{victim.pk}").status_code == 200
    assert AuditEntry.objects.filter(action="api_key.revoke").count() == 1
    listed = {k["id"]: k for k in admin.get("/api-keys").json()["api_keys"]}
    assert listed[victim.pk]["revoked_at"] is not None


def test_a_key_cannot_revoke_itself(project, admin, admin_key):
    response = admin.delete(f"/api-keys/{admin_key[0].pk}")
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "own_key"
    assert error["detail"] == {"id": admin_key[0].pk, "prefix": admin_key[0].prefix}
    assert ApiKey.objects.get(pk=admin_key[0].pk).revoked_at is None
    assert admin.get("/project").status_code == 200


@pytest.mark.parametrize("key_id", ["0", "-1", "abc", str(2**63)])
def test_a_bad_key_id_is_refused(admin, key_id):
    response = admin.delete(f"/api-keys/{key_id}")
    assert response.status_code in (404, 422), response.content
    assert set(response.json()["error"]) == {"code", "message", "detail"}


def test_another_projects_key_is_not_found(project, admin):
    theirs, raw = make_api_key(make_project(), name="theirs")
    response = admin.delete(f"/api-keys/{theirs.pk}")
    assert response.status_code == 404
    assert ApiKey.objects.get(pk=theirs.pk).revoked_at is None


def test_an_agent_key_manages_no_keys(project, api):
    victim, _ = make_api_key(project, name="victim")
    before = (ApiKey.objects.count(), AuditEntry.objects.count())
    for method, path, body in [
        ("GET", "/api-keys", None),
        ("POST", "/api-keys", {"name": "escalate", "scope": "admin"}),
        ("DELETE", f"/api-keys/{victim.pk}", None),
    ]:
        response = api.send(method, path, body)
        assert response.status_code == 403, (method, path)
        assert response.json()["error"]["detail"] == {"required_scope": "admin", "scope": "agent"}
    assert (ApiKey.objects.count(), AuditEntry.objects.count()) == before
    assert ApiKey.objects.get(pk=victim.pk).revoked_at is None


# --- Webhook endpoints --------------------------------------------------------------------------


def test_it_creates_an_endpoint_with_its_secret_shown_once(project, admin, admin_key):
    response = admin.post(
        "/webhooks",
        {"url": " https://hooks.example.com/sb ", "events": ["session.closed", "handoff.created"]},
    )
    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    endpoint = WebhookEndpoint.objects.get(pk=body["id"])
    assert body["secret"] == endpoint.secret and endpoint.project == project
    assert body["url"] == endpoint.url == "https://hooks.example.com/sb"
    assert body["events"] == ["handoff.created", "session.closed"] and body["active"]
    entry = AuditEntry.objects.get(project=project, action="webhook.created")
    assert entry.actor == _prefix(admin_key)

    listed = admin.get("/webhooks")
    assert listed.status_code == 200
    assert [w["id"] for w in listed.json()["webhooks"]] == [endpoint.pk]
    assert "secret" not in listed.json()["webhooks"][0]
    assert endpoint.secret not in listed.content.decode()


@pytest.mark.parametrize(
    ("url", "private_allowed"),
    [
        ("ftp://hooks.example.com/", True),
        ("https://user:pw@hooks.example.com/", True),
        ("not a url", True),
        ("http://127.0.0.1:8000/hook", False),
        ("http://localhost/hook", False),
        ("http://10.0.0.5/hook", False),
        ("http://[::1]/hook", False),
    ],
)
def test_it_refuses_a_url_the_dashboard_refuses(project, admin, settings, url, private_allowed):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = private_allowed
    response = admin.post("/webhooks", {"url": url, "events": ["session.closed"]})
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input" and error["detail"] == {"field": "url"}
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"url": "https://hooks.example.com/", "events": []},
        {"url": "https://hooks.example.com/", "events": ["session.exploded"]},
        {"url": "https://hooks.example.com/"},
        {"url": "https://hooks.example.com/", "events": ["session.closed"], "secret": "x"},
        {"url": "https://hooks.example.com/" + "a" * 2000, "events": ["session.closed"]},
    ],
)
def test_it_refuses_a_bad_endpoint_body(admin, body):
    response = admin.post("/webhooks", body)
    assert response.status_code == 422, response.content
    assert not WebhookEndpoint.objects.exists()


def test_it_deletes_an_endpoint_audited(project, admin, admin_key, other_project):
    endpoint, _ = create_endpoint(
        project, url="https://hooks.example.com/a", events=["session.closed"], actor=SYSTEM
    )
    theirs, _ = create_endpoint(
        other_project, url="https://hooks.example.com/b", events=["session.closed"], actor=SYSTEM
    )
    assert admin.delete(f"/webhooks/{theirs.pk}").status_code == 404
    response = admin.delete(f"/webhooks/{endpoint.pk}")
    assert response.status_code == 200, response.content
    assert response.json()["id"] == endpoint.pk and "secret" not in response.json()
    assert list(WebhookEndpoint.objects.values_list("pk", flat=True)) == [theirs.pk]
    entry = AuditEntry.objects.get(project=project, action="webhook.deleted")
    assert entry.actor == _prefix(admin_key)
    assert admin.delete(f"/webhooks/{endpoint.pk}").status_code == 404


def test_an_agent_key_manages_no_endpoints(project, api):
    endpoint, _ = create_endpoint(
        project, url="https://hooks.example.com/a", events=["session.closed"], actor=SYSTEM
    )
    for method, path, body in [
        ("GET", "/webhooks", None),
        ("POST", "/webhooks", {"url": "https://hooks.example.com/x", "events": ["session.closed"]}),
        ("DELETE", f"/webhooks/{endpoint.pk}", None),
    ]:
        response = api.send(method, path, body)
        assert response.status_code == 403, (method, path)
    assert list(WebhookEndpoint.objects.values_list("pk", flat=True)) == [endpoint.pk]
