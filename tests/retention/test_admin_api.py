"""Retention through the API with an admin key (issue 24, admin API parity): starting a run,
the run history's pages, the holds list and the holds on session bodies, resetting the policy,
and PUT /retention/policy's schema naming the fields it requires."""

from datetime import timedelta
from unittest import mock

import pytest
import time_machine
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerDown

from core.actors import Actor
from core.models import AuditEntry, KeyScope
from retention_app.models import LegalHold, RetentionPolicy, RetentionRun, RunStatus
from retention_app.services.holds import lift_hold, place_hold
from retention_app.services.policies import save_policy
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_session
from tests.retention.helpers import POLICY, POLICY_BODY

pytestmark = pytest.mark.django_db
SYSTEM = Actor.system("tests")


@pytest.fixture
def admin(project):
    return ApiClient(make_api_key(project, name="admin", scope=KeyScope.ADMIN)[1])


# --- POST /retention/runs ----------------------------------------------------------------


def test_it_queues_both_jobs_as_the_page_does(project, admin):
    with mock.patch("retention_app.services.jobs.current_app.send_task") as send:
        response = admin.post("/retention/runs")
    assert response.status_code == 202, response.content
    runs = response.json()["runs"]
    assert [r["job"] for r in runs] == ["enforce_retention", "compact_sessions"]
    assert {r["status"] for r in runs} == {"queued"}
    key = project.api_keys.get(name="admin")
    assert {r["trigger"] for r in runs} == {f"key:{key.prefix}"}
    stored = RetentionRun.objects.filter(project=project).order_by("pk")
    assert [r.pk for r in stored] == [r["id"] for r in runs]
    assert [call.kwargs["kwargs"]["run_id"] for call in send.call_args_list] == [
        r["id"] for r in runs
    ]
    assert {tuple(call.kwargs["kwargs"]["project_ids"]) for call in send.call_args_list} == {
        (project.pk,)
    }


def test_with_the_broker_down_it_answers_503_and_the_runs_are_failed(project, admin):
    failing = mock.patch(
        "retention_app.services.jobs.current_app.send_task", side_effect=BrokerDown("refused")
    )
    with failing:
        response = admin.post("/retention/runs")
    assert response.status_code == 503, response.content
    error = response.json()["error"]
    assert error["code"] == "jobs_unavailable"
    runs = RetentionRun.objects.filter(project=project).order_by("pk")
    assert error["detail"] == {"runs": [r.pk for r in runs]}
    assert [r.status for r in runs] == [RunStatus.FAILED, RunStatus.FAILED]
    assert all(r.finished_at is not None for r in runs)


def test_an_agent_key_starts_no_run(project, api):
    with mock.patch("retention_app.services.jobs.current_app.send_task") as send:
        response = api.post("/retention/runs")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert not send.called and not RetentionRun.objects.exists()


# --- GET /retention/runs: limit and cursor --------------------------------------------------


