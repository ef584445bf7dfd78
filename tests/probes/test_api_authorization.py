"""Probe 1: the agent API's authorization, from the outside (issue 23).

Every operation of the served OpenAPI document (paths × methods, read from
/api/v1/openapi.json, not from the routers) is tried with credentials that must be refused:
no key, malformed keys, a revoked key, an expired key (each on the own project's objects and
on another project's), another project's agent and admin keys on the own project's objects,
another project's signal token, and an agent-scoped key on the admin routes. Each try must be
refused with the right status (401, 404 or 403, in the error shape), never a 2xx, never a 5xx,
and with no row changed anywhere in the database (a checksum of every table, dbstate.py).

Then the other project's keys read every list of their own, looking for the own project's
objects by the names they know (external id, agent, search text, workflow) and in body
references (link, create with session_ids / task_ids): nothing of the own project appears or
is reached. Last, the controls: the owner's admin key sends each refused request again and it
reaches its object (not 401/403/404/422), so the refusals above were about who asked.
"""

import base64
import json
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone

from core.actors import Actor
from core.models import KeyScope, Role
from core.services.projects import create_api_key
from sessions_app.services.snapshots import drain
from tests.factories import make_member, make_project
from tests.probes.dbstate import changed_tables, checksums
from tests.probes.summary import report

pytestmark = pytest.mark.django_db(transaction=True)

PREFIX = "/api/v1"

# (METHOD, path as in the document) -> a valid body (None: no body). Strings are formatted with
# the ids of the project the request names. A new operation without a row fails the probe.
BODIES: dict[tuple[str, str], Any] = {
    ("GET", "/project"): None,
    ("PATCH", "/project"): {"name": "renamed by the probe {n}"},
    ("POST", "/sessions"): {"agent": "probe-agent"},
    ("GET", "/sessions"): None,
    ("GET", "/sessions/{session_id}"): None,
    ("DELETE", "/sessions/{session_id}"): None,  # the control meets the world's hold: 409
    ("POST", "/sessions/{session_id}/events"): {
        "events": [{"kind": "note", "content": {"by": "probe"}}]
    },
    ("GET", "/sessions/{session_id}/events"): None,
    ("GET", "/sessions/{session_id}/state"): None,
    ("POST", "/sessions/{session_id}/snapshots"): {},
    ("POST", "/sessions/{session_id}/fork"): {"at_seq": 1},
    ("POST", "/sessions/{session_id}/pause"): {"reason": "probe"},
    ("POST", "/sessions/{session_id}/resume"): {"reason": "probe"},
    ("POST", "/sessions/{session_id}/close"): {"reason": "probe"},
    ("GET", "/sessions/{session_id}/export"): None,
    ("GET", "/sessions/{session_id}/tasks"): None,
    ("POST", "/tasks"): {"workflow": "document_approval"},
    ("GET", "/tasks"): None,
    ("GET", "/tasks/{task_id}"): None,
    ("GET", "/tasks/{task_id}/history"): None,
    ("POST", "/tasks/{task_id}/transitions"): {"to": "sent_for_review"},
    ("GET", "/tasks/{task_id}/steps/{key}"): None,
    ("PUT", "/tasks/{task_id}/steps/{key}"): {"status": "running"},
    ("POST", "/tasks/{task_id}/signals/{name}"): {"payload": {"by": "probe"}},
    ("GET", "/tasks/{task_id}/sessions"): None,
    ("POST", "/tasks/{task_id}/sessions"): {"session_ids": ["{link_session_id}"]},
    ("DELETE", "/tasks/{task_id}/sessions/{session_id}"): None,
    ("POST", "/workflows"): {
        "name": "probe_flow_{n}",
        "states": ["new", "done"],
        "initial": "new",
        "terminal": ["done"],
        "transitions": [{"from": "new", "to": "done", "name": "finish"}],
    },
    ("GET", "/workflows"): None,
    ("GET", "/workflows/{name}"): None,
    ("POST", "/sessions/{session_id}/handoffs"): {
        "kind": "question",
        "reason": "probe",
        "payload": {"question": "?"},
    },
    ("GET", "/handoffs"): None,
    ("GET", "/handoffs/{handoff_id}"): None,
    ("POST", "/handoffs/{handoff_id}/cancel"): {},
    ("GET", "/retention/policy"): None,
    ("PUT", "/retention/policy"): {
        "close_idle_after": 3600,
        "close_paused_after": None,
        "archive_closed_after": 86400,
        "compact_after": 86400,
        "delete_after": None,
        "outcome_compact_after": None,
        "outcome_delete_after": None,
        "keep_outcomes": ["error"],
        "keep_tags": [],
    },
    ("GET", "/retention/preview"): None,
    ("GET", "/retention/runs"): None,
    ("POST", "/sessions/{session_id}/hold"): {"reason": "probe"},
    ("DELETE", "/sessions/{session_id}/hold"): None,
    ("POST", "/retention/runs"): None,
    ("DELETE", "/retention/policy"): None,
    ("GET", "/holds"): None,
    ("GET", "/api-keys"): None,
    ("POST", "/api-keys"): {"name": "made by the probe {n}"},
    ("DELETE", "/api-keys/{key_id}"): None,  # the world's spare key, never the one asking
    ("GET", "/webhooks"): None,
    ("POST", "/webhooks"): {
        "url": "https://hooks.example.com/probe-{n}",
        "events": ["session.closed"],
    },
    ("DELETE", "/webhooks/{endpoint_id}"): None,
    ("POST", "/sessions/{session_id}/blobs"): {"blobs": [{"data": "cHJvYmU="}]},
    ("POST", "/sessions/{session_id}/blobs/lookup"): {"sha256": ["{sha256}"], "data": True},
    ("GET", "/sessions/{session_id}/blobs/{sha256}"): None,
    ("PUT", "/sessions/{session_id}/artifacts/{name}"): {"probe": "{n}"},
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

# The order the controls run in: reads, then writes, the ones that end a state last.
LAST = ["/cancel", "/pause", "/resume", "/hold", "/close"]


def control_order(op: tuple[str, str]) -> tuple[int, int, str, str]:
    method, path = op
    late = next((i for i, tail in enumerate(LAST) if path.endswith(tail)), -1)
    return (method != "GET", late, path, method)


class Api:
    """Raw HTTP against the app: no exception raised for a 500 (the probe counts it)."""

    def __init__(self) -> None:
        self.client = Client(raise_request_exception=False)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
    ):
        data = json.dumps(body) if body is not None else ""
        return self.client.generic(
            method,
            PREFIX + path,
            data=data,
            content_type="application/json" if body is not None else None,
            headers=headers or {},
        )


def bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


def error_code(response) -> str | None:
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def body_text(response) -> str:
    """The body, a streamed one (the export, from an async iterator) read to its end."""
    if not response.streaming:
        return response.content.decode(errors="replace")

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    if response.is_async:
        return async_to_sync(collect)().decode(errors="replace")
    return b"".join(response.streaming_content).decode(errors="replace")


def build_world(api: Api, admin_raw: str, tag: str) -> dict[str, str]:
    """A project's objects, made through its API as an agent would: a session with events, a
    hold and a linked task, a second session with an open handoff, a custom workflow."""
    auth = bearer(admin_raw)

    def ok(method: str, path: str, body: Any = None) -> dict:
        response = api.call(method, path, body, headers=auth)
        assert 200 <= response.status_code < 300, (path, response.status_code, response.content)
        return response.json()

    secret = f"secret-{tag}-{timezone.now().timestamp()}"
    session = ok(
        "POST",
        "/sessions",
        {
            "agent": f"agent-{tag}",
            "external_id": f"ext-{tag}",
            "title": secret,
            "metadata": {"owner": tag},
        },
    )
    ok(
        "POST",
        f"/sessions/{session['id']}/events",
        {
            "events": [
                {"kind": "message", "role": "user", "content": {"text": f"{secret} hello"}},
                {"kind": "fact", "content": {"key": "owner", "value": tag}},
                {"kind": "state", "content": {"stage": "probing"}},
            ]
        },
    )
    link = ok("POST", "/sessions", {"agent": f"agent-{tag}", "title": f"{secret} linked"})
    task = ok("POST", "/tasks", {"workflow": "document_approval", "session_ids": [session["id"]]})
    asking = ok("POST", "/sessions", {"agent": f"agent-{tag}", "title": f"{secret} asks"})
    handoff = ok(
        "POST",
        f"/sessions/{asking['id']}/handoffs",
        {"kind": "question", "reason": secret, "payload": {"question": "?"}},
    )
    blobs = ok(
        "POST",
        f"/sessions/{session['id']}/blobs",
        {"blobs": [{"data": base64.b64encode(secret.encode()).decode()}]},
    )
    # An artifact named as the signal (fill() gives every {name} outside workflows that name).
    ok("PUT", f"/sessions/{session['id']}/artifacts/review_decision", {"secret": secret})
    ok("POST", f"/sessions/{session['id']}/hold", {"reason": secret})
    spare_key = ok("POST", "/api-keys", {"name": f"spare {tag}"})
    endpoint = ok(
        "POST",
        "/webhooks",
        {"url": f"https://hooks.example.com/{tag}", "events": ["session.closed"]},
    )
    erasure = ok("POST", "/erasures", {"external_id": f"nobody-{tag}"})
    workflow = f"flow_{tag}"
    ok(
        "POST",
        "/workflows",
        {
            "name": workflow,
            "states": ["new", "done"],
            "initial": "new",
            "terminal": ["done"],
            "transitions": [{"from": "new", "to": "done", "name": "finish"}],
        },
    )
    return {
        "session_id": session["id"],
        "link_session_id": link["id"],
        "task_id": task["task"]["id"] if "task" in task else task["id"],
        "signal_token": task.get("signal_token", ""),
        "handoff_id": handoff["handoff"]["id"] if "handoff" in handoff else handoff["id"],
        "key": "draft",
        "workflow": workflow,
        "signal": "review_decision",
        "external_id": f"ext-{tag}",
        "agent": f"agent-{tag}",
        "secret": secret,
        "key_id": str(spare_key["id"]),
        "endpoint_id": str(endpoint["id"]),
        "sha256": blobs["blobs"][0]["sha256"],
        "erasure_id": erasure["id"],
    }


