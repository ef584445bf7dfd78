"""A retention policy that keeps artifacts shorter than the log (artifact_max_age, issue 28 §1):
the policy validates like the other durations; the preview counts the versions a run deletes;
the enforce run deletes the versions saved longer ago through the artifacts service (an
`artifact` deletion event appended, the log kept, the files removed after commit) and keeps
newer ones, held sessions' and those a fork still shares; an agent's override wins; the API
and the dashboard form save it."""

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse

from core.errors import InvalidInput
from core.models import KeyScope
from retention_app.models import RetentionPolicy, RetentionRun
from retention_app.services.holds import place_hold
from retention_app.services.jobs import run_job
from retention_app.services.policies import project_policies, save_policy
from retention_app.services.preview import preview
from sessions_app.models import Artifact, Event, EventKind, Session
from sessions_app.services.artifacts import artifact_storage
from sessions_app.services.sessions import fork_session
from tests.conftest import ApiClient
from tests.dashboard.conftest import Team, team  # noqa: F401  (the fixture)
from tests.factories import make_api_key, make_artifact, make_session
from tests.retention.helpers import DAY, SYSTEM, append, archived, at, closed, conversation

pytestmark = pytest.mark.django_db

# Only the artifact rule: no session is closed, archived, compacted or deleted by these runs.
ONLY_ARTIFACTS = {
    "close_idle_after": None,
    "close_paused_after": None,
    "archive_closed_after": None,
    "compact_after": None,
    "delete_after": None,
    "outcome_compact_after": None,
    "outcome_delete_after": None,
    "artifact_max_age": 10 * DAY,
    "keep_outcomes": [],
    "keep_tags": [],
}


def saved_at(session: Session, days: float, name: str, data: bytes) -> Artifact:
    with time_machine.travel(at(days), tick=False):
        return make_artifact(session, name, data)


def enforce(project, days: float, capture) -> RetentionRun:
    """The enforce job at day `days`, its after-commit work (the files' removal) run."""
    with capture(execute=True), time_machine.travel(at(days), tick=False):
        (run,) = run_job("enforce_retention", trigger="test", project_ids=[project.pk])
    return run


def stored(artifact: Artifact) -> bool:
    return artifact_storage().exists(artifact.storage_key)


def is_deleted(artifact: Artifact) -> bool:
    artifact.refresh_from_db()
    return artifact.deleted_at is not None


@pytest.fixture
def old_and_new(project):
    """A closed session with two old versions of one name, one old of another, one new."""
    with time_machine.travel(at(0), tick=False):
        session = make_session(project, agent="bot")
        append(session, conversation(5))
    old = [saved_at(session, 1, "report", b"a" * 10), saved_at(session, 2, "report", b"b" * 20)]
    old.append(saved_at(session, 3, "chart.png", b"c" * 30))
    new = saved_at(session, 25, "report", b"d" * 40)
    with time_machine.travel(at(26), tick=False):
        closed(session)
    return session, old, new


def test_a_run_deletes_the_old_versions_keeps_the_new_and_the_log(
    project, old_and_new, django_capture_on_commit_callbacks
):
    session, old, new = old_and_new
    save_policy(project, ONLY_ARTIFACTS, actor=SYSTEM)
    events_before = list(Event.objects.filter(session=session).values_list("seq", "kind"))
    head_before = session.head_seq

    run = enforce(project, 30, django_capture_on_commit_callbacks)

    assert (run.artifacts_deleted, run.artifact_bytes_freed) == (3, 60)
    assert all(is_deleted(a) and not stored(a) for a in old)
    assert not is_deleted(new) and stored(new)
    session.refresh_from_db()
    assert session.status == "closed"  # the session and its log stay
    events_after = list(Event.objects.filter(session=session).order_by("seq"))
    assert [(e.seq, e.kind) for e in events_after[: len(events_before)]] == sorted(events_before)
    appended = events_after[len(events_before) :]
    assert session.head_seq == head_before + 2  # one deletion event per name
    assert {(e.kind, e.content["action"], e.content["name"]) for e in appended} == {
        (EventKind.ARTIFACT, "delete", "report"),
        (EventKind.ARTIFACT, "delete", "chart.png"),
    }
    by_name = {e.content["name"]: e.content["versions"] for e in appended}
    assert by_name == {"report": [1, 2], "chart.png": [1]}
    assert {a.deleted_seq for a in Artifact.objects.filter(deleted_at__isnull=False)} == {
        e.seq for e in appended
    }

    # Nothing left to do: the next run deletes nothing more.
    again = enforce(project, 31, django_capture_on_commit_callbacks)
    assert again.artifacts_deleted == 0 and not is_deleted(new)


def test_an_open_sessions_old_versions_go_and_its_idle_clock_stays(
    project, django_capture_on_commit_callbacks
):
    with time_machine.travel(at(0), tick=False):
        session = make_session(project)
    old = saved_at(session, 1, "notes", b"x")
    session.refresh_from_db()
    idle_since = session.updated_at
    save_policy(project, ONLY_ARTIFACTS, actor=SYSTEM)

    run = enforce(project, 30, django_capture_on_commit_callbacks)

    assert run.artifacts_deleted == 1 and is_deleted(old)
    session.refresh_from_db()
    assert session.status == "open" and session.updated_at == idle_since


