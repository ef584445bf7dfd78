"""Artifacts: named, versioned files of a session (reports, screenshots, generated code).

Each save streams the bytes into the `artifacts` storage (Django's storage API: a folder under
the project, or an S3 bucket) under a key of our own making, hashing and counting them on the
way, and only then, in one transaction, writes the version's row and an `artifact` event to the
log (through insert_events_locked, so the seq stays gap-free). Until that commits nothing
names the file; if anything fails (a limit, a dropped connection, a session deleted meanwhile)
the file is removed: nothing is half-written. A kill -9 between the two can still leave an
unnamed file in storage (never a row without its file).

A fork sees its ancestors' versions saved up to its fork point and a read `at_seq` those saved
up to that seq: the rows are resolved through the lineage, the bytes never copied. So a
version a fork sees cannot be deleted from its parent (ArtifactSharedWithFork): delete the
forks first, as for the session itself. A deleted version keeps its row, marked, and its
number is never given again; its bytes go once the deletion commits.
"""

import hashlib
import io
import json
import logging
import re
import tarfile
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import transaction
from django.db.models import Exists, Max, OuterRef, Q, QuerySet
from django.utils import timezone

from core.actors import Actor
from core.errors import InvalidInput, NotFound
from core.services.audit import record_audit

from .. import storage
from ..errors import (
    ArtifactQuotaExceeded,
    ArtifactSharedWithFork,
    ArtifactTooLarge,
    LengthRequired,
    SessionNotWritable,
)
from ..models import WRITABLE_STATUSES, Artifact, EventKind, Session
from .log import EventDraft, insert_events_locked

logger = logging.getLogger(__name__)

# A name is one URL path segment: no slash, no leading dot, nothing a shell or a file system
# reads specially. ADK's user-scoped names ("user:report.pdf") fit.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@+=,-]{0,199}")
MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,99}/[a-z0-9][a-z0-9!#$&^_.+-]{0,99}")
DEFAULT_CONTENT_TYPE = "application/octet-stream"
CHUNK_BYTES = 64 * 1024


def artifact_storage() -> Storage:
    return storages["artifacts"]


def check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidInput(
            "An artifact name is 1 to 200 letters, digits and . _ : @ + = , - (not starting "
            "with . or -).",
            detail={"field": "name", "name": name[:200]},
        )
    return name


def clean_content_type(header: str | None) -> str:
    """The media type of a Content-Type header, lower-cased, without its parameters."""
    media_type = (header or "").split(";", 1)[0].strip().lower()
    if not media_type:
        return DEFAULT_CONTENT_TYPE
    if not MEDIA_TYPE.fullmatch(media_type):
        raise InvalidInput(
            "Content-Type must be a media type (type/subtype).",
            detail={"field": "Content-Type", "value": media_type[:200]},
        )
    return media_type


class _CountingReader(io.RawIOBase):
    """The request's body as a file that storages read: at most `length` bytes, hashed and
    counted as they pass. Not seekable, so a storage reads it once, in order."""

    def __init__(self, stream: IO[bytes], length: int) -> None:
        super().__init__()
        self._stream = stream
        self._left = length
        self.size = 0
        self._hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, size: int | None = -1) -> bytes:
        # Up to `size` bytes, fewer only at the end: some readers (S3's multipart upload) take
        # a short read for the end of the file.
        wanted = self._left if size is None or size < 0 else min(size, self._left)
        parts = []
        while wanted > 0:
            data = self._stream.read(min(wanted, CHUNK_BYTES))
            if not data:
                self._left = 0
                break
            parts.append(data)
            wanted -= len(data)
            self._left -= len(data)
        chunk = b"".join(parts)
        self._hash.update(chunk)
        self.size += len(chunk)
        return chunk

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def _too_large(size: int, limit: int) -> ArtifactTooLarge:
    return ArtifactTooLarge(
        f"An artifact holds at most {limit} bytes; this one has {size}.",
        detail={"limit": limit, "size": size},
    )


def _check_quota(project_id: int, size: int) -> None:
    quota = settings.SWITCHBOARD_ARTIFACT_QUOTA_BYTES
    used = storage.artifact_bytes_stored(project_id)
    if used + size > quota:
        raise ArtifactQuotaExceeded(
            f"The project stores {used} bytes of artifacts of its {quota}; this one's {size} "
            "would pass that. Delete versions no longer needed, or ask for a larger quota.",
            detail={"quota": quota, "used": used, "size": size},
        )


def remove_files(keys: Iterable[str]) -> None:
    """Remove stored files, each on its own: one failing (logged) leaves the others to go."""
    store = artifact_storage()
    for key in keys:
        try:
            store.delete(key)
        except Exception:
            logger.exception("artifact file %s not removed", key)


