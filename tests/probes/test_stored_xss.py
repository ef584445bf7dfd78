"""Probe 4: stored (and a few reflected) cross-site scripting, in headless Chromium (issue 23).

Hostile strings go into every user-controlled field the pages show, each through the door a
client uses (the agent API, the dashboard's forms): session title, external id, metadata keys
and values, agent name, event contents of every kind, facts, working state, lifecycle reasons,
forks, handoff reasons, questions, choices, approval actions and arguments, the humans'
answers, messages, facts and state patches, task params, metadata, transitions, step errors,
inputs, outputs, branches, signals, workflow titles, legal holds, retention overrides, project
names, API key names, webhook URLs, and the audit entries all of these write. Each field gets
its own marker (q001q, q002q, …) inside payloads that try script tags, event handlers on
images, SVG and details elements, attribute break-outs (" and '), closing </textarea>,
</title>, </style>, </script>, javascript: links and forms, iframes, htmx attributes
(hx-on, hx-trigger=load) and template syntax ({{ }}, {% %}, ${}).

Then every page that shows them is loaded in Chromium, as the project's admin (and the Django
admin's pages as a superuser), with htmx fragments swapped in and live updates pushed while
pages are open. Nothing may run or be made from a payload: no call of window.__xss, no dialog,
no CSP violation, no element with a payload's data-xss attribute, no frame, no javascript:
URL. Every field's marker must be seen on some page (else its payload was never tested).
"""

import json
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from django.contrib import admin
from django.db import connection
from django.test import Client

from core.actors import Actor
from core.models import KeyScope, Role
from core.services.projects import create_api_key
from sessions_app.services.snapshots import drain
from tests.conftest import skip_unless_ci
from tests.factories import make_member, make_project, make_user
from tests.probes import browser
from tests.probes.summary import report
from tests.servers import asgi_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

# Fields a hostile string was stored in: marker -> what it is.
FIELDS: dict[str, str] = {}


# Stored, and shown on no page (so not tested here), with the reason.
NOT_SHOWN = {
    "idempotency key": "only the API's event slices return it; no page shows it",
}


def marker(what: str) -> str:
    m = f"q{len(FIELDS) + 1:03d}q"
    FIELDS[m] = what
    return m


def long(what: str) -> str:
    """Every trick at once (about 1000 characters), for free-text fields."""
    m = marker(what)
    return (
        f"{m} <script>__xss('{m}.script')</script>"
        f'<img src=x onerror="__xss(\'{m}.img\')" data-xss="{m}">'
        f'"><svg onload="__xss(\'{m}.dq\')" data-xss="{m}"></svg>'
        f'\'><details open ontoggle="__xss(\'{m}.sq\')" data-xss="{m}"></details>'
        f"</textarea></title></style></script></noscript>"
        f'<img src=x onerror="__xss(\'{m}.close\')" data-xss="{m}">'
        f'<a href="javascript:__xss(\'{m}.href\')" data-xss="{m}">x</a>'
        f'<svg data-xss="{m}"><animate onbegin="alert(\'{m}.alert\')" attributeName="x"'
        f' dur="1s"></animate></svg>'
        f'<form action="javascript:__xss(\'{m}.form\')" data-xss="{m}"><button>b</button></form>'
        f'<iframe srcdoc="<script>parent.__xss(\'{m}.frame\')</script>" data-xss="{m}"></iframe>'
        f'<div hx-get="/" hx-trigger="load" hx-on::before-request="__xss(\'{m}.htmx\')"'
        f' data-xss="{m}"></div>'
        f"{{{{ 7|add:'{m}' }}}} {{% now 'Y' %}} ${{{{__xss('{m}.tpl')}}}} "
        f"javascript:__xss('{m}.bare')"
    )


def mid(what: str) -> str:
    """Under 200 characters (titles)."""
    m = marker(what)
    return (
        f"{m} <script>__xss('{m}.s')</script>"
        f'"\'><img src=x onerror="__xss(\'{m}.i\')" data-xss="{m}">'
        f'</textarea></title><svg onload="__xss(\'{m}.v\')" data-xss="{m}"></svg>{{{{ 7 }}}}'
    )


def short(what: str) -> str:
    """Under 100 characters (names)."""
    m = marker(what)
    return f"{m}\"'><img src=x onerror=__xss('{m}') data-xss={m}></textarea>{{{{7}}}}"


