"""The admin routes through the Client against a live server: the project, the retention
policy (set, reset), its preview and runs (read, started), legal holds (placed, listed, on the
session), API keys and webhook endpoints; and an agent key refused on them (403)."""

from dataclasses import asdict

import pytest
from switchboard_client import Client, Conflict, Forbidden, InvalidInput, Unauthorized

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
    assert sb_admin.retention_runs().runs == []
    run_job_for_project("enforce_retention", project.pk, trigger="manual")
    runs = sb_admin.retention_runs(limit=5).runs
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


def test_it_resets_the_policy_to_the_defaults(sb, sb_admin):
    sb.open_session("support-bot")
    policy = sb_admin.retention_policy()
    fields = {k: v for k, v in asdict(policy).items() if k not in ("defaults", "agents")}
    changed = sb_admin.set_retention_policy(
        {**fields, "close_idle_after": 60, "agents": {"support-bot": {"close_idle_after": 30}}}
    )
    assert not changed.defaults
    reset = sb_admin.reset_retention_policy()
    assert reset == policy and reset.defaults and reset.agents == {}
    with pytest.raises(Forbidden):
        sb.reset_retention_policy()


def test_it_starts_retention_and_pages_the_runs(sb, sb_admin, project):
    queued = sb_admin.run_retention()
    assert [r.job for r in queued] == ["enforce_retention", "compact_sessions"]
    assert all(r.trigger.startswith("key:") for r in queued)
    first = sb_admin.retention_runs(limit=1)
    second = sb_admin.retention_runs(limit=1, cursor=first.next_cursor)
    assert [r.id for r in first.runs + second.runs] == sorted((r.id for r in queued), reverse=True)
    assert second.next_cursor is None
    with pytest.raises(InvalidInput):
        sb_admin.retention_runs(limit=0)
    with pytest.raises(Forbidden):
        sb.run_retention()


def test_it_lists_holds_and_the_session_shows_them(sb, sb_admin):
    session = sb.open_session("held")
    assert sb.get_session(session.id).holds == []
    hold = sb_admin.hold_session(session.id, "litigation")
    assert sb_admin.list_holds().holds == [hold]
    shown = sb.get_session(session.id).holds
    assert [(h.id, h.scope, h.session_id) for h in shown] == [(hold.id, "session", session.id)]
    listed = {s.id: s.holds for s in sb.list_sessions().sessions}
    assert [h.id for h in listed[session.id]] == [hold.id]
    sb_admin.release_hold(session.id)
    assert sb_admin.list_holds().holds == []
    history = sb_admin.list_holds(include_released=True).holds
    assert [h.id for h in history] == [hold.id] and history[0].released_at is not None
    with pytest.raises(Forbidden):
        sb.list_holds()


def test_it_creates_lists_and_revokes_api_keys(sb, sb_admin, server_url):
    created = sb_admin.create_api_key("worker", scope="agent")
    assert created.key.startswith(f"sb_{created.prefix}_") and created.active
    listed = {k.id: k for k in sb_admin.list_api_keys()}
    assert listed[created.id].name == "worker" and not hasattr(listed[created.id], "key")
    with Client(server_url, created.key) as worker:
        assert worker.project().key_scope == "agent"
        revoked = sb_admin.revoke_api_key(created.id)
        assert revoked.revoked_at is not None and not revoked.active
        with pytest.raises(Unauthorized):
            worker.project()
    own = next(k for k in sb_admin.list_api_keys() if k.scope == "admin")
    with pytest.raises(Conflict) as refused:
        sb_admin.revoke_api_key(own.id)
    assert refused.value.code == "own_key"
    with pytest.raises(Forbidden):
        sb.create_api_key("escalate", scope="admin")


def test_it_creates_lists_and_deletes_webhooks(sb, sb_admin):
    created = sb_admin.create_webhook("https://hooks.example.com/sb", ["session.closed"])
    assert created.secret and created.events == ["session.closed"]
    assert [w.id for w in sb_admin.list_webhooks()] == [created.id]
    with pytest.raises(InvalidInput) as refused:
        sb_admin.create_webhook("ftp://hooks.example.com/", ["session.closed"])
    assert refused.value.detail == {"field": "url"}
    assert sb_admin.delete_webhook(created.id).id == created.id
    assert sb_admin.list_webhooks() == []
    with pytest.raises(Forbidden):
        sb.list_webhooks()
