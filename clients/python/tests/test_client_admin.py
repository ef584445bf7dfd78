"""The admin routes through the Client against a live server: the project, the retention
policy, its preview and runs, legal holds; and an agent key refused on them (403)."""

import pytest
from switchboard_client import Conflict, Forbidden

from retention_app.services.jobs import run_job_for_project

HOUR = 3600


def test_it_reads_and_renames_the_project(sb, sb_admin, project):
    assert (sb.project().id, sb.project().key_scope) == (project.pk, "agent")
    renamed = sb_admin.rename_project("Acme support")
    assert renamed.name == "Acme support" and sb.project().name == "Acme support"
    with pytest.raises(Forbidden) as refused:
        sb.rename_project("nope")
    assert refused.value.detail == {"required_scope": "admin", "scope": "agent"}


def test_it_sets_the_retention_policy_and_reads_preview_and_runs(sb, sb_admin, project):
    sb.open_session("support-bot")  # an override names an agent of the project
    policy = sb_admin.retention_policy()
    assert policy.defaults and policy.agents == {}
    updated = sb_admin.set_retention_policy(
        {
            "close_idle_after": 2 * HOUR,
            "close_paused_after": None,
            "archive_closed_after": 24 * HOUR,
            "compact_after": None,
            "delete_after": None,
            "outcome_compact_after": None,
            "outcome_delete_after": None,
            "keep_outcomes": [],
            "keep_tags": [],
            "agents": {"support-bot": {"close_idle_after": HOUR}},
        }
    )
    assert updated.close_idle_after == 2 * HOUR and updated.archive_closed_after == 24 * HOUR
    assert not updated.defaults and updated.agents["support-bot"]["close_idle_after"] == HOUR
    assert sb_admin.retention_policy() == updated

    preview = sb_admin.retention_preview()
    assert preview.now.tzinfo is not None and isinstance(preview.would, dict)
    assert sb_admin.retention_runs() == []
    run_job_for_project("enforce_retention", project.pk, trigger="manual")
    runs = sb_admin.retention_runs(limit=5)
    assert [(r.job, r.trigger) for r in runs] == [("enforce_retention", "manual")]
    assert runs[0].finished_at is not None and runs[0].errors == []

    for call in (sb.retention_policy, sb.retention_preview, sb.retention_runs):
        with pytest.raises(Forbidden):
            call()


def test_it_holds_and_releases_a_session(sb, sb_admin):
    session = sb.open_session("held")
    hold = sb_admin.hold_session(session.id, "litigation 2026-17")
    assert (hold.scope, hold.session_id, hold.reason) == (
        "session",
        session.id,
        "litigation 2026-17",
    )
    assert hold.released_at is None
    assert sb_admin.hold_session(session.id, "litigation 2026-17").id == hold.id
    with pytest.raises(Forbidden):
        sb.hold_session(session.id, "an agent may not")
    released = sb_admin.release_hold(session.id)
    assert released.id == hold.id and released.released_at is not None


def test_a_held_session_is_not_deleted(sb, sb_admin):
    session = sb.open_session("held")
    sb_admin.hold_session(session.id, "litigation")
    with pytest.raises(Conflict) as refused:
        sb.delete_session(session.id)
    assert refused.value.code == "legal_hold"
    sb_admin.release_hold(session.id)
    assert sb.delete_session(session.id).deleted == [session.id]
