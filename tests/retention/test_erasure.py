"""Erasure of a data subject (issue 28 §2): selectors, preview, the job's effect, the receipt,
the guard's one escape hatch, 410 after erasure, legal holds, audit and webhook scrubbing, and
the API (roles, other projects, bad input)."""

import hashlib
import json
from unittest import mock

import pytest
from django.db import connection, transaction
from django.db.utils import InternalError, ProgrammingError

from core.actors import Actor
from core.models import AuditEntry, KeyScope, WebhookDelivery
from core.services.audit import record_audit
from core.services.webhooks import create_endpoint
from handoffs_app.models import Handoff
from handoffs_app.services.handoffs import request_handoff
from retention_app.erasure_queries import receipt_chunks
from retention_app.models import ErasedObject, ErasureRequest, ErasureStatus, ErasureTarget
from retention_app.services.erasure import (
    matching_sessions,
    preview_erasure,
    request_erasure,
    run_erasure,
)
from retention_app.services.holds import lift_hold, place_hold
from sessions_app.models import Artifact, Event, Session, Snapshot
from sessions_app.services.artifacts import artifact_storage
from sessions_app.services.events import EventDraft
from sessions_app.services.lifecycle import pause_session
from sessions_app.services.sessions import fork_session
from sessions_app.services.state import take_snapshot
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_artifact, make_session
from tests.retention.helpers import append, conversation

pytestmark = pytest.mark.django_db
SYSTEM = Actor.system("tests")
SUBJECT = "alice@example.com"


@pytest.fixture
def admin(project):
    return ApiClient(make_api_key(project, name="admin", scope=KeyScope.ADMIN)[1])


@pytest.fixture(autouse=True)
def _no_broker():
    """The request queues the job; the tests here run it in-process (run_erasure), the real
    worker is tests/retention/test_erasure_celery.py's."""
    with mock.patch("retention_app.services.erasure.current_app.send_task") as send:
        yield send


def subject_session(project, n=14, **overrides):
    session = make_session(
        project,
        external_id=overrides.pop("external_id", f"user-42/{n}"),
        metadata=overrides.pop("metadata", {"user": "42"}),
        title=overrides.pop("title", f"Chat with {SUBJECT}"),
        **overrides,
    )
    append(session, conversation(n))
    append(session, [EventDraft(kind="fact", content={"key": "email", "value": SUBJECT})])
    return session


def bystander(project):
    session = make_session(project, external_id="user-7/1", metadata={"user": "7"})
    append(session, conversation(10))
    return session


def erase(project, selectors, *, actor=SYSTEM):
    erasure = request_erasure(project, selectors, actor=actor)
    return run_erasure(erasure.pk)


# --- Selectors ------------------------------------------------------------------------------


def test_each_selector_finds_the_subject_and_all_given_must_match(project):
    alice = subject_session(project, agent="support")
    other_agent = subject_session(project, external_id="user-42/b", agent="sales")
    bob = bystander(project)
    assert {s.pk for s in matching_sessions(project.pk, {"external_id": "user-42/14"})} == {
        alice.pk
    }
    by_prefix = matching_sessions(project.pk, {"external_id_prefix": "user-42/"})
    assert {s.pk for s in by_prefix} == {alice.pk, other_agent.pk}
    by_meta = matching_sessions(project.pk, {"metadata": {"key": "user", "value": "42"}})
    assert {s.pk for s in by_meta} == {alice.pk, other_agent.pk}
    by_fact = matching_sessions(project.pk, {"fact": {"key": "email", "value": SUBJECT}})
    assert {s.pk for s in by_fact} == {alice.pk, other_agent.pk}
    narrowed = matching_sessions(
        project.pk, {"metadata": {"key": "user", "value": "42"}, "agent": "sales"}
    )
    assert [s.pk for s in narrowed] == [other_agent.pk]
    assert bob.pk not in {s.pk for s in by_prefix + by_meta + by_fact}


def test_a_fork_of_a_matching_session_is_part_of_the_subject(project):
    alice = subject_session(project)
    fork = fork_session(alice, at_seq=5, actor=SYSTEM, external_id="unrelated")
    found = matching_sessions(project.pk, {"external_id": alice.external_id})
    assert [s.pk for s in found] == [alice.pk, fork.pk]


# --- Preview --------------------------------------------------------------------------------