def url_payload(what: str) -> str:
    """A URL a URL field may accept (no spaces), breaking out of an attribute if it can."""
    m = marker(what)
    return f'https://hooks.example.com/{m}"\'><img/src="x"/onerror="__xss(\'{m}\')"/data-xss="{m}">'


class Api:
    """The agent API as an agent calls it (through the test client: same database)."""

    def __init__(self, raw_key: str) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {raw_key}"}

    def __call__(self, method: str, path: str, body: Any = None) -> dict:
        response = self.client.generic(
            method,
            f"/api/v1{path}",
            json.dumps(body) if body is not None else "",
            content_type="application/json",
            headers=self.headers,
        )
        assert 200 <= response.status_code < 300, (path, response.status_code, response.content)
        return response.json() if response.content else {}


def store_everything(own, admin_user, operator_user) -> dict[str, Any]:
    """Hostile strings in every field, written as clients write them; the ids to visit."""
    _, raw = create_api_key(own, name="xss probe", scope=KeyScope.ADMIN, actor=Actor.system("p"))
    api = Api(raw)
    dashboard = Client()
    dashboard.force_login(admin_user)

    def post(url: str, data: dict) -> None:
        response = dashboard.post(url, data)
        assert response.status_code in (200, 201, 302), (url, response.status_code)

    agent = short("agent name")
    session = api(
        "POST",
        "/sessions",
        {
            "agent": agent,
            "external_id": short("session external id"),
            "title": mid("session title"),
            "metadata": {
                short("metadata key"): long("metadata value"),
                "tags": [short("metadata tag")],
                "nested": {"list": [long("nested metadata value")]},
            },
            "budget": {"max_tokens": 10_000_000},
        },
    )
    sid = session["id"]
    events = [
        {"kind": "message", "role": "user", "content": {"text": long("user message")}},
        {
            "kind": "message",
            "role": "assistant",
            "content": {"text": long("assistant message"), "html": long("message extra key")},
        },
        {"kind": "message", "role": "system", "content": {"text": long("system message")}},
        {"kind": "message", "role": "tool", "content": {"text": long("tool message")}},
        {
            "kind": "tool_call",
            "content": {
                "name": short("tool call name"),
                "arguments": {short("tool argument key"): long("tool argument value")},
            },
        },
        {
            "kind": "tool_result",
            "content": {
                "name": short("tool result name"),
                "result": long("tool result"),
                "error": long("tool result error"),
            },
        },
        {"kind": "note", "content": {short("note key"): long("note value")}},
        {"kind": "error", "content": {"type": short("error type"), "message": long("error")}},
        {
            "kind": "decision",
            "content": {"decision": long("decision"), "rationale": long("decision rationale")},
        },
        {
            "kind": "state",
            "content": {
                short("state key"): long("state value"),
                "nested": {"deep": [long("nested state value")]},
            },
        },
        {"kind": "fact", "content": {"key": short("fact key"), "value": long("fact value")}},
        {"kind": "fact", "content": {"key": "structured", "value": {"v": long("fact object")}}},
        {
            "kind": "message",
            "role": "user",
            "content": {"text": "keyed"},
            "idempotency_key": short("idempotency key"),
        },
    ]
    api("POST", f"/sessions/{sid}/events", {"events": events})
    api("POST", f"/sessions/{sid}/pause", {"reason": long("pause reason")})
    api("POST", f"/sessions/{sid}/resume", {"reason": long("resume reason")})
    fork = api(
        "POST",
        f"/sessions/{sid}/fork",
        {"at_seq": 4, "title": mid("fork title")},
    )
    api("POST", f"/sessions/{sid}/hold", {"reason": long("legal hold reason (API)")})

    # Handoffs: a question (answered by a person), an approval (claimed, its edit form shown),
    # a takeover (a person writes in the session), one left open in the queue.
    def asking(kind: str, payload: dict, what: str) -> tuple[str, str]:
        s = api("POST", "/sessions", {"agent": agent, "title": mid(f"{what} session title")})
        h = api(
            "POST",
            f"/sessions/{s['id']}/handoffs",
            {"kind": kind, "reason": long(f"{what} reason"), "payload": payload},
        )
        return s["id"], h["handoff"]["id"] if "handoff" in h else h["id"]

    choice = short("question choice")
    _, question = asking(
        "question",
        {"question": long("question"), "choices": [choice, short("second choice")]},
        "question",
    )
    _, approval = asking(
        "approval",
        {
            "action_request": {
                "action": short("approval action"),
                "args": {short("approval argument key"): long("approval argument value")},
            },
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": long("approval description"),
        },
        "approval",
    )
    _, takeover = asking("takeover", {"context": long("takeover payload")}, "takeover")
    _, waiting = asking("question", {"question": long("open question")}, "open question")
    post(f"/handoffs/{question}/claim/", {})
    post(f"/handoffs/{question}/respond/", {"text": long("human answer"), "choice": choice})
    post(f"/handoffs/{approval}/claim/", {})
    post(f"/handoffs/{takeover}/claim/", {})
    post(f"/handoffs/{takeover}/take-over/", {})
    post(f"/handoffs/{takeover}/message/", {"text": long("human message")})
    post(
        f"/handoffs/{takeover}/facts/",
        {"key": short("human fact key"), "value": json.dumps(long("human fact value"))},
    )
    post(
        f"/handoffs/{takeover}/state/",
        {"patch": json.dumps({"human": long("human state patch")}), "confirm": "on"},
    )

    # Tasks: the built-in workflow with hostile params and steps; a custom workflow.
    api(
        "POST",
        "/workflows",
        {
            "name": "probe_flow",
            "title": mid("workflow title"),
            "description": long("workflow description"),
            "states": ["new", "done"],
            "initial": "new",
            "terminal": ["done"],
            "transitions": [{"from": "new", "to": "done", "name": "finish"}],
            "steps": [{"key": "only", "title": mid("workflow step title")}],
        },
    )
    created = api(
        "POST",
        "/tasks",
        {
            "workflow": "document_approval",
            "params": {short("task param key"): long("task param value")},
            "metadata": {"m": long("task metadata")},
            "external_id": short("task external id"),
            "session_ids": [sid],
        },
    )
    task = created["task"]["id"] if "task" in created else created["id"]
    api(
        "PUT",
        f"/tasks/{task}/steps/draft",
        {
            "status": "failed",
            "error": {
                "type": short("step error type"),
                "message": long("step error message"),
                "detail": {"d": long("step error detail")},
            },
            "inputs": {short("step input key"): long("step input value")},
            "agent": short("step agent"),
            "reason": long("step change reason"),
        },
    )
    api(
        "PUT",
        f"/tasks/{task}/steps/publish",
        {
            "status": "succeeded",
            "outputs": {short("step output key"): long("step output value")},
            "branch": short("step branch"),
        },
    )
    api(
        "PUT", f"/tasks/{task}/steps/review", {"status": "waiting", "waiting_on": {"signal": "sig"}}
    )
    api(
        "POST",
        f"/tasks/{task}/transitions",
        {"to": "sent_for_review", "reason": long("transition")},
    )
    api("POST", f"/tasks/{task}/signals/sig", {"payload": {"p": long("signal payload")}})
    custom = api(
        "POST", "/tasks", {"workflow": "probe_flow", "params": {"p": long("custom param")}}
    )
    custom_task = custom["task"]["id"] if "task" in custom else custom["id"]

    # The project's console and retention: names, keys, webhooks, holds, overrides.
    post(f"/p/{own.pk}/keys/create/", {"name": short("API key name"), "scope": "agent"})
    post(
        f"/p/{own.pk}/webhooks/new/",
        {"url": url_payload("webhook URL"), "events": ["session.paused"]},
    )
    post(f"/p/{own.pk}/retention/holds/", {"target": "project", "reason": long("project hold")})
    api(
        "PUT",
        "/retention/policy",
        {
            "close_idle_after": 3600,
            "close_paused_after": None,
            "archive_closed_after": 86400,
            "compact_after": 86400,
            "delete_after": None,
            "outcome_compact_after": None,
            "outcome_delete_after": None,
            "keep_outcomes": ["error"],
            "keep_tags": [short("retention keep tag")],
            "agents": {agent: {"compact_after": 7200}},
        },
    )
    post(f"/p/{own.pk}/settings/name/", {"name": short("project name (renamed)")})
    # Something paused after the webhook exists: a delivery to show.
    api("POST", f"/sessions/{fork['id']}/pause", {"reason": long("fork pause reason")})
    return {
        "session": sid,
        "fork": fork["id"],
        "question": question,
        "approval": approval,
        "takeover": takeover,
        "waiting": waiting,
        "task": task,
        "custom_task": custom_task,
        "api": api,
        "agent": agent,
        "raw_key": raw,
    }