def _runs(project, n: int) -> list[RetentionRun]:
    start = timezone.now() - timedelta(hours=1)
    made = []
    for i in range(n):
        # Two runs share each start time: the id breaks the tie.
        with time_machine.travel(start + timedelta(seconds=i // 2), tick=False):
            made.append(RetentionRun.objects.create(project=project, job="compact_sessions"))
    return made


def test_it_pages_the_runs_newest_first_with_a_cursor(project, admin, other_project):
    made = _runs(project, 7)
    _runs(other_project, 2)
    expected = [r.pk for r in sorted(made, key=lambda r: (r.started_at, r.pk), reverse=True)]
    seen, cursor, pages = [], None, 0
    while True:
        query = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        body = admin.get("/retention/runs", query).json()
        seen += [r["id"] for r in body["runs"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == expected and pages == 3
    # A run started after the first page was read does not shift the pages that follow.
    first = admin.get("/retention/runs", {"limit": 3}).json()
    RetentionRun.objects.create(project=project, job="enforce_retention")
    second = admin.get("/retention/runs", {"limit": 3, "cursor": first["next_cursor"]}).json()
    assert [r["id"] for r in second["runs"]] == expected[3:6]


@pytest.mark.parametrize("limit", ["0", "-1", "201", "abc", "1.5"])
def test_it_refuses_a_limit_out_of_range_naming_it(admin, limit):
    response = admin.get(f"/retention/runs?limit={limit}")
    assert response.status_code == 422, response.content
    detail = response.json()["error"]["detail"]
    assert [problem["loc"] for problem in detail] == [["query", "limit"]]


@pytest.mark.parametrize("limit", [1, 200])
def test_it_takes_the_limits_bounds(project, admin, limit):
    _runs(project, 2)
    body = admin.get("/retention/runs", {"limit": limit}).json()
    assert len(body["runs"]) == min(limit, 2)
    assert (body["next_cursor"] is None) == (limit >= 2)


@pytest.mark.parametrize(
    "cursor", ["garbage", "WyIyMDI2LTAxLTAxVDAwOjAwOjAwKzAwOjAwIiwgIngiLCAicnVucyJd", "%00"]
)
def test_it_refuses_a_cursor_it_did_not_issue(project, admin, cursor):
    _runs(project, 2)
    response = admin.get(f"/retention/runs?cursor={cursor}")
    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] == "invalid_input"


def test_a_cursor_of_another_list_is_refused(project, admin):
    for n in range(2):
        place_hold(project, session=make_session(project), reason=f"r{n}", actor=SYSTEM)
    _runs(project, 2)
    holds_cursor = admin.get("/holds", {"limit": 1}).json()["next_cursor"]
    response = admin.get("/retention/runs", {"cursor": holds_cursor})
    assert response.status_code == 422
    assert response.json()["error"]["detail"] == {"sort": "runs"}


# --- GET /holds and the holds on session bodies -------------------------------------------------


def test_it_lists_the_standing_holds_and_with_include_released_the_history(
    project, admin, other_project
):
    held = make_session(project, agent="bot")
    session_hold, _ = place_hold(project, session=held, reason="case 1", actor=SYSTEM)
    agent_hold, _ = place_hold(project, agent=held.agent, reason="case 2", actor=SYSTEM)
    lifted, _ = place_hold(project, reason="case 3", actor=SYSTEM)
    lift_hold(lifted, actor=SYSTEM)
    place_hold(other_project, reason="theirs", actor=SYSTEM)

    body = admin.get("/holds").json()
    assert [h["id"] for h in body["holds"]] == [agent_hold.pk, session_hold.pk]
    assert body["next_cursor"] is None
    by_id = {h["id"]: h for h in body["holds"]}
    assert by_id[agent_hold.pk]["scope"] == "agent" and by_id[agent_hold.pk]["agent"] == "bot"
    assert by_id[session_hold.pk]["session_id"] == str(held.pk)
    assert by_id[session_hold.pk]["released_at"] is None

    history = admin.get("/holds", {"include_released": "true"}).json()["holds"]
    assert [h["id"] for h in history] == [lifted.pk, agent_hold.pk, session_hold.pk]
    assert history[0]["released_at"] is not None and history[0]["released_by"] == "tests"

    first = admin.get("/holds", {"include_released": "true", "limit": 2}).json()
    rest = admin.get(
        "/holds", {"include_released": "true", "limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [h["id"] for h in first["holds"] + rest["holds"]] == [h["id"] for h in history]
    assert rest["next_cursor"] is None


def test_an_agent_key_does_not_list_holds(project, api):
    place_hold(project, reason="case", actor=SYSTEM)
    response = api.get("/holds")
    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"


def test_the_session_body_shows_the_holds_covering_it(project, api):
    held = make_session(project, agent="bot")
    free = make_session(project, agent="other")
    own, _ = place_hold(project, session=held, reason="own", actor=SYSTEM)
    agents, _ = place_hold(project, agent=held.agent, reason="agent's", actor=SYSTEM)

    body = api.get(f"/sessions/{held.pk}").json()
    assert [(h["id"], h["scope"]) for h in body["holds"]] == [
        (own.pk, "session"),
        (agents.pk, "agent"),
    ]
    assert [h["agent"] for h in body["holds"]] == [None, "bot"]
    assert api.get(f"/sessions/{free.pk}").json()["holds"] == []
    listed = {s["id"]: s["holds"] for s in api.get("/sessions").json()["sessions"]}
    assert [h["id"] for h in listed[str(held.pk)]] == [own.pk, agents.pk]
    assert [h["agent"] for h in listed[str(held.pk)]] == [None, "bot"]
    assert listed[str(free.pk)] == []

    # The project's hold covers every session, a new one too; a lifted hold is not shown.
    project_hold, _ = place_hold(project, reason="all", actor=SYSTEM)
    lift_hold(own, actor=SYSTEM)
    opened = api.post("/sessions", {"agent": "new"}).json()
    assert [h["id"] for h in opened["holds"]] == [project_hold.pk]
    body = api.get(f"/sessions/{held.pk}").json()
    assert [h["id"] for h in body["holds"]] == [agents.pk, project_hold.pk]


def test_the_sessions_list_reads_the_holds_in_one_query(
    project, api, django_assert_max_num_queries
):
    for n in range(5):
        session = make_session(project)
        place_hold(project, session=session, reason=f"r{n}", actor=SYSTEM)
        place_hold(project, agent=session.agent, reason=f"a{n}", actor=SYSTEM)
    api.get("/sessions")  # warm: the key is cached, the agent rows loaded
    with django_assert_max_num_queries(8) as counted:
        listed = api.get("/sessions").json()["sessions"]
    assert sum("legalhold" in q["sql"] for q in counted.captured_queries) == 1, [
        q["sql"][:120] for q in counted.captured_queries
    ]
    # The agent's hold comes with its agent's name from that same query: the page and its
    # holds are the request's only queries.
    assert all(s["holds"][1]["agent"] == s["agent"] for s in listed), listed
    assert len(counted.captured_queries) == 2, [q["sql"][:120] for q in counted.captured_queries]


# --- DELETE /retention/policy -----------------------------------------------------------------


def test_it_resets_the_policy_to_the_defaults_and_audits_it(project, admin, settings):
    make_session(project, agent="bot")
    save_policy(project, {**POLICY, "agents": {"bot": {"close_idle_after": 3600}}}, actor=SYSTEM)
    saved = admin.get("/retention/policy").json()
    assert not saved["defaults"] and saved["agents"]

    response = admin.delete("/retention/policy")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["defaults"] is True and body["agents"] == {}
    for name, seconds in settings.SWITCHBOARD_RETENTION_DEFAULTS.items():
        assert body[name] == seconds
    assert admin.get("/retention/policy").json() == body
    assert not RetentionPolicy.objects.filter(project=project).exists()
    entry = AuditEntry.objects.filter(project=project, action="retention.policy").latest("pk")
    key = project.api_keys.get(name="admin")
    assert entry.actor == f"key:{key.prefix}"
    assert entry.detail == {"old": saved, "new": body, "reset": True}

    # Again: nothing to reset, nothing recorded.
    audits = AuditEntry.objects.count()
    assert admin.delete("/retention/policy").json() == body
    assert AuditEntry.objects.count() == audits


def test_an_agent_key_does_not_reset_the_policy(project, api):
    save_policy(project, POLICY, actor=SYSTEM)
    response = api.delete("/retention/policy")
    assert response.status_code == 403
    assert RetentionPolicy.objects.filter(project=project).exists()


# --- PUT /retention/policy's schema -----------------------------------------------------------


def _served_schema():
    response = ApiClient(None).get("/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_the_served_schema_requires_what_the_server_requires(admin):
    schema = _served_schema()
    ref = schema["paths"]["/api/v1/retention/policy"]["put"]["requestBody"]["content"][
        "application/json"
    ]["schema"]["$ref"]
    policy_in = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    required = set(policy_in["required"])
    assert required == set(POLICY_BODY) - {"agents"}
    assert not {"agents", "defaults"} & required
    # Each required field, left out, is refused naming it; each optional one is not needed.
    for name in sorted(required):
        body = {k: v for k, v in POLICY_BODY.items() if k != name}
        response = admin.put("/retention/policy", body)
        assert response.status_code == 422, name
        assert ["body", "payload", name] in [p["loc"] for p in response.json()["error"]["detail"]]
    minimal = {k: v for k, v in POLICY_BODY.items() if k in required}
    assert admin.put("/retention/policy", minimal).status_code == 200
    # An override still names only the fields it changes.
    override = schema["components"]["schemas"]["PolicyFieldsIn"]
    assert "required" not in override


def test_lifting_a_hold_shows_it_released_in_the_history(project, admin):
    session = make_session(project)
    admin.post(f"/sessions/{session.pk}/hold", {"reason": "r"})
    admin.delete(f"/sessions/{session.pk}/hold")
    assert admin.get("/holds").json()["holds"] == []
    (hold,) = admin.get("/holds", {"include_released": "true"}).json()["holds"]
    assert hold["released_at"] is not None
    assert LegalHold.objects.get().pk == hold["id"]