def _writable_locked(session: Session) -> Session:
    """The session's row locked FOR NO KEY UPDATE, as appends lock it; NotFound (deleted
    meanwhile) or SessionNotWritable."""
    locked = storage.session_in_project(session.pk, session.project_id, lock=True)
    if locked is None:
        raise NotFound("Session not found.", detail={"session_id": str(session.pk)})
    if locked.status not in WRITABLE_STATUSES:
        raise SessionNotWritable(
            f"The session is {locked.status}; its artifacts cannot change.",
            detail={"status": locked.status},
        )
    return locked


def _lineage(session: Session, at_seq: int | None) -> Q:
    """The rows a session sees at `at_seq` (None: now): each lineage segment's own versions
    saved up to where the next one forked off, and up to `at_seq`."""
    visible = Q(pk__in=[])
    for segment_id, _, upto in session.lineage_segments():
        bounds = [b for b in (upto, at_seq) if b is not None]
        part = Q(session_id=segment_id)
        if bounds:
            part &= Q(seq__lte=min(bounds))
        visible |= part
    return visible


def save_artifact(
    session: Session,
    name: str,
    body: IO[bytes],
    *,
    length: int | None,
    content_type: str | None,
    actor: Actor,
) -> Artifact:
    """Store `length` bytes read from `body` as the next version of `name` in `session`.

    Raises InvalidInput (a bad name or content type, a body shorter than `length`),
    LengthRequired (no length), ArtifactTooLarge (413), ArtifactQuotaExceeded (507), NotFound
    (the session is gone, or goes meanwhile), SessionNotWritable or SessionTakenOver (409, as
    for appends). Whatever it raises, nothing of the upload is kept."""
    check_name(name)
    media_type = clean_content_type(content_type)
    if length is None:
        raise LengthRequired("An artifact upload needs its Content-Length.")
    limit = settings.SWITCHBOARD_ARTIFACT_MAX_BYTES
    if length > limit:
        raise _too_large(length, limit)
    _check_quota(session.project_id, length)  # early, before any byte is read; again below

    store = artifact_storage()
    key = f"artifacts/{session.project_id}/{session.pk}/{uuid.uuid4().hex}"
    reader = _CountingReader(body, length)
    upload = File(reader, name=key)  # type: ignore[arg-type]  # a binary file; stubs say str
    upload.content_type = media_type  # type: ignore[attr-defined]  # S3 stores it with the bytes
    try:
        key = store.save(key, upload)
        if reader.size != length:
            raise InvalidInput(
                f"The body ended after {reader.size} bytes; Content-Length said {length}.",
                detail={"size": reader.size, "length": length},
            )
        with transaction.atomic():
            # Quota lock first, then the session's row: the only order anything takes both in.
            storage.lock_artifact_quota(session.project_id)
            locked = _writable_locked(session)
            _check_quota(session.project_id, reader.size)
            version = 1 + (
                Artifact.objects.filter(_lineage(locked, None), name=name).aggregate(
                    top=Max("version")
                )["top"]
                or 0
            )
            content = {
                "action": "save",
                "name": name,
                "version": version,
                "size": reader.size,
                "sha256": reader.sha256,
                "content_type": media_type,
            }
            written = insert_events_locked(
                locked, [EventDraft(kind=EventKind.ARTIFACT, content=content)], actor=actor
            )
            artifact = Artifact.objects.create(
                session_id=locked.pk,
                project_id=locked.project_id,
                name=name,
                version=version,
                seq=written.events[0].seq,
                size=reader.size,
                sha256=reader.sha256,
                content_type=media_type,
                storage_key=key,
                actor=actor.label,
            )
    except BaseException:
        remove_files([key])
        raise
    return artifact


def delete_artifact(
    session: Session, name: str, *, version: int | None, actor: Actor
) -> list[Artifact]:
    """Delete one version of the session's own `name` (or all of them): an `artifact` event
    records it, the rows are marked, and the files go once that commits. Returns the versions
    deleted. Raises NotFound (no such version of the session's own: an ancestor's are deleted
    in that session), ArtifactSharedWithFork (409: a fork sees one of them), NotFound or
    SessionNotWritable for the session."""
    check_name(name)
    with transaction.atomic():
        locked = _writable_locked(session)
        rows = Artifact.objects.select_for_update().filter(
            session_id=locked.pk, name=name, deleted_at__isnull=True
        )
        if version is not None:
            rows = rows.filter(version=version)
        found = list(rows.order_by("version"))
        if not found:
            raise NotFound(
                "No such artifact version in this session (a version saved before a fork is "
                "deleted in the session that saved it).",
                detail={"name": name, "version": version},
            )
        forks = list(
            Session.objects.filter(
                parent_id=locked.pk, fork_seq__gte=min(a.seq for a in found)
            ).values_list("pk", flat=True)[:20]
        )
        if forks:
            raise ArtifactSharedWithFork(
                "A fork of this session sees this artifact (saved before its fork point) and "
                "shares its bytes; delete the fork first.",
                detail={"name": name, "fork_ids": [str(pk) for pk in forks]},
            )
        _delete_versions_locked(locked, name, found, actor=actor)
    return found