def admin_pages_with_markers() -> list[str]:
    """The Django admin's change page of an object of each model with a stored payload."""
    pages = []
    with connection.cursor() as cursor:
        for model in admin.site._registry:
            meta = model._meta
            table = connection.ops.quote_name(meta.db_table)
            pk = connection.ops.quote_name(meta.pk.column)
            cursor.execute(
                f"SELECT {pk} FROM {table} t WHERE to_jsonb(t)::text ~ 'q[0-9]{{3}}q' LIMIT 1"
            )
            row = cursor.fetchone()
            if row is None:
                continue
            # The change page: the admin's own HTML (links, the latest events) is built there;
            # its lists show plain fields.
            pages.append(f"/admin/{meta.app_label}/{meta.model_name}/{quote(str(row[0]))}/change/")
    return pages


def test_probe_stored_xss():
    if not browser.available():
        skip_unless_ci("chromium missing", "CI installs chromium (bash .ci/run)")
    FIELDS.clear()
    own = make_project(short("project name"))
    make_project(short("other project name (switcher)"))
    admin_user = make_member(own, Role.ADMIN)
    from core.models import Project
    from core.services.projects import add_member

    add_member(Project.objects.exclude(pk=own.pk).get(), admin_user, Role.VIEWER)
    operator = make_member(own, Role.OPERATOR)
    ids = store_everything(own, admin_user, operator)
    superuser = make_user()
    superuser.is_staff = superuser.is_superuser = True
    superuser.save()
    drain()

    def cookie_of(user) -> dict[str, str]:
        c = Client()
        c.force_login(user)
        return {"sessionid": c.cookies["sessionid"].value}

    p = f"/p/{own.pk}"
    s, t = ids["session"], ids["task"]
    reflected = long("reflected query")
    visits = [
        browser.Visit(f"{p}/"),
        browser.Visit(
            f"{p}/sessions/",
            swaps=[(f"{p}/sessions/", "#session-results")],
        ),
        browser.Visit(f"{p}/sessions/?{urlencode({'q': reflected, 'agent': reflected})}"),
        browser.Visit(f"{p}/sessions/?{urlencode({'status': reflected})}"),
        browser.Visit(
            f"/sessions/{s}/",
            swaps=[
                (f"/sessions/{s}/?seq=3", "#event-log"),
                (f"/sessions/{s}/?at=12", "#moment"),
                (f"/sessions/{s}/inspector/?at_seq=12", "#inspector"),
            ],
            clicks=['[hx-get*="/events/"]'],
        ),
        browser.Visit(f"/sessions/{s}/?at=11"),
        browser.Visit(f"/sessions/{ids['fork']}/"),
        browser.Visit(f"{p}/handoffs/", swaps=[(f"{p}/handoffs/", "#queue-results")]),
        *(
            browser.Visit(f"/handoffs/{ids[k]}/", clicks=['[hx-get*="/messages/"]'])
            for k in ("question", "approval", "takeover", "waiting")
        ),
        browser.Visit(f"{p}/tasks/", swaps=[(f"{p}/tasks/", "#task-results")]),
        browser.Visit(f"/tasks/{t}/", swaps=[(f"/tasks/{t}/", "#task-history")]),
        browser.Visit(f"/tasks/{ids['custom_task']}/"),
        browser.Visit(f"{p}/retention/", clicks=["[data-add-override]"]),
        browser.Visit(f"{p}/settings/"),
        browser.Visit(f"{p}/members/"),
        browser.Visit(f"{p}/keys/"),
        browser.Visit(f"{p}/webhooks/"),
        browser.Visit(f"{p}/audit/", swaps=[(f"{p}/audit/", "#audit-results")]),
        browser.Visit(f"{p}/audit/?{urlencode({'action': reflected, 'target_type': reflected})}"),
        browser.Visit("/projects/new/"),
        browser.Visit(f"/accounts/login/?{urlencode({'next': reflected})}", who="anonymous"),
        browser.Visit(f"/no-such-page/{quote(reflected)}", who="anonymous"),
        browser.Visit("/admin/sessions_app/session/", who="superuser"),
        *(browser.Visit(url, who="superuser") for url in admin_pages_with_markers()),
    ]

    # Live updates, pushed over HTTP by an agent while the page is open.
    with asgi_server() as base_url:
        agent_headers = {"Authorization": f"Bearer {ids['raw_key']}"}

        def pushed(method: str, path: str, body: dict) -> None:
            response = httpx.request(
                method, f"{base_url}/api/v1{path}", json=body, headers=agent_headers, timeout=10
            )
            assert response.status_code < 300, response.text

        live_text = long("live event text")
        live_title = mid("live session title")
        live_reason = long("live handoff reason")
        live_output = long("live step output")
        live_rename = short("live project rename")
        m = lambda payload: payload.split(" ", 1)[0].split('"', 1)[0]  # noqa: E731
        visits += [
            browser.Visit(
                f"/sessions/{s}/",
                live=[
                    (
                        lambda: pushed(
                            "POST",
                            f"/sessions/{s}/events",
                            {
                                "events": [
                                    {
                                        "kind": "message",
                                        "role": "user",
                                        "content": {"text": live_text},
                                    },
                                    {
                                        "kind": "fact",
                                        "content": {"key": "live", "value": live_text},
                                    },
                                ]
                            },
                        ),
                        m(live_text),
                    )
                ],
            ),
            browser.Visit(
                f"{p}/sessions/",
                live=[
                    (
                        lambda: pushed("POST", "/sessions", {"agent": "live", "title": live_title}),
                        m(live_title),
                    )
                ],
            ),
            browser.Visit(
                f"{p}/handoffs/",
                live=[
                    (
                        lambda: pushed(
                            "POST",
                            f"/sessions/{ids['fork']}/handoffs",
                            {
                                "kind": "question",
                                "reason": live_reason,
                                "payload": {"question": "?"},
                            },
                        ),
                        m(live_reason),
                    )
                ],
            ),
            browser.Visit(
                f"/tasks/{t}/",
                live=[
                    (
                        lambda: pushed(
                            "PUT",
                            f"/tasks/{t}/steps/revise",
                            {"status": "succeeded", "outputs": {"o": live_output}},
                        ),
                        m(live_output),
                    )
                ],
            ),
            browser.Visit(
                f"{p}/audit/",
                live=[(lambda: pushed("PATCH", "/project", {"name": live_rename}), m(live_rename))],
            ),
        ]
        seen = browser.run(
            base_url,
            {
                "admin": cookie_of(admin_user),
                "superuser": cookie_of(superuser),
                "anonymous": {},
            },
            visits,
        )

    problems = [f"{v.url}: {r}" for v in seen for r in v.ran]
    by_page = [
        f"{v.url}: executed {sorted(set(v.hits))}, dialogs {v.dialogs}, "
        f"elements from payloads {sorted(set(v.injected))}, CSP violations {len(v.csp)}, "
        f"frames {len(v.frames)}, javascript: URLs {len(v.js_urls)}"
        for v in seen
        if v.ran
    ]
    shown_on: dict[str, list[str]] = {m: [] for m in FIELDS}
    for v in seen:
        for found in v.markers:
            if found in shown_on:
                shown_on[found].append(v.url)
    never_shown = sorted(
        f"{m} {FIELDS[m]}"
        for m, pages in shown_on.items()
        if not pages and FIELDS[m] not in NOT_SHOWN
    )
    live_missed = [f"{v.url}: {miss}" for v in seen for miss in v.live_missed]
    report(
        "stored xss",
        fields=len(FIELDS),
        page_loads=len(seen),
        fragment_swaps=sum(v.swaps + v.clicks for v in seen),
        live_pushes=sum(v.live_seen for v in seen),
        live_missed=len(live_missed),
        executed=sum(len(v.hits) + len(v.dialogs) for v in seen),
        injected=len(problems) - sum(len(v.hits) + len(v.dialogs) for v in seen),
        never_shown=len(never_shown),
    )
    print("never shown:", never_shown, "\nlive missed:", live_missed)
    for v in seen:
        print(f"  {v.seconds:5.2f}s {v.url[:90]}")
    assert not problems, "\n".join(by_page)
    assert not never_shown, never_shown
    assert not live_missed, live_missed
