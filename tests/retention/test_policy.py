"""Policy evaluation with a frozen clock: every rule, agent overrides, outcome rules, legal
holds; idempotent runs; one bad session recorded while the others go on; the preview equals
what the job then does; bad policy input refused with nothing saved."""

from datetime import timedelta

import pytest
import time_machine

from core.models import AuditEntry
from handoffs_app.models import ACTIVE_STATUSES
from handoffs_app.services.handoffs import cancel_handoff, request_handoff
from retention_app.models import (
    Compaction,
    LegalHold,
    RetentionPolicy,
    RetentionRun,
    SessionTombstone,
)
from retention_app.selection import ACTIVE_HANDOFF_STATUSES, candidates
from retention_app.services.holds import lift_hold, place_hold
from retention_app.services.jobs import run_job
from retention_app.services.policies import project_policies, save_policy
from retention_app.services.preview import preview
from sessions_app.models import Event, Session, Snapshot
from sessions_app.services.events import EventDraft
from sessions_app.services.lifecycle import pause_session
from sessions_app.services.state import take_snapshot
from tests.factories import make_session
from tests.retention.helpers import (
    DAY,
    POLICY,
    SYSTEM,
    append,
    archived,
    at,
    closed,
    conversation,
)


def status(session: Session) -> str:
    session.refresh_from_db()
    return session.status


def enforce(project, days: float):
    with time_machine.travel(at(days), tick=False):  # what the job writes is dated then too
        return run_job("enforce_retention", trigger="test", project_ids=[project.pk])


def compact(project, days: float):
    with time_machine.travel(at(days), tick=False):
        return run_job("compact_sessions", trigger="test", project_ids=[project.pk])


@pytest.fixture
def policy(project):
    save_policy(project, POLICY, actor=SYSTEM)
    return POLICY


def test_the_defaults_apply_before_any_policy_is_saved(db, project):
    policies = project_policies(project)
    assert not policies.saved
    doc = policies.project.as_dict()
    assert doc["close_idle_after"] == DAY
    assert doc["archive_closed_after"] == 7 * DAY
    assert doc["compact_after"] == 30 * DAY
    assert doc["delete_after"] is None


def test_idle_open_and_resumed_sessions_close_after_close_idle_after(db, project, policy):
    with time_machine.travel(at(0), tick=False):
        idle = make_session(project)
        resumed = make_session(project)
        pause_session(resumed, actor=SYSTEM)
        from sessions_app.services.lifecycle import resume_session

        resume_session(resumed, actor=SYSTEM)
    with time_machine.travel(at(0.9), tick=False):
        busy = make_session(project)
    (run,) = enforce(project, 1.1)
    assert (status(idle), status(resumed), status(busy)) == ("closed", "closed", "open")
    assert run.closed == 2
    reasons = Event.objects.filter(session=idle, kind="lifecycle").values_list(
        "content__reason", flat=True
    )
    assert "idle" in list(reasons)
    # Idempotent: nothing more the second time, nor the third.
    for _ in range(2):
        (again,) = enforce(project, 1.1)  # a test-triggered run is always recorded
        assert again.closed == 0 and again.examined == 0
    assert (status(idle), status(resumed), status(busy)) == ("closed", "closed", "open")


def test_paused_sessions_with_an_open_handoff_are_never_closed_by_retention(db, project, policy):
    with time_machine.travel(at(0), tick=False):
        waiting = make_session(project)
        request_handoff(waiting, kind="question", payload={"question": "ok?"}, actor=SYSTEM)
        dropped = make_session(project)
        handoff = request_handoff(
            dropped, kind="question", payload={"question": "ok?"}, actor=SYSTEM
        ).handoff
        cancel_handoff(handoff, actor=SYSTEM)
        pause_session(dropped, actor=SYSTEM)
        plain = make_session(project)
        pause_session(plain, actor=SYSTEM)
    enforce(project, 2)  # past close_idle_after, before close_paused_after
    assert (status(waiting), status(dropped), status(plain)) == ("paused",) * 3
    enforce(project, 4)
    assert (status(waiting), status(dropped), status(plain)) == ("paused", "closed", "closed")


