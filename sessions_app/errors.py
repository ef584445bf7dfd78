"""Errors of the session store (rendered like every DomainError: see core.errors)."""

from core.errors import Conflict, DomainError, PayloadTooLarge


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


class ArtifactTooLarge(PayloadTooLarge):
    """A file over SWITCHBOARD_ARTIFACT_MAX_BYTES: refused by its Content-Length, or as soon as
    its streamed bytes pass the limit; nothing of it is kept."""

    code = "artifact_too_large"


class ArtifactQuotaExceeded(DomainError):
    """The project's stored artifact bytes would pass SWITCHBOARD_ARTIFACT_QUOTA_BYTES."""

    status = 507
    code = "artifact_quota_exceeded"


class ArtifactSharedWithFork(Conflict):
    """A version a fork sees (saved at or before its fork point) is the fork's history too: its
    bytes are not copied, so deleting it would take it from the fork. Delete the forks first."""

    code = "artifact_shared_with_fork"


class LengthRequired(DomainError):
    status = 411
    code = "length_required"