def test_the_preview_counts_what_would_go_and_changes_nothing(project):
    alice = subject_session(project, n=14)
    take_snapshot(alice, alice.head_seq, reason="agent")
    request_handoff(
        alice,
        kind="question",
        reason=f"ask {SUBJECT}",
        payload={"question": f"mail {SUBJECT}?"},
        actor=SYSTEM,
    )
    bystander(project)
    record_audit(
        project,
        actor=SYSTEM,
        action="note",
        target_type="project",
        target_id=project.pk,
        detail={"said": f"mail {SUBJECT}"},
    )
    events = Event.objects.filter(session=alice).count()
    preview = preview_erasure(project, {"metadata": {"key": "user", "value": "42"}})
    counts = preview.counts
    assert counts["sessions"] == 1
    assert counts["events"] == events
    assert counts["facts"] == Event.objects.filter(session=alice, kind="fact").count()
    assert counts["snapshots"] == Snapshot.objects.filter(session=alice).count() >= 1
    assert counts["handoffs"] == 1
    assert counts["artifacts"] == 0
    # The session's own audit entries (opened, handoff, snapshot…) and the one naming a value.
    assert counts["audit_entries"] >= 2
    assert Event.objects.filter(session=alice).count() == events
    assert not ErasureRequest.objects.exists()


# --- The job and its receipt ------------------------------------------------------------------


def test_erasure_removes_everything_of_the_subject_and_nothing_else(project):
    alice = subject_session(project)
    fork = fork_session(alice, at_seq=4, actor=SYSTEM)
    append(fork, conversation(3))
    take_snapshot(alice, alice.head_seq, reason="agent")
    handoff = request_handoff(
        alice, kind="question", reason=f"call {SUBJECT}", payload={"question": "ok?"}, actor=SYSTEM
    ).handoff
    bob = bystander(project)
    bob_events = Event.objects.filter(session=bob).count()
    own = {s.pk: Event.objects.filter(session=s).count() for s in (alice, fork)}

    erasure = erase(project, {"fact": {"key": "email", "value": SUBJECT}})

    assert erasure.status == ErasureStatus.DONE
    assert not Session.objects.filter(pk__in=[alice.pk, fork.pk]).exists()
    assert not Event.objects.filter(session_id__in=[alice.pk, fork.pk]).exists()
    assert not Snapshot.objects.filter(session_id=alice.pk).exists()
    assert not Handoff.objects.filter(pk=handoff.pk).exists()
    assert Event.objects.filter(session=bob).count() == bob_events
    assert erasure.counts["sessions"] == 2
    assert erasure.counts["events"] == sum(own.values())
    assert erasure.counts["handoffs"] == 1
    assert set(
        ErasureTarget.objects.filter(erasure=erasure).values_list("session_id", flat=True)
    ) == {
        alice.pk,
        fork.pk,
    }


def test_the_subjects_artifacts_go_rows_and_files(project, django_capture_on_commit_callbacks):
    alice = subject_session(project, n=3)
    artifact = make_artifact(alice, "report.txt", b"alice's report")
    store = artifact_storage()
    assert store.exists(artifact.storage_key)
    assert preview_erasure(project, {"external_id": alice.external_id}).counts["artifacts"] == 1
    with django_capture_on_commit_callbacks(execute=True):  # the files go on commit
        erasure = erase(project, {"external_id": alice.external_id})
    assert not Artifact.objects.filter(session_id=alice.pk).exists()
    assert not store.exists(artifact.storage_key)
    assert erasure.counts["artifacts"] == 1
    assert ErasedObject.objects.filter(erasure=erasure, kind="artifact").count() == 1


def test_the_receipt_holds_the_sha256_of_each_removed_row(project):
    alice = subject_session(project, n=5)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT session_id::text || '#' || seq, row_to_json(e)::text FROM sessions_app_event e"
            " WHERE session_id = %s",
            [alice.pk],
        )
        expected = {ref: hashlib.sha256(body.encode()).hexdigest() for ref, body in cursor}
    erasure = erase(project, {"external_id": alice.external_id})
    stored = {
        o.ref: o.sha256
        for o in ErasedObject.objects.filter(erasure=erasure, kind__in=["event", "fact"])
    }
    assert stored == expected
    assert ErasedObject.objects.filter(erasure=erasure, kind="session", ref=str(alice.pk)).exists()
    receipt = json.loads(b"".join(receipt_chunks(erasure)))
    assert receipt["id"] == str(erasure.pk) and receipt["status"] == "done"
    assert receipt["selectors"] == {"external_id": alice.external_id}
    assert receipt["requested_by"] == "tests"
    assert receipt["session_ids"] == [str(alice.pk)]
    assert {
        (r["ref"], r["sha256"]) for r in receipt["removed"] if r["kind"] in ("event", "fact")
    } == set(expected.items())