def test_the_active_handoff_statuses_match_the_handoff_app(db):
    assert set(ACTIVE_HANDOFF_STATUSES) == {str(s) for s in ACTIVE_STATUSES}


def test_closed_sessions_archive_compact_and_delete_on_time(db, project, policy):
    with time_machine.travel(at(0), tick=False):
        session = make_session(project)
        append(session, conversation(30))
        take_snapshot(session, 10, reason="agent")
        closed(session)
    enforce(project, 6)
    assert status(session) == "closed"
    enforce(project, 8)
    assert status(session) == "archived"
    compact(project, 29)
    assert not Compaction.objects.exists()
    (run,) = compact(project, 31)
    assert run.compacted == 1 and run.events_freed > 0 and run.status == "succeeded"
    # Archived at day 8: deleted delete_after (90 days) later.
    enforce(project, 8 + 89)
    assert Session.objects.filter(pk=session.pk).exists()
    (run,) = enforce(project, 8 + 91)
    assert run.deleted == 1
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not Event.objects.filter(session_id=session.pk).exists()
    assert not Snapshot.objects.filter(session_id=session.pk).exists()
    tomb = SessionTombstone.objects.get(session_id=session.pk)
    assert tomb.events_deleted > 0 and tomb.snapshots_deleted >= 1
    assert AuditEntry.objects.filter(action="session.delete", target_id=str(session.pk)).exists()


def _old_closed(project, **kw):
    with time_machine.travel(at(0), tick=False):
        session = make_session(project, **kw)
        append(session, conversation(14))
        return closed(session)


def test_outcome_rules_keep_data_longer(db, project):
    save_policy(
        project,
        {**POLICY, "keep_outcomes": ["error", "handoff", "over_budget"], "keep_tags": ["vip"]},
        actor=SYSTEM,
    )
    plain = _old_closed(project)
    with time_machine.travel(at(0), tick=False):
        errored = make_session(project)
        append(errored, conversation(7) + [EventDraft(kind="error", content={"e": 1})])
        closed(errored)
        handed = make_session(project)
        request_handoff(handed, kind="question", payload={"question": "?"}, actor=SYSTEM)
        closed(handed)
        over = make_session(project, budget_max_tokens=5)
        append(over, [EventDraft(kind="message", content={"text": "x"}, tokens=10)])
        over.refresh_from_db()
        if over.status != "closed":
            closed(over)
        vip = make_session(project, metadata={"tags": ["vip"]})
        append(vip, conversation(7))
        closed(vip)
    compact(project, 31)
    done = set(Compaction.objects.values_list("session_id", flat=True))
    assert done == {plain.pk}
    compact(project, 59)
    assert Compaction.objects.count() == 1
    compact(project, 61)
    done = set(Compaction.objects.values_list("session_id", flat=True))
    assert done == {plain.pk, errored.pk, handed.pk, over.pk, vip.pk}


def test_agent_overrides_set_only_the_fields_they_name(db, project):
    quick = make_session(project, agent="quick")
    make_session(project, agent="slow")
    save_policy(
        project,
        {**POLICY, "agents": {"quick": {"compact_after": 2 * DAY}, "slow": {}}},
        actor=SYSTEM,
    )
    policies = project_policies(project)
    assert policies.effective[quick.agent_id].compact_after == timedelta(days=2)
    assert policies.effective[quick.agent_id].archive_closed_after == timedelta(days=7)
    a = _old_closed(project, agent="quick")
    b = _old_closed(project, agent="slow")
    compact(project, 3)
    assert set(Compaction.objects.values_list("session_id", flat=True)) == {a.pk}
    compact(project, 31)
    assert set(Compaction.objects.values_list("session_id", flat=True)) == {a.pk, b.pk}


