"""Errors of the session store (rendered like every DomainError: see core.errors)."""

from core.errors import Conflict, DomainError


class SessionNotWritable(Conflict):
    code = "session_not_writable"


class HeadSeqMismatch(Conflict):
    code = "head_seq_mismatch"


class PartialReplay(Conflict):
    code = "idempotency_partial_replay"


class IdempotencyKeyReused(Conflict):
    """An idempotency_key already used in the session's history, sent with a different event:
    not a retry, so neither written nor answered with the original (services.events)."""

    code = "idempotency_key_reused"


class ExternalIdTaken(Conflict):
    """The project's external_id belongs to a session that is not the one asked for: one of
    another agent (opening), or not a fork of that parent at that seq (forking)."""

    code = "external_id_taken"


class SessionTakenOver(Conflict):
    """A person has taken the conversation over: the agent's appends wait for the hand-back."""

    code = "session_taken_over"


class ExportBusy(DomainError):
    """Every export slot of the project is taken (SWITCHBOARD_EXPORTS_PER_PROJECT)."""

    status = 429
    code = "export_busy"


class Compacted(DomainError):
    """The seq asked for lies inside a compacted range: its transient events are gone, so the
    state there cannot be folded honestly. The detail names the range and its compaction; the
    state at the range's end (`through_seq`) is still answered (the compaction snapshot)."""

    status = 410
    code = "compacted"