def fill(template: str, world: dict[str, str], n: int = 0) -> str:
    name = world["workflow"] if template.startswith("/workflows") else world["signal"]
    return template.format(**{**world, "name": name, "n": n})


def fill_body(body: Any, world: dict[str, str], n: int = 0) -> Any:
    if isinstance(body, dict):
        return {k: fill_body(v, world, n) for k, v in body.items()}
    if isinstance(body, list):
        return [fill_body(v, world, n) for v in body]
    if isinstance(body, str):
        return fill(body, world, n)
    return body


def operations(api: Api) -> tuple[list[tuple[str, str]], set[tuple[str, str]]]:
    """Every (METHOD, path) of the served document, and those that declare a 403 (the routes
    a key's scope can refuse: the admin routes)."""
    response = api.call("GET", "/openapi.json")
    assert response.status_code == 200
    ops, admin = [], set()
    for path, item in response.json()["paths"].items():
        assert path.startswith(PREFIX), path
        for method, operation in item.items():
            op = (method.upper(), path[len(PREFIX) :])
            ops.append(op)
            if "403" in operation.get("responses", {}):
                admin.add(op)
    return sorted(ops), admin


def test_probe_api_authorization():
    api = Api()
    own, other = make_project(), make_project()
    keys: dict[str, str] = {}
    for project, tag in ((own, "own"), (other, "other")):
        for scope in (KeyScope.AGENT, KeyScope.ADMIN):
            _, keys[f"{tag}-{scope}"] = create_api_key(
                project, name=f"{tag} {scope}", scope=scope, actor=Actor.system("probe")
            )
    worlds = {
        "own": build_world(api, keys["own-admin"], "own"),
        "other": build_world(api, keys["other-admin"], "other"),
    }

    # A revoked and an expired admin key of the own project, each used once first (so a
    # server process has it cached), the revocation made by an admin on the dashboard.
    revoked, revoked_raw = create_api_key(
        own, name="to revoke", scope=KeyScope.ADMIN, actor=Actor.system("probe")
    )
    expiry = timezone.now() + timedelta(hours=1)
    _, expired_raw = create_api_key(
        own, name="to expire", scope=KeyScope.ADMIN, expires_at=expiry, actor=Actor.system("p")
    )
    for raw in (revoked_raw, expired_raw):
        assert api.call("GET", "/project", headers=bearer(raw)).status_code == 200
    dashboard = Client()
    dashboard.force_login(make_member(own, Role.ADMIN))
    response = dashboard.post(f"/p/{own.pk}/keys/{revoked.pk}/revoke/")
    assert response.status_code == 302, response.status_code

    ops, admin_ops = operations(api)
    missing = sorted(set(ops) - set(BODIES))
    assert not missing, f"operations without a body in BODIES: {missing}"
    assert sorted(set(BODIES) - set(ops)) == [], "rows in BODIES for operations that are gone"
    assert ("PATCH", "/project") in admin_ops and ("GET", "/sessions") not in admin_ops

    good = keys["own-admin"]
    unauthenticated: dict[str, dict[str, str]] = {
        "no key": {},
        "garbage bearer": bearer("garbage"),
        "empty bearer": {"Authorization": "Bearer "},
        "wrong secret, real prefix": bearer(good.rsplit("_", 1)[0] + "_" + "A" * 32),
        "one character changed": bearer(good[:-1] + ("A" if good[-1] != "A" else "B")),
        "key plus junk": bearer(good + " junk"),
        "NUL in key": bearer(good[:10] + "\x00" + good[10:]),
        "oversized key": bearer("sb_" + "x" * 8000),
        "basic scheme": {"Authorization": "Basic " + "dXNlcjpwYXNz"},
        "key in another header": {"X-Api-Key": good},
        "signal token as bearer (own task)": bearer(worlds["own"]["signal_token"] + "x"),
        "revoked key": bearer(revoked_raw),
        "expired key": bearer(expired_raw),
    }

    tries: dict[str, int] = {"unauthenticated": 0, "cross_project": 0, "scope": 0}
    failures: list[str] = []
    server_errors: list[str] = []

    def expect(label: str, response, statuses: set[int], codes: set[str]) -> None:
        status = response.status_code
        if status >= 500:
            server_errors.append(f"{label}: {status}")
        if status not in statuses or (codes and error_code(response) not in codes):
            failures.append(f"{label}: {status} {error_code(response)} {body_text(response)[:200]}")

    def unchanged(label: str, before) -> dict:
        after = checksums()
        changed = changed_tables(before, after)
        if changed:
            failures.append(f"{label}: refused tries changed {changed}")
        return after

    drain()
    state = checksums()
    # 1. Without a valid key: 401, whichever project's objects the request names.
    for method, path in ops:
        worlds_named = ("own", "other") if "{" in path else ("own",)
        for which in worlds_named:
            world = worlds[which]
            url, body = fill(path, world), fill_body(BODIES[(method, path)], world)
            for name, headers in unauthenticated.items():
                travel = (
                    time_machine.travel(expiry + timedelta(hours=1), tick=True)
                    if name == "expired key"
                    else _nothing()
                )
                with travel:
                    response = api.call(method, url, body, headers=headers)
                tries["unauthenticated"] += 1
                expect(f"{name} {method} {url}", response, {401}, {"unauthorized"})
            state = unchanged(f"unauthenticated {method} {path} ({which})", state)

    # 2. Another project's keys (and its task's signal token) on the own project's objects:
    # 404, as if nothing were there; an agent key on an admin route may be refused first (403).
    own_world = worlds["own"]
    other_token = worlds["other"]["signal_token"]
    for method, path in ops:
        if "{" not in path:
            continue
        url, body = fill(path, own_world), fill_body(BODIES[(method, path)], own_world)
        credentials = {
            "other agent key": bearer(keys["other-agent"]),
            "other admin key": bearer(keys["other-admin"]),
        }
        if "/signals/" in path:
            credentials |= {
                "other task's signal token (bearer)": bearer(other_token),
                "other task's signal token (header)": {"X-Signal-Token": other_token},
            }
        for name, headers in credentials.items():
            response = api.call(method, url, body, headers=headers)
            tries["cross_project"] += 1
            allowed = {404} | ({403} if (method, path) in admin_ops and "agent" in name else set())
            expect(f"{name} {method} {url}", response, allowed, {"not_found", "forbidden"})
        if "/signals/" in path:
            response = api.call(method, f"{url}?signal_token={other_token}", body)
            tries["cross_project"] += 1
            expect(f"other token (query) {method} {url}", response, {404}, {"not_found"})
        state = unchanged(f"cross-project {method} {path}", state)

    # Body references and mixed paths: the other project's key naming the own project's
    # objects inside its own requests.
    ow, tw = own_world, worlds["other"]
    references = [
        ("POST", f"/tasks/{tw['task_id']}/sessions", {"session_ids": [ow["session_id"]]}),
        ("DELETE", f"/tasks/{tw['task_id']}/sessions/{ow['session_id']}", None),
        ("POST", "/tasks", {"workflow": "document_approval", "session_ids": [ow["session_id"]]}),
        ("POST", "/tasks", {"workflow": ow["workflow"]}),
        ("POST", "/sessions", {"agent": "probe", "task_ids": [ow["task_id"]]}),
        ("GET", f"/workflows/{ow['workflow']}", None),
    ]
    for scope in ("agent", "admin"):
        for method, url, body in references:
            response = api.call(method, url, body, headers=bearer(keys[f"other-{scope}"]))
            tries["cross_project"] += 1
            expect(f"other {scope} key {method} {url} {body}", response, {404, 422}, set())
    state = unchanged("body references", state)

    # 3. The own project's agent key on the admin routes, with either project's objects.
    for method, path in sorted(admin_ops):
        for which in ("own", "other") if "{" in path else ("own",):
            world = worlds[which]
            url, body = fill(path, world), fill_body(BODIES[(method, path)], world)
            response = api.call(method, url, body, headers=bearer(keys["own-agent"]))
            tries["scope"] += 1
            expect(f"own agent key {method} {url}", response, {403}, {"forbidden"})
    state = unchanged("agent key on admin routes", state)

    # 4. Lists of the other project, searched for the own project's objects by what an
    # attacker could know of them; and a session opened under the own project's external id.
    secret_ids = [ow[k] for k in ("session_id", "link_session_id", "task_id", "handoff_id")]
    secret_ids.append(ow["secret"])
    lists = [(method, path) for method, path in ops if method == "GET" and "{" not in path]
    queries = [
        "",
        f"?external_id={ow['external_id']}",
        f"?agent={ow['agent']}",
        f"?q={ow['secret']}",
        f"?name={ow['workflow']}",
        "?status=open",
    ]
    leaks = 0
    for scope in ("agent", "admin"):
        for method, path in lists:
            for query in queries:
                response = api.call(method, path + query, headers=bearer(keys[f"other-{scope}"]))
                leaks += 1
                if response.status_code >= 500:
                    server_errors.append(f"list {path}{query}: {response.status_code}")
                text = body_text(response)
                shown = [s for s in secret_ids if s in text]
                if shown:
                    failures.append(f"other {scope} key {path}{query} shows {shown}")
        response = api.call(
            "POST",
            "/sessions",
            {"agent": "probe", "external_id": ow["external_id"]},
            headers=bearer(keys[f"other-{scope}"]),
        )
        leaks += 1
        if response.status_code not in (200, 201) or response.json()["id"] == ow["session_id"]:
            failures.append(f"other {scope} key reached the own session by its external id")

    # 5. Controls: the owner's admin key, the same requests, reaches the objects.
    controls = 0
    for method, path in sorted(ops, key=control_order):
        url, body = fill(path, own_world, 99), fill_body(BODIES[(method, path)], own_world, 99)
        response = api.call(method, url, body, headers=bearer(good))
        controls += 1
        if response.status_code >= 500 or response.status_code in (401, 403, 404, 405, 422):
            failures.append(f"control {method} {url}: {response.status_code} {body_text(response)}")

    total = sum(tries.values()) + leaks
    report(
        "api authorization",
        operations=len(ops),
        tries=total,
        unauthenticated=tries["unauthenticated"],
        cross_project=tries["cross_project"],
        scope=tries["scope"],
        list_leak=leaks,
        controls=controls,
        server_errors=len(server_errors),
        failures=len(failures),
    )
    assert not server_errors + failures, "\n".join(server_errors + failures[:40])


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