@pytest.mark.parametrize("scope", ["session", "agent", "project"])
def test_a_legal_hold_stops_compaction_and_deletion_not_closing(db, project, policy, scope):
    with time_machine.travel(at(0), tick=False):
        held = make_session(project, agent="held-agent")
        append(held, conversation(14))
        other = make_session(project, agent="held-agent")
    target = {
        "session": {"session": held},
        "agent": {"agent": held.agent},
        "project": {},
    }[scope]
    hold, created = place_hold(project, actor=SYSTEM, reason="litigation", **target)
    assert created
    assert AuditEntry.objects.filter(action="retention.hold").exists()
    enforce(project, 2)
    assert status(held) == "closed"  # closing still happens
    enforce(project, 10)
    assert status(held) == "archived"  # and archiving
    compact(project, 400)
    enforce(project, 800)
    assert Session.objects.filter(pk=held.pk).exists()
    assert not Compaction.objects.filter(session=held).exists()
    if scope == "session":  # the other session is not held
        assert not Session.objects.filter(pk=other.pk).exists()
    lift_hold(hold, actor=SYSTEM, reason="settled")
    assert AuditEntry.objects.filter(action="retention.release").exists()
    compact(project, 800)
    assert Compaction.objects.filter(session=held).exists()
    enforce(project, 800)
    assert not Session.objects.filter(pk=held.pk).exists()


def test_one_bad_session_is_recorded_and_the_others_go_on(db, project, policy, settings):
    settings.SWITCHBOARD_SUMMARISER = "tests.retention.summariser.refuse_poison"
    good = [_old_closed(project) for _ in range(3)]
    with time_machine.travel(at(0), tick=False):
        bad = make_session(project)
        append(bad, [EventDraft(kind="message", content={"text": "poison"})] * 3)
        closed(bad)
    (run,) = compact(project, 31)
    assert run.compacted == 3
    assert run.status == "failed"
    assert [e["session_id"] for e in run.errors] == [str(bad.pk)]
    assert set(Compaction.objects.values_list("session_id", flat=True)) == {g.pk for g in good}
    assert Event.objects.filter(session=bad, tier="transient").count() == 3  # untouched


def test_the_preview_says_what_the_job_then_does(db, project, policy):
    with time_machine.travel(at(0), tick=False):
        for _ in range(3):
            make_session(project)
        for _ in range(2):
            s = make_session(project)
            pause_session(s, actor=SYSTEM)
        for _ in range(4):
            s = make_session(project)
            append(s, conversation(14))
            closed(s)
        for _ in range(2):
            s = make_session(project)
            append(s, conversation(7))
            archived(s)
    now = at(40)
    expected = preview(project, project_policies(project), now=now)
    assert expected.counts["close_idle"] == 3
    assert expected.counts["close_paused"] == 2
    assert expected.counts["archive"] == 4
    assert expected.counts["compact"] == 6
    assert expected.counts["delete"] == 0  # archived at real time (not 90 days ago)
    for action in ("close_idle", "close_paused", "archive", "compact", "delete"):
        sample = {s["id"] for s in expected.samples[action]}
        assert sample == {str(s.pk) for s in candidates(project, action, now=now)[:10]}
    with time_machine.travel(now, tick=False):
        (run,) = run_job("enforce_retention", trigger="test", project_ids=[project.pk])
    assert run.closed == expected.counts["close_idle"] + expected.counts["close_paused"]
    assert run.archived == expected.counts["archive"]
    assert run.deleted == expected.counts["delete"]
    compacting = preview(project, project_policies(project), now=now)
    with time_machine.travel(now, tick=False):
        (run,) = run_job("compact_sessions", trigger="test", project_ids=[project.pk])
    assert run.compacted == compacting.counts["compact"]
    assert run.events_freed <= compacting.events_freed_estimate["compact"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"compact_after": -5}, "compact_after"),
        ({"close_idle_after": 0}, "close_idle_after"),
        ({"delete_after": 10 * DAY, "compact_after": 30 * DAY}, "delete_after"),
        ({"keep_outcomes": ["sunny"]}, "keep_outcomes"),
        ({"agents": {"nobody": {"compact_after": DAY}}}, "agents.nobody"),
        ({"agents": {"bot": {"delete_after": DAY}}}, "agents.bot.delete_after"),
        ({"flavour": 1}, "flavour"),
    ],
)
def test_bad_policy_input_is_refused_and_nothing_saved(db, project, change, field):
    from core.errors import InvalidInput

    make_session(project, agent="bot")
    with pytest.raises(InvalidInput) as refused:
        save_policy(project, {**POLICY, **change}, actor=SYSTEM)
    assert field in refused.value.detail
    assert not RetentionPolicy.objects.exists()
    assert not AuditEntry.objects.filter(action="retention.policy").exists()


