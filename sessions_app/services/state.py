"""Working state, facts and snapshots.

State at seq p = the nearest snapshot at or before p (the session's own, or an ancestor's inside
the inherited prefix) folded with the `state`/`fact` events in (snapshot.seq, p]. A snapshot
every SWITCHBOARD_SNAPSHOT_EVERY events bounds that fold, however long the log is.
"""

import copy
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction

from core.errors import InvalidInput, StoredValueTooDeep
from core.text import loads_stored
from sessions_app import storage
from sessions_app.compaction import refuse_inside_compacted
from sessions_app.models import EventKind, Session, Snapshot


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON Merge Patch: objects merge recursively, null deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass
class FoldedState:
    seq: int
    state: dict[str, Any] = field(default_factory=dict)
    # key -> {"value": …, "seq": the event that set it}
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    summary: str = ""
    # Why the state at `seq` cannot be shown (state_or_unreadable), or "": state and facts are
    # then empty, not the state.
    unreadable: str = ""

    def apply(self, seq: int, kind: str, content: Any) -> None:
        if kind == EventKind.STATE:
            self.state = merge_patch(self.state, content)
        elif kind == EventKind.FACT:
            self.facts[content["key"]] = {"value": content.get("value"), "seq": seq}
        self.seq = seq

    @property
    def content_hash(self) -> str:
        return content_hash(self.state, self.facts, self.summary)

    @property
    def state_hash(self) -> str:
        """The hash of the working state and the facts alone: what compaction must keep equal
        (invariant 6). The summary is left out: compaction adds one, by design."""
        return content_hash(self.state, self.facts, "")

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "state": self.state,
            "facts": self.facts,
            "summary": self.summary,
            "content_hash": self.content_hash,
        }