def test_the_preview_counts_the_versions_the_run_deletes(
    project, old_and_new, django_capture_on_commit_callbacks
):
    save_policy(project, ONLY_ARTIFACTS, actor=SYSTEM)
    would = preview(project, project_policies(project), now=at(30)).as_dict()["would"]
    assert would["expire_artifacts"]["sessions"] == 1
    assert (would["expire_artifacts"]["versions"], would["expire_artifacts"]["artifact_bytes"]) == (
        3,
        60,
    )
    # Earlier, only the versions older than 10 days then.
    earlier = preview(project, project_policies(project), now=at(12.5)).as_dict()["would"]
    assert earlier["expire_artifacts"]["versions"] == 2

    run = enforce(project, 30, django_capture_on_commit_callbacks)
    assert run.artifacts_deleted == would["expire_artifacts"]["versions"]


@pytest.mark.parametrize("scope", ["session", "agent", "project"])
def test_held_sessions_keep_their_artifacts(
    project, old_and_new, scope, django_capture_on_commit_callbacks
):
    session, old, _ = old_and_new
    with time_machine.travel(at(0), tick=False):
        free = make_session(project, agent="free")
    free_old = saved_at(free, 1, "report", b"z")
    target = {"session": {"session": session}, "agent": {"agent": session.agent}, "project": {}}
    place_hold(project, actor=SYSTEM, reason="litigation", **target[scope])
    save_policy(project, ONLY_ARTIFACTS, actor=SYSTEM)

    would = preview(project, project_policies(project), now=at(30)).as_dict()["would"]
    run = enforce(project, 30, django_capture_on_commit_callbacks)

    assert not any(is_deleted(a) for a in old) and all(stored(a) for a in old)
    assert is_deleted(free_old) is (scope != "project")
    assert run.artifacts_deleted == would["expire_artifacts"]["versions"]


def test_an_agents_override_wins(project, django_capture_on_commit_callbacks):
    with time_machine.travel(at(0), tick=False):
        quick = make_session(project, agent="quick")
        slow = make_session(project, agent="slow")
        other = make_session(project, agent="other")
    versions = {s.agent.name: saved_at(s, 1, "report", b"r") for s in (quick, slow, other)}
    save_policy(
        project,
        {
            **ONLY_ARTIFACTS,
            "artifact_max_age": 20 * DAY,
            "agents": {"quick": {"artifact_max_age": 5 * DAY}, "slow": {"artifact_max_age": None}},
        },
        actor=SYSTEM,
    )
    # Day 10: only quick's (5 days) are due; day 30: other's too (20), never slow's.
    would = preview(project, project_policies(project), now=at(10)).as_dict()["would"]
    assert would["expire_artifacts"]["versions"] == 1
    enforce(project, 10, django_capture_on_commit_callbacks)
    assert [n for n, a in versions.items() if is_deleted(a)] == ["quick"]
    enforce(project, 30, django_capture_on_commit_callbacks)
    assert sorted(n for n, a in versions.items() if is_deleted(a)) == ["other", "quick"]


def test_a_version_a_fork_shares_stays_until_the_run_deletes_the_fork(
    project, django_capture_on_commit_callbacks
):
    with time_machine.travel(at(0), tick=False):
        parent = make_session(project)
    shared = saved_at(parent, 1, "report", b"shared")
    parent.refresh_from_db()
    with time_machine.travel(at(1.5), tick=False):
        fork = fork_session(parent, at_seq=parent.head_seq, actor=SYSTEM)
    own = saved_at(parent, 2, "report", b"after the fork point")
    with time_machine.travel(at(3), tick=False):
        archived(fork)
    # The fork is deleted from day 23 on (archived on day 3); the parent is open and stays.
    save_policy(project, {**ONLY_ARTIFACTS, "delete_after": 20 * DAY}, actor=SYSTEM)

    run = enforce(project, 15, django_capture_on_commit_callbacks)
    assert run.artifacts_deleted == 1 and run.deleted == 0
    assert is_deleted(own) and not is_deleted(shared) and stored(shared)

    # The run that deletes the fork deletes the version it shared too, as the preview says.
    would = preview(project, project_policies(project), now=at(30)).as_dict()["would"]
    assert would["delete"]["sessions"] == 1 and would["expire_artifacts"]["versions"] == 1
    run = enforce(project, 30, django_capture_on_commit_callbacks)
    assert run.deleted == 1 and run.artifacts_deleted == 1
    assert is_deleted(shared) and not stored(shared)
    assert not Session.objects.filter(pk=fork.pk).exists()


