"""Errors of the session store (rendered like every DomainError: see core.errors)."""

from core.errors import Conflict, DomainError


class SessionNotWritable(Conflict):
    code = "session_not_writable"


class HeadSeqMismatch(Conflict):
    code = "head_seq_mismatch"


class PartialReplay(Conflict):
    code = "idempotency_partial_replay"


class ExportBusy(DomainError):
    """Every export slot of the project is taken (SWITCHBOARD_EXPORTS_PER_PROJECT)."""

    status = 429
    code = "export_busy"