def test_a_finished_receipt_cannot_be_changed_or_deleted(project):
    alice = subject_session(project, n=3)
    erasure = erase(project, {"external_id": alice.external_id})
    for statement in (
        "UPDATE retention_app_erasurerequest SET counts = '{}' WHERE id = %s",
        "DELETE FROM retention_app_erasurerequest WHERE id = %s",
        "UPDATE retention_app_erasedobject SET sha256 = 'x' WHERE erasure_id = %s",
        "DELETE FROM retention_app_erasedobject WHERE erasure_id = %s",
        "DELETE FROM retention_app_erasuretarget WHERE erasure_id = %s",
    ):
        with pytest.raises((InternalError, ProgrammingError)), transaction.atomic():
            connection.cursor().execute(statement, [erasure.pk])


def test_audit_entries_stay_but_lose_the_subjects_values(project):
    alice = subject_session(project, n=3)
    pause_session(alice, actor=SYSTEM, reason=f"waiting on {SUBJECT}")
    note = record_audit(
        project,
        actor=SYSTEM,
        action="note",
        target_type="project",
        target_id=project.pk,
        detail={"said": f"wrote to {SUBJECT} today", "n": 3},
    )
    unrelated = record_audit(
        project, actor=SYSTEM, action="note", target_type="project", target_id=1, detail={"x": "y"}
    )
    about = list(AuditEntry.objects.filter(target_type="session", target_id=str(alice.pk)))
    assert about
    erasure = erase(project, {"fact": {"key": "email", "value": SUBJECT}})
    note.refresh_from_db()
    assert note.detail == {"said": "wrote to [erased] today", "n": 3}
    assert note.actor == "tests" and note.action == "note"
    unrelated.refresh_from_db()
    assert unrelated.detail == {"x": "y"}
    for entry in AuditEntry.objects.filter(project=project):
        text = json.dumps(entry.detail)
        assert SUBJECT not in text and alice.external_id not in text
    # Who did what to which id stays.
    assert AuditEntry.objects.filter(target_id=str(alice.pk)).count() == len(about)
    assert erasure.counts["audit_entries"] >= 2
    assert AuditEntry.objects.filter(action="erasure.done", target_id=str(erasure.pk)).exists()


