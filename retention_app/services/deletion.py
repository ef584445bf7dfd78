"""Whole-session deletion: what retention's delete rule does to archived sessions
(services.jobs), and what DELETE /api/v1/sessions/{id} does to any session of the project.

One primitive for both, delete_sessions_locked: the sessions' events (through the append-only
guard, sessions_app.retention.allow_event_deletion, open for this transaction only), every row
that cascades from them (snapshots, compactions, task links, handoffs, released holds), the
session rows; then a tombstone, an audit entry (`session.delete`) and a SessionDeleted (live
pages, the `session.deleted` webhook) per session, all in the caller's transaction. A
session's `external_id` is free for a new session once that commits.

It lives here, not in sessions_app, because what decides whether a session may go (legal
holds) and what remains of it (tombstones) are retention's; sessions_app cannot import them.
"""

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import transaction

from core.actors import Actor
from core.domain_events import publish_all
from core.errors import NotFound
from core.services.audit import audit_entry, record_audits
from sessions_app.models import Session
from sessions_app.retention import allow_event_deletion
from sessions_app.services.artifacts import forget_session_files

from .. import storage
from ..domain_events import SessionDeleted
from ..errors import SessionHasForks, SessionUnderLegalHold
from ..models import RetentionRun, SessionTombstone
from .holds import covering_hold


def delete_sessions_locked(
    sessions: list[Session],
    *,
    actor: Actor,
    run: RetentionRun | None,
    detail: dict[UUID, dict[str, Any]] | None = None,
) -> dict[UUID, tuple[int, int]]:
    """Delete these sessions whole, set-based: one DELETE of their events and one per dependent
    table (a session at a time cost a dozen statements each), then a tombstone, an audit entry
    (with `detail`'s extra fields for that session) and a SessionDeleted per session.

    The caller holds the sessions' rows locked (their agents loaded) and runs this in a
    transaction (retention: a savepoint per batch, falling back to one session at a time if it
    fails). A fork of one of them that is not among them refuses the whole call
    (storage.SessionStillReferenced). Returns (events, bytes) per session."""
    ids = [s.pk for s in sessions]
    forget_session_files(ids)  # their artifacts' files go once this commits (rows: CASCADE)
    with allow_event_deletion():
        freed = storage.delete_all_events_of(ids)
    snapshots = storage.delete_sessions_rows(ids)  # snapshots, links, handoffs …
    out = {session.pk: freed.get(session.pk, (0, 0)) for session in sessions}
    SessionTombstone.objects.bulk_create(
        [
            SessionTombstone(
                session_id=session.pk,
                project_id=session.project_id,
                agent_name=session.agent.name,
                external_id=session.external_id,
                title=session.title,
                created_at=session.created_at,
                closed_at=session.closed_at,
                archived_at=session.archived_at,
                events_deleted=out[session.pk][0],
                snapshots_deleted=snapshots.get(session.pk, 0),
                bytes_deleted=out[session.pk][1],
                run=run,
            )
            for session in sessions
        ]
    )
    extra = detail or {}
    record_audits(
        [
            audit_entry(
                session.project_id,
                actor=actor,
                action="session.delete",
                target_type="session",
                target_id=session.pk,
                detail={
                    "events": out[session.pk][0],
                    "snapshots": snapshots.get(session.pk, 0),
                    "bytes": out[session.pk][1],
                    **extra.get(session.pk, {}),
                },
            )
            for session in sessions
        ]
    )
    publish_all(
        [
            SessionDeleted(
                project_id=session.project_id,
                session_id=str(session.pk),
                events_deleted=out[session.pk][0],
                external_id=session.external_id,
                actor=actor.label,
            )
            for session in sessions
        ]
    )
    return out


@dataclass(frozen=True)
class Deleted:
    """What delete_session removed: the session first, then its forks (each after its parent)."""

    session_ids: list[UUID]
    events_deleted: int
    bytes_deleted: int


def _locked(query: Any) -> list[Session]:
    return list(
        query.select_related("agent").select_for_update(of=("self",)).order_by("created_at", "pk")
    )


def delete_session(
    project_id: int, session_id: UUID, *, actor: Actor, with_forks: bool = False
) -> Deleted:
    """Delete the project's session now, whatever its status, in one transaction; with
    `with_forks`, its forks too, their forks, and so on.

    Locks, in this order: the project's row FOR SHARE (a legal hold being placed waits for this
    deletion; every hold committed before it is seen), the session's row FOR UPDATE, then each
    generation of its forks, parents before their forks. An append, a fork, a lifecycle change
    of any of them waits for the deletion and then finds no session (404); one committed
    before is seen (its events deleted with the rest, its fork refusing the deletion).

    Raises NotFound (no such session in the project, or deleted meanwhile), SessionHasForks
    (409: it has forks and not `with_forks`; the detail lists them), SessionUnderLegalHold
    (409: a standing hold covers it or one of the forks that would go)."""
    with transaction.atomic():
        storage.share_project(project_id)
        found = _locked(Session.objects.filter(pk=session_id, project_id=project_id))
        if not found:
            raise NotFound("Session not found.", detail={"session_id": str(session_id)})
        (root,) = found
        tree = [root]
        forks = list(
            Session.objects.filter(parent_id=root.pk)
            .order_by("created_at", "pk")
            .values_list("pk", flat=True)
        )
        if forks and not with_forks:
            _refuse_held(tree)
            raise SessionHasForks(
                f"This session has {len(forks)} fork(s), whose history reads through it; "
                "delete them first, or ask with with_forks=true to delete them with it.",
                detail={"session_id": str(root.pk), "fork_ids": [str(pk) for pk in forks]},
            )
        generation = tree
        while generation:
            # Locked after their parents (a new fork of one waits on its parent's row, so none
            # appears once that is locked); the next generation read after this one's locks.
            generation = _locked(Session.objects.filter(parent_id__in=[s.pk for s in generation]))
            tree.extend(generation)
        _refuse_held(tree)
        detail = {
            s.pk: {"deleted_with": str(root.pk)} if s is not root else {"forks": len(tree) - 1}
            for s in tree
        }
        freed = delete_sessions_locked(tree, actor=actor, run=None, detail=detail)
    return Deleted(
        session_ids=[s.pk for s in tree],
        events_deleted=sum(n for n, _ in freed.values()),
        bytes_deleted=sum(size for _, size in freed.values()),
    )


def _refuse_held(sessions: list[Session]) -> None:
    found = covering_hold(sessions)
    if found is None:
        return
    hold, covered = found
    what = "this session" if covered is sessions[0] else f"its fork {covered.pk}"
    raise SessionUnderLegalHold(
        f"A legal hold ({hold.scope}) covers {what}: nothing of it is deleted while the hold "
        "stands.",
        detail={
            "hold_id": hold.pk,
            "scope": hold.scope,
            "session_id": str(covered.pk),
        },
    )
