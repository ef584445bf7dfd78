"""Compacted ranges of a session's visible history, so reads stay honest after compaction.

Compaction (retention_app) removes a session's own transient events with seq in
(own_start_seq, compacted_through_seq] and leaves a `compaction` snapshot at
compacted_through_seq. A fork sees its ancestors' rows up to each fork point, so a range
compacted in an ancestor shows through in the fork's view as well. This module resolves those
ranges over the lineage (one query when the session has ancestors, none otherwise); the
session store's reads (slices, state, fork) consult it. It knows nothing of retention_app.
"""

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from .errors import Compacted
from .models import Session, Snapshot


@dataclass(frozen=True)
class CompactedRange:
    """Transient events of `session_id` with after_seq < seq <= through_seq are gone; the
    durable ones are still there, and the state at through_seq is the compaction snapshot."""

    session_id: UUID
    after_seq: int
    through_seq: int
    compaction_id: UUID | None

    def covers(self, seq: int) -> bool:
        return self.after_seq < seq < self.through_seq

    def overlaps(self, low: int, high: int | None) -> bool:
        """Whether (low, high] (high None = unbounded) meets (after_seq, through_seq]."""
        return low < self.through_seq and (high is None or high > self.after_seq)

    def as_dict(self, summary: str = "") -> dict[str, Any]:
        return {
            "session_id": str(self.session_id),
            "after_seq": self.after_seq,
            "through_seq": self.through_seq,
            "compaction_id": str(self.compaction_id) if self.compaction_id else None,
            "summary": summary,
        }


def compacted_ranges(session: Session) -> list[CompactedRange]:
    """The compacted ranges visible in `session`'s history, in seq order."""
    segments = session.lineage_segments()
    marks: dict[UUID, tuple[int, UUID | None]] = {
        session.id: (session.compacted_through_seq, session.compaction_id)
    }
    ancestors = [segment_id for segment_id, _, _ in segments[:-1]]
    if ancestors:
        for pk, through, compaction_id in Session.objects.filter(pk__in=ancestors).values_list(
            "pk", "compacted_through_seq", "compaction_id"
        ):
            marks[pk] = (through, compaction_id)
    ranges: list[CompactedRange] = []
    for segment_id, lower, upto in segments:
        through, compaction_id = marks.get(segment_id, (0, None))
        if upto is not None:
            through = min(through, upto)
        if through > lower:
            ranges.append(CompactedRange(segment_id, lower, through, compaction_id))
    return ranges


def refuse_inside_compacted(session: Session, seq: int, *, what: str) -> None:
    """Raise Compacted (410) if `seq` lies strictly inside a compacted range of the history."""
    for compacted in compacted_ranges(session):
        if compacted.covers(seq):
            raise Compacted(
                f"The {what} at seq {seq} is inside a compacted range "
                f"({compacted.after_seq}, {compacted.through_seq}]: its transient events were "
                f"removed. The state at seq {compacted.through_seq} (the compaction snapshot) "
                "and every durable event are still there.",
                detail={"at_seq": seq, **compacted.as_dict()},
            )


def summaries(ranges: list[CompactedRange]) -> dict[tuple[UUID, int], str]:
    """The compaction snapshots' summaries of `ranges`, by (session_id, through_seq)."""
    if not ranges:
        return {}
    found: dict[tuple[UUID, int], str] = {}
    for compacted in ranges:
        summary = (
            Snapshot.objects.filter(session_id=compacted.session_id, seq=compacted.through_seq)
            .values_list("summary", flat=True)
            .first()
        )
        found[(compacted.session_id, compacted.through_seq)] = summary or ""
    return found