def test_webhook_bodies_naming_the_subject_are_removed_and_not_sent(project, settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    create_endpoint(project, url="http://127.0.0.1:9/hook", events=["session.paused"], actor=SYSTEM)
    alice = subject_session(project, n=3)
    bob = bystander(project)
    pause_session(alice, actor=SYSTEM)
    pause_session(bob, actor=SYSTEM)
    mine = WebhookDelivery.objects.get(payload__session_id=str(alice.pk))
    theirs = WebhookDelivery.objects.get(payload__session_id=str(bob.pk))
    before = mine.payload
    erasure = erase(project, {"external_id": alice.external_id})
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.payload == {"erased": str(erasure.pk)}
    assert mine.status == "failed" and mine.last_error == "erased"
    assert theirs.payload["session_id"] == str(bob.pk) and theirs.status == "pending"
    sha = hashlib.sha256(
        json.dumps(before, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    assert ErasedObject.objects.filter(
        erasure=erasure, kind="webhook_delivery", ref=str(mine.pk), sha256=sha
    ).exists()
    assert erasure.counts["webhook_deliveries"] == 1


# --- The append-only guard --------------------------------------------------------------------


def _delete_events(session_id, erasure_id=None):
    with transaction.atomic(), connection.cursor() as cursor:
        if erasure_id is not None:
            cursor.execute("SELECT set_config('switchboard.erasure', %s, true)", [str(erasure_id)])
        cursor.execute("DELETE FROM sessions_app_event WHERE session_id = %s", [session_id])


def test_the_guard_still_refuses_every_other_delete_and_every_update(project):
    alice = subject_session(project, n=3)
    bob = bystander(project)
    erasure = request_erasure(project, {"external_id": alice.external_id}, actor=SYSTEM)
    refused = (InternalError, ProgrammingError)
    # No setting; a queued (not running) erasure; another session than its targets; rubbish.
    with pytest.raises(refused):
        _delete_events(alice.pk)
    with pytest.raises(refused):
        _delete_events(alice.pk, erasure.pk)
    ErasureRequest.objects.filter(pk=erasure.pk).update(status=ErasureStatus.RUNNING)
    with pytest.raises(refused):
        _delete_events(bob.pk, erasure.pk)
    with pytest.raises(Exception):  # noqa: B017 (not a uuid: refused by the cast)
        _delete_events(bob.pk, "not-an-id")
    with pytest.raises(refused), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('switchboard.erasure', %s, true)", [str(erasure.pk)])
        cursor.execute("UPDATE sessions_app_event SET text = 'x' WHERE session_id = %s", [alice.pk])
    assert Event.objects.filter(session=bob).count() == 10
    # The one allowed: a running erasure's pending target.
    _delete_events(alice.pk, erasure.pk)
    assert not Event.objects.filter(session=alice).exists()


# --- Holds ----------------------------------------------------------------------------------


def test_a_legal_hold_refuses_the_erasure_listing_the_holds(project, admin):
    alice = subject_session(project, n=3)
    hold, _ = place_hold(project, session=alice, reason="litigation", actor=SYSTEM)
    agent_hold, _ = place_hold(project, agent=alice.agent, reason="audit", actor=SYSTEM)
    response = admin.post("/erasures", {"external_id": alice.external_id})
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "legal_hold"
    assert {h["id"] for h in error["detail"]["holds"]} == {hold.pk, agent_hold.pk}
    assert not ErasureRequest.objects.exists()
    assert Event.objects.filter(session=alice).exists()
    preview = admin.post("/erasures", {"external_id": alice.external_id, "preview": True})
    assert {h["id"] for h in preview.json()["holds"]} == {hold.pk, agent_hold.pk}


def test_a_hold_placed_after_the_request_stops_the_job_until_lifted(project):
    alice = subject_session(project, n=3)
    erasure = request_erasure(project, {"external_id": alice.external_id}, actor=SYSTEM)
    hold, _ = place_hold(project, session=alice, reason="litigation", actor=SYSTEM)
    erasure = run_erasure(erasure.pk)
    assert erasure.status == ErasureStatus.HELD
    assert [h["id"] for h in erasure.holds] == [hold.pk]
    assert Event.objects.filter(session=alice).exists()
    lift_hold(hold, actor=SYSTEM)
    erasure = run_erasure(erasure.pk)
    assert erasure.status == ErasureStatus.DONE
    assert not Session.objects.filter(pk=alice.pk).exists()


# --- Reads after erasure: 410 ----------------------------------------------------------------


def test_an_erased_session_answers_410_erased_with_the_receipt(project, api, other_api):
    alice = subject_session(project, n=3)
    erasure = erase(project, {"external_id": alice.external_id})
    for method, path, body in (
        ("GET", f"/sessions/{alice.pk}", None),
        ("GET", f"/sessions/{alice.pk}/events", None),
        ("GET", f"/sessions/{alice.pk}/state", None),
        ("GET", f"/sessions/{alice.pk}/export", None),
        ("POST", f"/sessions/{alice.pk}/events", {"events": [{"kind": "note", "content": {}}]}),
        ("POST", f"/sessions/{alice.pk}/fork", {"at_seq": 1}),
    ):
        response = api.send(method, path, body)
        assert response.status_code == 410, (path, response.content)
        error = response.json()["error"]
        assert error["code"] == "erased"
        assert error["detail"] == {"session_id": str(alice.pk), "erasure_id": str(erasure.pk)}
    # Another project learns nothing.
    assert other_api.get(f"/sessions/{alice.pk}").status_code == 404
    listed = api.get("/sessions", {"external_id": alice.external_id}).json()
    assert listed["sessions"] == []


# --- API ------------------------------------------------------------------------------------


def test_the_api_previews_requests_and_serves_the_receipt(project, admin, _no_broker):
    alice = subject_session(project, n=3)
    events = Event.objects.filter(session=alice).count()
    preview = admin.post("/erasures", {"metadata": {"key": "user", "value": "42"}, "preview": True})
    assert preview.status_code == 200, preview.content
    assert preview.json()["counts"]["events"] == events
    assert preview.json()["session_ids"] == [str(alice.pk)]
    assert not ErasureRequest.objects.exists()

    created = admin.post("/erasures", {"metadata": {"key": "user", "value": "42"}})
    assert created.status_code == 202, created.content
    body = created.json()
    assert body["status"] == "queued" and body["sessions"] == 1
    assert _no_broker.call_args.kwargs["kwargs"] == {"erasure_id": body["id"]}
    run_erasure(body["id"])

    read = admin.get(f"/erasures/{body['id']}")
    assert read.status_code == 200
    assert read.json()["status"] == "done"
    assert read.json()["counts"]["events"] == events
    download = admin.get(f"/erasures/{body['id']}/receipt")
    assert download.status_code == 200
    assert "attachment" in download["Content-Disposition"]
    receipt = json.loads(b"".join(download.streaming_content))
    assert len([r for r in receipt["removed"] if r["kind"] in ("event", "fact")]) == events
    assert [e["id"] for e in admin.get("/erasures").json()["erasures"]] == [body["id"]]


def test_the_api_refuses_agents_other_projects_and_bad_selectors(project, admin, api, other_api):
    alice = subject_session(project, n=3)
    assert api.post("/erasures", {"external_id": alice.external_id}).status_code == 403
    erasure = request_erasure(project, {"external_id": alice.external_id}, actor=SYSTEM)
    assert api.get(f"/erasures/{erasure.pk}").status_code == 403
    other = other_api.get(f"/erasures/{erasure.pk}")
    assert other.status_code in (403, 404)
    for bad in (
        {},
        {"agent": "test-agent"},
        {"external_id": ""},
        {"nickname": "al"},
        {"metadata": {"key": "user"}},
        {"fact": {"key": "email", "value": {"nested": 1}}},
    ):
        response = admin.post("/erasures", bad)
        assert response.status_code == 422, (bad, response.content)
        assert response.json()["error"]["code"] == "invalid_input"
    assert admin.get("/erasures/not-a-uuid").status_code == 404
    assert admin.send("DELETE", "/erasures").status_code == 405
    assert ErasureRequest.objects.count() == 1
    assert Event.objects.filter(session=alice).exists()


def test_a_run_stopped_after_a_batch_is_finished_by_the_next_and_counts_once(project):
    sessions = [subject_session(project, n=5, external_id=f"user-42/{i}") for i in range(3)]
    events = Event.objects.filter(session__in=sessions).count()
    erasure = request_erasure(project, {"external_id_prefix": "user-42/"}, actor=SYSTEM)
    erasure = run_erasure(erasure.pk, batch_events=1, max_batches=1)  # one session a batch
    assert erasure.status == ErasureStatus.RUNNING
    assert Session.objects.filter(pk__in=[s.pk for s in sessions]).count() == 2
    erasure = run_erasure(erasure.pk, batch_events=1)
    assert erasure.status == ErasureStatus.DONE
    assert erasure.counts["sessions"] == 3 and erasure.counts["events"] == events
    assert run_erasure(erasure.pk).counts == erasure.counts  # done: nothing more


def test_after_a_hold_is_lifted_the_api_runs_it_again(project, admin, _no_broker):
    alice = subject_session(project, n=3)
    erasure = request_erasure(project, {"external_id": alice.external_id}, actor=SYSTEM)
    hold, _ = place_hold(project, session=alice, reason="litigation", actor=SYSTEM)
    assert run_erasure(erasure.pk).status == ErasureStatus.HELD
    held = admin.get(f"/erasures/{erasure.pk}").json()
    assert held["status"] == "held" and [h["id"] for h in held["holds"]] == [hold.pk]
    lift_hold(hold, actor=SYSTEM)
    _no_broker.reset_mock()
    response = admin.post(f"/erasures/{erasure.pk}/run")
    assert response.status_code == 202
    assert response.json()["status"] == "running" and response.json()["holds"] == []
    assert _no_broker.call_args.kwargs["kwargs"] == {"erasure_id": str(erasure.pk)}
    assert run_erasure(erasure.pk).status == ErasureStatus.DONE


def test_a_short_value_is_replaced_only_where_it_is_the_whole_text(project):
    alice = subject_session(project, n=3, metadata={"user": "42"})
    exact = record_audit(
        project,
        actor=SYSTEM,
        action="note",
        target_type="project",
        target_id=1,
        detail={"user": "42", "about": "user 42 and 4242"},
    )
    unrelated = record_audit(
        project,
        actor=SYSTEM,
        action="note",
        target_type="project",
        target_id=2,
        detail={"id": "7a42b0", "n": 42},
    )
    erase(project, {"metadata": {"key": "user", "value": "42"}})
    exact.refresh_from_db()
    unrelated.refresh_from_db()
    assert exact.detail == {"user": "[erased]", "about": "user 42 and 4242"}
    assert unrelated.detail == {"id": "7a42b0", "n": 42}
    assert not Session.objects.filter(pk=alice.pk).exists()