def _delete_versions_locked(
    locked: Session, name: str, found: list[Artifact], *, actor: Actor, system: bool = False
) -> None:
    """Delete these versions of `name` (the session's own, locked, shared with no fork): one
    `artifact` event records it, the rows are marked, the files go once that commits."""
    written = insert_events_locked(
        locked,
        [
            EventDraft(
                kind=EventKind.ARTIFACT,
                content={"action": "delete", "name": name, "versions": [a.version for a in found]},
            )
        ],
        actor=actor,
        system=system,
    )
    Artifact.objects.filter(pk__in=[a.pk for a in found]).update(
        deleted_at=timezone.now(), deleted_seq=written.events[0].seq
    )
    keys = [a.storage_key for a in found]
    transaction.on_commit(lambda: remove_files(keys), robust=True)


def expirable_versions(
    saved_before: datetime, *, gone: QuerySet[Session] | None = None
) -> QuerySet[Artifact]:
    """Stored versions saved before `saved_before` that no fork sees (DELETE refuses those,
    ArtifactSharedWithFork: they stay until the fork goes): what a retention policy's
    artifact_max_age deletes (retention_app's selection and expire_versions_locked).
    `gone`: forks to take as deleted already (retention's preview of a run that deletes them)."""
    forks = Session.objects.filter(parent_id=OuterRef("session_id"), fork_seq__gte=OuterRef("seq"))
    if gone is not None:
        forks = forks.exclude(pk__in=gone.values("pk"))
    return Artifact.objects.filter(deleted_at__isnull=True, created_at__lt=saved_before).exclude(
        Exists(forks)
    )


def expire_versions_locked(
    session: Session, *, saved_before: datetime, actor: Actor, limit: int
) -> list[Artifact]:
    """Retention's deletion of the session's own versions saved before `saved_before`, at most
    `limit` (the oldest first; the rest at the next run), as DELETE deletes them: an `artifact`
    event per name, rows marked, files removed once the caller's transaction commits. Whatever
    the session's status (a system write: a closed session's log records it too); versions a
    fork sees are kept. The caller holds the session's row locked. Returns those deleted."""
    found = list(
        expirable_versions(saved_before)
        .filter(session_id=session.pk)
        .select_for_update()
        .order_by("created_at", "pk")[:limit]
    )
    by_name: dict[str, list[Artifact]] = {}
    for artifact in sorted(found, key=lambda a: (a.name, a.version)):
        by_name.setdefault(artifact.name, []).append(artifact)
    for name, versions in by_name.items():
        _delete_versions_locked(session, name, versions, actor=actor, system=True)
    return found


def forget_session_files(session_ids: Sequence[Any]) -> None:
    """For whole-session deletion (retention_app), inside its transaction and with the
    sessions locked, before their rows go (CASCADE takes the artifact rows): their files are
    removed once that commits, and stay if it rolls back."""
    keys = list(
        Artifact.objects.filter(session_id__in=list(session_ids), deleted_at__isnull=True)
        .values_list("storage_key", flat=True)
        .iterator()
    )
    if keys:
        transaction.on_commit(lambda: remove_files(keys), robust=True)


def sweep_orphan_files(*, older_than: timedelta) -> list[str]:
    """Remove the stored files that no stored version names and that nothing wrote to for
    `older_than`: what a server killed (kill -9, a crash) between writing an upload's file and
    committing its row left, or a deletion whose after-commit removal failed. Returns their keys.

    Walks the storage (artifacts/<project>/<session>/<key>), one session folder at a time with
    one query each. An upload still streaming keeps writing its file, so it is never that old;
    keep `older_than` well above the longest upload a server allows (a day by default)."""
    store = artifact_storage()
    cutoff = timezone.now() - older_than
    removed: list[str] = []
    try:
        projects, _ = store.listdir("artifacts")
    except FileNotFoundError:  # a folder storage where nothing was ever saved
        return removed
    for project in projects:
        sessions, _ = store.listdir(f"artifacts/{project}")
        for session in sessions:
            folder = f"artifacts/{project}/{session}"
            _, names = store.listdir(folder)
            keys = [f"{folder}/{name}" for name in names]
            named = set(
                Artifact.objects.filter(storage_key__in=keys, deleted_at__isnull=True).values_list(
                    "storage_key", flat=True
                )
            )
            for key in keys:
                if key in named:
                    continue
                try:
                    if store.get_modified_time(key) > cutoff:
                        continue
                except FileNotFoundError:
                    continue
                store.delete(key)
                removed.append(key)
    return removed