def test_saving_audits_the_old_and_new_values(db, project):
    save_policy(project, POLICY, actor=SYSTEM)
    save_policy(project, {**POLICY, "compact_after": 45 * DAY}, actor=SYSTEM)
    entry = AuditEntry.objects.filter(action="retention.policy").order_by("-pk").first()
    assert entry.detail["old"]["compact_after"] == 30 * DAY
    assert entry.detail["new"]["compact_after"] == 45 * DAY


def test_runs_are_recorded_only_when_there_was_something_to_do(db, project, policy):
    assert run_job("compact_sessions", now=at(1), project_ids=[project.pk]) == []
    assert not RetentionRun.objects.exists()
    assert LegalHold.objects.count() == 0


def test_the_session_page_shows_a_legal_hold_and_a_compaction(db, project):
    from django.test import Client

    from core.models import Role
    from retention_app.services.compaction import compact_session
    from tests.factories import make_member

    viewer = make_member(project, Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    session = make_session(project)
    append(session, conversation(20))
    url = f"/sessions/{session.pk}/"
    assert b"legal hold" not in client.get(url).content
    place_hold(project, session=session, reason="subpoena 12", actor=SYSTEM)
    page = client.get(url).content.decode()
    assert "legal hold (session)" in page and "subpoena 12" in page
    closed(session)
    compact_session(session, actor=SYSTEM)
    assert f"compacted to {session.head_seq}" in client.get(url).content.decode()


def test_deletion_takes_every_dependant_row_and_keeps_a_parent_with_forks(db, project, policy):
    from handoffs_app.models import Handoff
    from sessions_app.services.sessions import fork_session

    with time_machine.travel(at(0), tick=False):
        plain = make_session(project)
        append(plain, conversation(14))
        take_snapshot(plain, 7, reason="agent")
        handoff = request_handoff(
            plain, kind="question", payload={"question": "ok?"}, actor=SYSTEM
        ).handoff
        cancel_handoff(handoff, actor=SYSTEM)
        archived(plain)
        parent = make_session(project)
        append(parent, conversation(14))
        archived(parent)
        fork = fork_session(parent, at_seq=5, actor=SYSTEM)  # stays open: not deleted
    parent_events = Event.objects.filter(session_id=parent.pk).count()
    (run,) = enforce(project, 400)
    assert run.deleted == 1
    assert not Session.objects.filter(pk=plain.pk).exists()
    assert not Snapshot.objects.filter(session_id=plain.pk).exists()
    assert not Handoff.objects.filter(session_id=plain.pk).exists()
    assert SessionTombstone.objects.get(session_id=plain.pk).snapshots_deleted == 1
    # The parent a fork still reads through is left whole (not selected while it has forks;
    # storage.delete_session_rows would refuse it too).
    assert run.errors == []
    assert Event.objects.filter(session_id=parent.pk).count() == parent_events > 0
    assert Session.objects.filter(pk__in=[parent.pk, fork.pk]).count() == 2
    assert not SessionTombstone.objects.filter(session_id=parent.pk).exists()
