"""Blobs: bytes a session's events refer to by SHA-256, stored once per session.

A LangGraph thread re-sends its whole message list at every checkpoint: stored as events, turn n
costs n messages, the thread's storage grows with the square of its length and one checkpoint
outgrows the event size limit (SWITCHBOARD_MAX_EVENT_BYTES) after a few hundred turns.
Content-addressed blobs make each part cost once: the client stores the parts (a message each,
or fixed-size pieces of a large value) and the checkpoint event names their hashes; a part
already stored is not sent again (`find_blobs` says which are missing) nor stored again.
Compression or a larger limit would have moved the wall without changing the square.

The hash is computed here, never taken from the client, so a name always matches its bytes. A
session's blobs are its own and its ancestors' (a fork's events name its parent's); they live
until the session is deleted, and compaction leaves them (a kept event may name them).
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict
from uuid import UUID

from django.conf import settings
from django.db import transaction

from core.errors import NotFound, PayloadTooLarge

from .. import storage
from ..errors import SessionNotWritable
from ..models import WRITABLE_STATUSES, Blob, Session

# Blobs one store may carry: a bounded statement.
MAX_BLOBS_PER_CALL = 1000
# Hashes one lookup may name: one statement (storage.blob_lookup_rows), 8,000 names a 536 KB
# body, under the 600 KiB a store's batch already takes. A process opening a 5,000-message
# LangGraph thread reads its messages in one lookup, not five.
MAX_LOOKUP_NAMES = 8000


@dataclass(frozen=True)
class StoredBlob:
    sha256: str
    size: int
    created: bool  # stored by this call (two racing stores of the same bytes may both say so)


class FoundBlob(TypedDict):
    """As the lookup answers it (a dict: a lookup of 1,000 blobs builds no other object)."""

    sha256: str
    size: int
    data: str | None  # base64; None when not asked for, or past the call's byte budget


@dataclass(frozen=True)
class BlobLookup:
    found: list[FoundBlob]
    missing: list[str]  # stored neither in the session nor in its ancestors
    not_sent: list[str]  # found, but their bytes did not fit in this answer: ask again


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _lineage_ids(session: Session) -> list[UUID]:
    return [segment_id for segment_id, _, _ in session.lineage_segments()]


def checked(contents: Sequence[bytes]) -> list[str]:
    """The names of `contents`, after the checks every store makes. Raises PayloadTooLarge (a
    blob over SWITCHBOARD_MAX_BLOB_BYTES, or more than MAX_BLOBS_PER_CALL)."""
    limit = settings.SWITCHBOARD_MAX_BLOB_BYTES
    if len(contents) > MAX_BLOBS_PER_CALL:
        raise PayloadTooLarge(
            f"One call stores at most {MAX_BLOBS_PER_CALL} blobs.",
            detail={"limit": MAX_BLOBS_PER_CALL, "size": len(contents)},
        )
    for position, content in enumerate(contents):
        if len(content) > limit:
            raise PayloadTooLarge(
                f"A blob holds at most {limit} bytes: store a larger value in pieces.",
                detail={"field": f"blobs[{position}].data", "limit": limit, "size": len(content)},
            )
    return [digest(content) for content in contents]


def store_blobs(session: Session, contents: Sequence[bytes]) -> list[StoredBlob]:
    """Store each of `contents` in the session unless it (or an ancestor) holds those bytes;
    in order, one StoredBlob per item. `session` is the caller's look-up (its id, project and
    ancestry); its row is locked FOR KEY SHARE meanwhile, so a deletion of the session either
    waits for this or is seen (404), and nothing is stored in a session that is gone.

    Raises PayloadTooLarge (checked()), NotFound, SessionNotWritable (closed or archived, as
    for appends)."""
    digests = checked(contents)
    with transaction.atomic():
        status = storage.share_session(session.pk, session.project_id)
        if status is None:
            raise NotFound("Session not found.", detail={"session_id": str(session.pk)})
        if status not in WRITABLE_STATUSES:
            raise SessionNotWritable(
                f"The session is {status}; it accepts no more blobs.", detail={"status": status}
            )
        return store_blobs_locked(session, contents, digests)


def store_blobs_locked(
    session: Session, contents: Sequence[bytes], digests: Sequence[str]
) -> list[StoredBlob]:
    """store_blobs for a caller that has checked `contents` (their `digests`) and holds the
    session's row locked and writable in its transaction (an append, which stores the blobs
    its events name with them: both or neither)."""
    held = held_blobs(session, digests)
    new: dict[str, bytes] = {}
    for sha, content in zip(digests, contents, strict=True):
        if sha not in held:
            new.setdefault(sha, content)
    # A racing store of the same bytes may insert first: its row is as good as this one.
    Blob.objects.bulk_create(
        [
            Blob(session_id=session.pk, sha256=sha, size=len(content), data=content)
            for sha, content in new.items()
        ],
        ignore_conflicts=True,
    )
    stored, reported = [], set()
    for sha, content in zip(digests, contents, strict=True):
        stored.append(StoredBlob(sha, len(content), created=sha in new and sha not in reported))
        reported.add(sha)
    return stored


def held_blobs(session: Session, digests: Sequence[str]) -> set[str]:
    """Which of `digests` the session or an ancestor holds."""
    return set(
        Blob.objects.filter(
            session_id__in=_lineage_ids(session), sha256__in=set(digests)
        ).values_list("sha256", flat=True)
    )


def find_blobs(
    session: Session, digests: Sequence[str], *, with_data: bool, byte_budget: int
) -> BlobLookup:
    """Which of `digests` the session (or an ancestor) holds, in the order asked, with their
    bytes (base64) if `with_data`, up to `byte_budget` bytes in all: the ones past it are
    listed in `not_sent` (at least one blob is always sent whole, so a caller asking again
    makes progress)."""
    found: list[FoundBlob] = []
    missing: list[str] = []
    not_sent: list[str] = []
    rows = storage.blob_lookup_rows(
        _lineage_ids(session),
        list(dict.fromkeys(digests)),
        with_data=with_data,
        byte_budget=byte_budget,
    )
    for sha, size, data in rows:
        if size is None:
            missing.append(sha)
            continue
        found.append({"sha256": sha, "size": size, "data": data})
        if with_data and data is None:
            not_sent.append(sha)
    return BlobLookup(found=found, missing=missing, not_sent=not_sent)


def blob_records(session: Session, digests: Sequence[str], *, byte_budget: int) -> bytes:
    """find_blobs with data as the API's bytes answer (storage.blob_records says how)."""
    return storage.blob_records(
        _lineage_ids(session), list(dict.fromkeys(digests)), byte_budget=byte_budget
    )


def read_blob(session: Session, sha256: str) -> bytes:
    """The bytes named `sha256` in the session or an ancestor; NotFound otherwise."""
    data = (
        Blob.objects.filter(session_id__in=_lineage_ids(session), sha256=sha256)
        .values_list("data", flat=True)
        .first()
    )
    if data is None:
        raise NotFound("No such blob in this session.", detail={"sha256": sha256})
    return bytes(data)