# --- Reading ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArtifactVersions:
    name: str
    versions: list[Artifact]  # oldest first

    @property
    def latest(self) -> Artifact:
        return self.versions[-1]


def visible_artifacts(session: Session, *, at_seq: int | None = None) -> QuerySet[Artifact]:
    """The stored versions the session sees (its ancestors' up to its fork point), at `at_seq`."""
    return Artifact.objects.filter(_lineage(session, at_seq), deleted_at__isnull=True)


def list_artifacts(session: Session, *, at_seq: int | None = None) -> list[ArtifactVersions]:
    """The session's artifacts by name, each with its stored versions, as of `at_seq`."""
    grouped: dict[str, list[Artifact]] = {}
    for artifact in visible_artifacts(session, at_seq=at_seq).order_by("name", "version"):
        grouped.setdefault(artifact.name, []).append(artifact)
    return [ArtifactVersions(name, versions) for name, versions in grouped.items()]


def find_artifact(
    session: Session, name: str, *, version: int | None = None, at_seq: int | None = None
) -> Artifact:
    """One stored version the session sees (the latest when `version` is None); NotFound."""
    rows = visible_artifacts(session, at_seq=at_seq).filter(name=name)
    if version is not None:
        rows = rows.filter(version=version)
    artifact = rows.order_by("-version").first()
    if artifact is None:
        raise NotFound(
            "No such artifact in this session.", detail={"name": name, "version": version}
        )
    return artifact


def open_artifact(artifact: Artifact) -> IO[bytes]:
    """The version's bytes, to read (and seek); NotFound when a deletion took them meanwhile."""
    try:
        return artifact_storage().open(artifact.storage_key, "rb")
    except (FileNotFoundError, OSError) as exc:
        raise NotFound(
            "This artifact version was deleted.",
            detail={"name": artifact.name, "version": artifact.version},
        ) from exc


# --- Export -----------------------------------------------------------------------------------

TAR_BLOCK = 512


def _tar_member(name: str, size: int, mtime: float) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o644
    return info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="strict")


def _padding(size: int) -> bytes:
    return b"\0" * (-size % TAR_BLOCK)


def export_artifacts(session: Session, *, actor: Actor) -> Iterator[bytes]:
    """The session's stored versions (with its ancestors' up to its fork point) as a tar
    stream: each version's bytes at `<name>/v<version>`, then `manifest.json` listing what the
    archive holds (a version deleted while the archive streams is left out of both). Read a
    chunk at a time, never a whole file. Audited as a session export."""
    versions = list(visible_artifacts(session).order_by("name", "version"))
    record_audit(
        session.project_id,
        actor=actor,
        action="session.export",
        target_type="session",
        target_id=session.pk,
        detail={"head_seq": session.head_seq, "artifacts": len(versions)},
    )
    return _tar_stream(session, versions)


def _tar_stream(session: Session, versions: list[Artifact]) -> Iterator[bytes]:
    listed = []
    for artifact in versions:
        try:
            handle = open_artifact(artifact)
        except NotFound:
            continue
        path = f"{artifact.name}/v{artifact.version}"
        with handle:
            yield _tar_member(path, artifact.size, artifact.created_at.timestamp())
            left = artifact.size
            while left > 0:
                chunk = handle.read(min(left, CHUNK_BYTES))
                if not chunk:  # never short: a stored file is its row's size
                    yield b"\0" * left
                    break
                left -= len(chunk)
                yield chunk
            yield _padding(artifact.size)
        listed.append(
            {
                "path": path,
                "name": artifact.name,
                "version": artifact.version,
                "seq": artifact.seq,
                "session_id": str(artifact.session_id),
                "size": artifact.size,
                "sha256": artifact.sha256,
                "content_type": artifact.content_type,
                "created_at": artifact.created_at.isoformat(),
            }
        )
    manifest = json.dumps(
        {"session_id": str(session.pk), "artifacts": listed}, indent=1, ensure_ascii=False
    ).encode()
    yield _tar_member("manifest.json", len(manifest), timezone.now().timestamp())
    yield manifest
    yield _padding(len(manifest))
    yield b"\0" * (2 * TAR_BLOCK)  # the end of the archive