def content_hash(state: Any, facts: Any, summary: str) -> str:
    canonical = json.dumps(
        {"state": state, "facts": facts, "summary": summary},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


FOLDED_KINDS = (EventKind.STATE, EventKind.FACT)


def state_at(session: Session, at_seq: int | None = None) -> FoldedState:
    """Folded state of `session` at `at_seq` (default: head). Bounded by the snapshot interval.

    Two fixed statements (the state endpoint's hot path): the nearest snapshot in the lineage
    at or before `at_seq`, then the state and fact events after it, at most one interval.
    """
    if at_seq is None:
        at_seq = session.head_seq
    if at_seq < 0 or at_seq > session.head_seq:
        raise InvalidInput(
            f"at_seq must be between 0 and the head ({session.head_seq}).",
            detail={"at_seq": at_seq, "head_seq": session.head_seq},
        )
    if at_seq and (session.compacted_through_seq or session.ancestry):
        # Inside a compacted range the state events are gone: 410 `compacted`, never a
        # silently wrong fold. The range's end is answered (its compaction snapshot).
        refuse_inside_compacted(session, at_seq, what="state")
    segments = session.lineage_segments()
    folded = FoldedState(seq=0)
    snapshot = storage.nearest_snapshot_row(segments, at_seq)
    if snapshot is not None:
        seq, state, facts, summary = snapshot
        folded = FoldedState(seq=seq, state=state, facts=facts, summary=summary)
    for seq, kind, content in storage.events_of_kinds(
        segments, after=folded.seq, upto=at_seq, kinds=[str(k) for k in FOLDED_KINDS]
    ):
        folded.apply(seq, kind, content)
    folded.seq = at_seq
    return folded


def head_states(sessions: Sequence[Session]) -> list[FoldedState | StoredValueTooDeep]:
    """state_at(session) for each of `sessions`, at its head, in order: in two statements
    whatever their number (a page of the sessions list), not two per session.

    The same fold as state_at: each one's nearest snapshot in its lineage (one statement for
    all), then its state and fact events after it (one more). A session whose fold meets a
    value too deep to read (StoredValueTooDeep) gets that refusal instead, and the others are
    folded as usual. A head is never strictly inside a compacted range (a range ends at or
    before it), so nothing here is refused as compacted.
    """
    heads = [
        (k, segment_id, lower, session.head_seq if upto is None else min(upto, session.head_seq))
        for k, session in enumerate(sessions)
        for segment_id, lower, upto in session.lineage_segments()
    ]
    snapshots = storage.nearest_snapshots_in_windows([w for w in heads if w[3] > w[2]])
    folds: list[FoldedState | StoredValueTooDeep] = []
    for k in range(len(sessions)):
        row = snapshots.get(k)
        if row is None:
            folds.append(FoldedState(seq=0))
            continue
        seq, state, facts, summary = row
        what = f"The snapshot at seq {seq}"
        try:
            folds.append(
                FoldedState(
                    seq=seq,
                    state=loads_stored(state, what=what),
                    facts=loads_stored(facts, what=what),
                    summary=summary,
                )
            )
        except StoredValueTooDeep as refused:
            folds.append(refused)
    after = [
        (k, segment_id, max(low, fold.seq), high)
        for k, segment_id, low, high in heads
        if isinstance(fold := folds[k], FoldedState) and high > max(low, fold.seq)
    ]
    kinds = [str(kind) for kind in FOLDED_KINDS]
    for k, seq, kind, content in storage.events_of_kinds_in_windows(after, kinds=kinds):
        fold = folds[k]
        if not isinstance(fold, FoldedState):
            continue  # refused already
        try:
            fold.apply(seq, kind, loads_stored(content, what=f"The {kind} event at seq {seq}"))
        except StoredValueTooDeep as refused:
            folds[k] = refused
    for session, fold in zip(sessions, folds, strict=True):
        if isinstance(fold, FoldedState):
            fold.seq = session.head_seq
    return folds


def state_or_unreadable(session: Session, at_seq: int | None = None) -> FoldedState:
    """state_at for the pages, which show what they can: a fold refused because a value stored
    before nesting was bounded is too deep to read (StoredValueTooDeep) comes back empty, its
    `unreadable` saying why, and the rest of the page is shown."""
    try:
        return state_at(session, at_seq)
    except StoredValueTooDeep as refused:
        seq = session.head_seq if at_seq is None else at_seq
        return FoldedState(seq=seq, unreadable=refused.message)


def take_snapshot(session: Session, at_seq: int, *, reason: str) -> Snapshot:
    """Store the folded state at `at_seq`; returns the existing snapshot if one is there."""
    existing = Snapshot.objects.filter(session=session, seq=at_seq).first()
    if existing is not None:
        return existing
    folded = state_at(session, at_seq)
    try:
        with transaction.atomic():
            return Snapshot.objects.create(
                session=session,
                seq=at_seq,
                state=folded.state,
                facts=folded.facts,
                summary=folded.summary,
                content_hash=folded.content_hash,
                reason=reason,
            )
    except IntegrityError:
        # A concurrent writer crossed the same boundary and took it first: same content.
        return Snapshot.objects.get(session=session, seq=at_seq)


def ensure_snapshot(session_id: Any, at_seq: int) -> None:
    """After-commit hook of append: snapshot at an interval boundary if none is there yet."""
    session = Session.objects.filter(pk=session_id).first()
    if session is None or at_seq > session.head_seq:
        return
    try:
        take_snapshot(session, at_seq, reason="auto")  # which reads an existing one first
    except StoredValueTooDeep:
        # A value stored before nesting was bounded: no fold through it, so no snapshot.
        # The events are committed; the readers answer the refusal themselves.
        return


def ensure_snapshots(session_id: Any, seqs: list[int]) -> None:
    """After-commit hook of append: a snapshot at each interval boundary the append crossed.

    In ascending order, so each one folds at most one interval on top of the previous one.
    """
    for seq in sorted(seqs):
        ensure_snapshot(session_id, seq)
