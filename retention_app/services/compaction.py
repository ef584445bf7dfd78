"""Compaction of one session up to a boundary seq (invariant 6).

All of it in one transaction, under the session's row lock: the `compaction` snapshot at the
boundary (working state, facts, the summariser's summary), the transient events of the
session's own log up to the boundary deleted through sessions_app.retention, the session marked
(`compacted_through_seq`, `compaction_id`: reads then say "compacted"), a Compaction record
with both state hashes, checked equal before commit. A crash anywhere (kill -9 of the worker)
rolls all of it back: a session is compacted or not, never half (invariant 9); the next run
finds it still eligible and does it again.

Forks: the boundary never passes the lowest fork point of the session's forks (their visible
history runs through it, transient events included); sessions_app refuses a new fork inside a
compacted range (410). The fork's own events compact like any session's.
"""

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from core.actors import Actor
from core.domain_events import outbox_message, outbox_written
from core.services.audit import audit_entry, audit_written
from core.storage import insert_in_one_statement
from sessions_app.models import Session
from sessions_app.retention import allow_event_deletion
from sessions_app.services.state import content_hash, state_at

from .. import storage
from ..domain_events import SessionCompacted
from ..models import Compaction, RetentionRun
from ..summarisers import deterministic_summary, summariser, summary_of_digest


class CompactionMismatch(RuntimeError):
    """The state at head changed across compaction: rolled back, nothing lost (invariant 6)."""


@dataclass
class Compacted:
    compaction: Compaction | None  # None: nothing to do (already compacted that far)
    events_removed: int = 0
    bytes_removed: int = 0


def compaction_boundary(session: Session) -> int:
    """The head, or the lowest fork point of the session's forks if that is lower."""
    lowest = Session.objects.filter(parent_id=session.pk).aggregate(low=Min("fork_seq"))["low"]
    return session.head_seq if lowest is None else min(session.head_seq, lowest)


def compact_locked(session: Session, *, actor: Actor, run: RetentionRun | None = None) -> Compacted:
    """Compact `session`, whose row the caller has locked inside a transaction."""
    # The jobs' selection computed it already (selection._compact_boundary), and no fork can
    # be made of the session while its row is locked.
    selected = getattr(session, "_boundary", None)
    boundary = compaction_boundary(session) if selected is None else int(selected)
    after = max(session.own_start_seq, session.compacted_through_seq)
    if boundary <= after:
        return Compacted(None)
    before = state_at(session)
    at_boundary = before if boundary == session.head_seq else state_at(session, boundary)
    path, summarise = summariser()
    with allow_event_deletion():
        if summarise is deterministic_summary:
            # The default summary is made by PostgreSQL while it deletes the range (one
            # statement; no event row reaches Python).
            count, size, digest = storage.delete_transient_events_digest(
                session.pk, after, boundary
            )
            summary = summary_of_digest(before.summary, digest)
        else:
            # A plugged-in summariser reads the events themselves, before they go.
            removed_events = storage.transient_events(session.pk, after, boundary)
            summary = summarise(before.summary, removed_events)
            count, size = storage.delete_transient_events(session.pk, after, boundary)
    storage.upsert_compaction_snapshot(
        session.pk,
        boundary,
        state=at_boundary.state,
        facts=at_boundary.facts,
        summary=summary,
        content_hash=content_hash(at_boundary.state, at_boundary.facts, summary),
        now=timezone.now(),
    )
    compaction = Compaction(
        project_id=session.project_id,
        session=session,
        after_seq=after,
        boundary_seq=boundary,
        events_removed=count,
        bytes_removed=size,
        summary=summary,
        summariser=path,
        state_hash_before=before.state_hash,
        state_hash_after="",
        run=run,
    )
    session.compacted_through_seq = boundary
    session.compaction_id = compaction.id
    Session.objects.filter(pk=session.pk).update(
        compacted_through_seq=boundary, compaction_id=compaction.id
    )
    after_state = state_at(session)
    if after_state.state_hash != before.state_hash:
        raise CompactionMismatch(
            f"state hash at head changed ({before.state_hash} -> {after_state.state_hash})"
        )
    compaction.state_hash_after = after_state.state_hash
    entry = audit_entry(
        session.project_id,
        actor=actor,
        action="session.compact",
        target_type="session",
        target_id=session.pk,
        detail={"through_seq": boundary, "events_removed": count, "bytes_removed": size},
    )
    compacted = SessionCompacted(
        project_id=session.project_id,
        session_id=str(session.pk),
        compaction_id=str(compaction.id),
        through_seq=boundary,
        events_removed=count,
    )
    message = outbox_message(compacted)
    # The record, its audit row and its outbox row in one statement (one round trip).
    insert_in_one_statement([compaction, entry, message])
    audit_written(entry)
    outbox_written(compacted, message)
    return Compacted(compaction, count, size)


def compact_session(session: Session, *, actor: Actor) -> Compacted:
    """Lock and compact one session now (tests, the admin's 'compact now')."""
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        return compact_locked(locked, actor=actor)