@pytest.mark.parametrize(
    ("value", "strict"),
    [(-5, False), (0, False), (100 * 366 * DAY, False), (True, True), ("60", True), (1.5, True)],
)
def test_a_bad_artifact_max_age_is_refused_and_nothing_saved(project, value, strict):
    make_session(project, agent="bot")
    for body, field in [
        ({**ONLY_ARTIFACTS, "artifact_max_age": value}, "artifact_max_age"),
        ({**ONLY_ARTIFACTS, "agents": {"bot": {"artifact_max_age": value}}}, "agents.bot."),
    ]:
        with pytest.raises(InvalidInput) as refused:
            save_policy(project, body, actor=SYSTEM)
        assert any(k.startswith(field) and "artifact_max_age" in k for k in refused.value.detail)

    admin = ApiClient(make_api_key(project, scope=KeyScope.ADMIN)[1])
    response = admin.put("/retention/policy", {**ONLY_ARTIFACTS, "artifact_max_age": value})
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] and error["message"]
    if strict:  # the schema's strict integer: named by its place in the body
        assert ["body", "payload", "artifact_max_age"] in [p["loc"] for p in error["detail"]]
    else:  # the service's range check, naming the field
        assert "artifact_max_age" in error["detail"]
    assert not RetentionPolicy.objects.exists()


def test_the_api_policy_round_trips_it(project):
    make_session(project, agent="bot")
    admin = ApiClient(make_api_key(project, scope=KeyScope.ADMIN)[1])
    body = {
        **ONLY_ARTIFACTS,
        "artifact_max_age": 7 * DAY,
        "agents": {"bot": {"artifact_max_age": 3600}},
    }
    response = admin.put("/retention/policy", body)
    assert response.status_code == 200, response.content
    got = admin.get("/retention/policy").json()
    assert got == response.json()
    assert got["artifact_max_age"] == 7 * DAY and got["agents"] == {
        "bot": {"artifact_max_age": 3600}
    }
    assert project_policies(project).effective[Session.objects.get().agent_id].artifact_max_age == (
        timedelta(hours=1)
    )
    # Left out of a PUT (a client from before the field): null, kept with the session.
    older = {k: v for k, v in body.items() if k != "artifact_max_age"}
    assert admin.put("/retention/policy", older).json()["artifact_max_age"] is None


def test_the_dashboard_form_saves_it_and_shows_it_like_the_others(team: Team):
    data = {
        "action": "save",
        "agents-TOTAL_FORMS": "0",
        "agents-INITIAL_FORMS": "0",
        "agents-MIN_NUM_FORMS": "0",
        "agents-MAX_NUM_FORMS": "1000",
        "keep_tags": "",
        "close_idle_after": "1",
        "close_idle_after_unit": "days",
        "artifact_max_age": "36",
        "artifact_max_age_unit": "hours",
    }
    admin = team.client("admin")
    url = reverse("dashboard:retention_policy", args=[team.project.pk])
    assert admin.post(url, data).status_code == 302
    assert project_policies(team.project).project.artifact_max_age == timedelta(hours=36)

    page = admin.get(reverse("dashboard:retention", args=[team.project.pk])).content.decode()
    assert 'name="artifact_max_age" value="36"' in page
    assert (
        '<option value="hours" selected>hours</option>'
        in page.split('name="artifact_max_age_unit"', 1)[1].split("</select>", 1)[0]
    )
    assert "Delete artifact versions older than" in page
    viewer = team.client("viewer").get(reverse("dashboard:retention", args=[team.project.pk]))
    assert "36 hours" in viewer.content.decode()

    # Emptied: kept as long as the session.
    assert admin.post(url, {**data, "artifact_max_age": ""}).status_code == 302
    assert project_policies(team.project).project.artifact_max_age is None


def test_the_run_history_shows_the_versions_a_run_deleted(team: Team):
    RetentionRun.objects.create(
        project=team.project,
        job="enforce_retention",
        status="succeeded",
        artifacts_deleted=3,
        artifact_bytes_freed=2048,
    )
    page = team.client("viewer").get(reverse("dashboard:retention", args=[team.project.pk]))
    text = " ".join(page.content.decode().split())
    assert '<span class="artifacts-deleted">3 artifact versions</span>' in text
    assert "(2.0 KB)" in text


def test_the_pages_preview_counts_the_versions_of_the_policy_being_edited(team: Team):
    with time_machine.travel(at(0), tick=False):
        session = make_session(team.project)
    saved_at(session, 1, "report", b"r" * 1500)
    saved_at(session, 2, "report", b"r" * 1500)
    data = {
        "action": "preview",
        "agents-TOTAL_FORMS": "0",
        "agents-INITIAL_FORMS": "0",
        "keep_tags": "",
        "artifact_max_age": "1",
        "artifact_max_age_unit": "days",
    }
    url = reverse("dashboard:retention_policy", args=[team.project.pk])
    page = team.client("admin").post(url, data).content.decode()
    row = " ".join(page.split('id="preview-expire_artifacts"', 1)[1].split("</tr>", 1)[0].split())
    assert '<td class="count">1</td>' in row
    assert '<span class="artifact-versions">2 artifact versions</span>' in row
    assert "2.9 KB" in row
    assert not RetentionPolicy.objects.exists()  # a preview saves nothing
