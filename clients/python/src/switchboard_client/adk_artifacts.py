"""Google ADK's artifact store on Switchboard: `SwitchboardArtifactService`, a
`BaseArtifactService` that keeps each ADK artifact as a Switchboard artifact of the session.

    from switchboard_client.adk import SwitchboardSessionService
    from switchboard_client.adk_artifacts import SwitchboardArtifactService

    runner = Runner(
        agent=agent,
        app_name="support",
        session_service=SwitchboardSessionService(),
        artifact_service=SwitchboardArtifactService(),
    )

How ADK's model is kept (docs/adapters/adk.md says the same for users):

- A session-scoped artifact is an artifact of the Switchboard session that
  SwitchboardSessionService keeps the ADK session in (the same external id, so the same
  namespace; `switchboard:<id>` names a dashboard fork): the session page lists it, a fork sees
  it, deleting the session deletes it. Saving to an ADK session that does not exist yet creates
  it (empty), as ADK's own stores need no session to hold artifacts.
- A `user:` artifact lives in the Switchboard session that already holds the user's `user:`
  state (`adk:u:<app>:<user>`), so every session of that user sees it.
- ADK versions count from 0 and start again after a deletion; Switchboard's count from 1 and
  are never given twice. ADK version N is the N-th stored version, oldest first.
- The file name is the artifact's name, each character a Switchboard name may not hold (and
  `=`, and a leading `_`) written `=XX` per UTF-8 byte, after a `_` when it is the first:
  `user:report.pdf` stays readable on the session page, `.env` is `_=2Eenv`.
- A text part is stored as `text/plain`, an inline_data part as its bytes with its mime type,
  a file_data part (a URI, perhaps an `artifact://` reference, followed on load as ADK does) as
  JSON of type `application/vnd.adk.file-data+json`.
  An inline_data blob of type `text/plain` is stored as `text/vnd.adk.plain-blob` (so it loads
  back as a blob, not a text part; the session page previews only the text parts).
- Not kept: `custom_metadata` and an inline blob's `display_name` (Switchboard's artifacts
  have no such fields; listed versions carry `{}`).
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any, cast, override
from urllib.parse import quote

from google.adk.artifacts import artifact_util
from google.adk.artifacts.base_artifact_service import (
    ArtifactVersion,
    BaseArtifactService,
    ensure_part,
)
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.input_validation_error import InputValidationError
from google.genai import types

from . import models as m
from ._async_client import AsyncClient
from ._sync_client import Client
from .adk import SwitchboardSessionService
from .errors import NotFound

__all__ = ["SwitchboardArtifactService"]

USER_PREFIX = "user:"
TEXT_TYPE = "text/plain"
# An inline_data blob of type text/plain: stored under its own type, so that it loads back as a
# blob and a text part as a text part (Switchboard keeps no other field to tell them apart).
PLAIN_BLOB_TYPE = "text/vnd.adk.plain-blob"
FILE_DATA_TYPE = "application/vnd.adk.file-data+json"
# What a Switchboard artifact name holds as it is (sessions_app.services.artifacts.NAME_PATTERN),
# but `=`, which starts an escape here; the first character is narrower.
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@+,-")
_KEPT_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
# Starts a name whose first character is escaped (a name may not start with `=`); a file name's
# own leading `_` is escaped, so a leading `_` is always this mark.
_ESCAPED_FIRST = "_"
_MAX_NAME = 200
_ESCAPED = re.compile(r"(?:=[0-9A-F]{2})+")


class SwitchboardArtifactService(BaseArtifactService):
    """ADK's BaseArtifactService on a Switchboard project.

    `client` and `namespace` as SwitchboardSessionService's: give both services the same
    namespace, so an artifact lands in the Switchboard session that holds its ADK session."""

    def __init__(self, client: Client | AsyncClient | None = None, *, namespace: str = "") -> None:
        # The session service's mapping of (app, user, session) to Switchboard sessions, and
        # its client (closed by close() when made here).
        self.sessions = SwitchboardSessionService(client, namespace=namespace)
        self.client = self.sessions.client
        self.namespace = namespace

    async def close(self) -> None:
        """Close the AsyncClient this service made (not one it was given)."""
        await self.sessions.close()

    async def __aenter__(self) -> SwitchboardArtifactService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- Where an artifact lives ---------------------------------------------------------------

    async def _holder(
        self, app_name: str, user_id: str, filename: str, session_id: str | None, *, make: bool
    ) -> str | None:
        """The Switchboard id of the session that holds `filename`: the user's shared session
        for a `user:` name, else the ADK session's. None when it does not exist and not `make`."""
        artifact_util.validate_path_segment(app_name, "app_name")
        artifact_util.validate_path_segment(user_id, "user_id")
        sessions = self.sessions
        if filename.startswith(USER_PREFIX):
            ref = sessions._user_ref(app_name, user_id)
            if make:
                metadata = sessions._metadata("user_state", app_name, user_id=user_id)
                return await sessions._open_shared(ref, metadata, app_name)
            found = await self.client.find_session(ref)
            return None if found is None else found.id
        session_id = _trimmed(session_id)
        if session_id is None:
            raise InputValidationError("Session ID must be provided for session-scoped artifacts.")
        artifact_util.validate_path_segment(session_id, "session_id")
        located = await sessions._find(app_name, user_id, session_id)
        if located is not None or not make:
            return None if located is None else located[0]
        # ADK's stores keep artifacts of sessions they never saw: open the session, empty.
        with contextlib.suppress(AlreadyExistsError):  # made meanwhile by someone else
            await sessions.create_session(app_name=app_name, user_id=user_id, session_id=session_id)
        located = await sessions._find(app_name, user_id, session_id)
        if located is None:
            raise NotFound(f"Session {session_id} was deleted while an artifact was saved.")
        return located[0]

    async def _versions(self, holder: str, name: str) -> list[m.Artifact]:
        """The stored versions of `name` in the session `holder`, oldest first."""
        for listed in await self.client.list_artifacts(holder):
            if listed.name == name:
                return listed.versions
        return []

    async def _stored(
        self, app_name: str, user_id: str, filename: str, session_id: str | None
    ) -> tuple[str, list[m.Artifact]] | None:
        holder = await self._holder(app_name, user_id, filename, session_id, make=False)
        if holder is None:
            return None
        return holder, await self._versions(holder, stored_name(filename))

    # --- BaseArtifactService -------------------------------------------------------------------

    @override
    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        session_id = _trimmed(session_id)
        part = ensure_part(artifact)
        data, content_type = self._encode(part, app_name, user_id, session_id)
        name = stored_name(filename)
        holder = await self._holder(app_name, user_id, filename, session_id, make=True)
        assert holder is not None
        try:
            saved = await self.client.put_artifact(holder, name, data, content_type=content_type)
        except NotFound:
            if not filename.startswith(USER_PREFIX):
                raise
            # The user's session, remembered open, was deleted since: open it again.
            self.sessions._shared_ids.pop(self.sessions._user_ref(app_name, user_id), None)
            holder = await self._holder(app_name, user_id, filename, session_id, make=True)
            assert holder is not None
            saved = await self.client.put_artifact(holder, name, data, content_type=content_type)
        # Its place among the versions stored now: concurrent saves of one name each get theirs.
        numbers = [stored.version for stored in await self._versions(holder, name)]
        return numbers.index(saved.version) if saved.version in numbers else len(numbers)

    def _encode(
        self, part: types.Part, app_name: str, user_id: str, session_id: str | None
    ) -> tuple[bytes, str]:
        if part.inline_data is not None:
            blob = part.inline_data
            mime_type = blob.mime_type or "application/octet-stream"
            return blob.data or b"", PLAIN_BLOB_TYPE if mime_type == TEXT_TYPE else mime_type
        if part.text is not None:
            return part.text.encode(), TEXT_TYPE
        if part.file_data is not None:
            if artifact_util.is_artifact_ref(part):
                parsed = artifact_util.parse_artifact_uri(cast(str, part.file_data.file_uri))
                if parsed is None:
                    raise InputValidationError(
                        f"Invalid artifact reference URI: {part.file_data.file_uri}"
                    )
                artifact_util.validate_artifact_reference_scope(
                    app_name=app_name, user_id=user_id, session_id=session_id, parsed_uri=parsed
                )
            described = part.file_data.model_dump(mode="json", exclude_none=True)
            return json.dumps(described).encode(), FILE_DATA_TYPE
        raise InputValidationError("Not supported artifact type.")

    @override
    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        session_id = _trimmed(session_id)
        depth = artifact_util._MAX_ARTIFACT_REFERENCE_DEPTH
        while True:
            found = await self._stored(app_name, user_id, filename, session_id)
            if found is None:
                return None
            holder, versions = found
            chosen = _pick(versions, version)
            if chosen is None:
                return None
            try:
                data = await self.client.get_artifact(holder, chosen.name, version=chosen.version)
            except NotFound:
                return None  # deleted since it was listed
            part = _decode(data, chosen.content_type)
            if not artifact_util.is_artifact_ref(part):
                if part == types.Part() or artifact_util._is_rewind_tombstone(part):
                    return None
                return part
            # A reference to another artifact: followed as ADK's stores do, a bounded chain.
            assert part.file_data is not None
            target = artifact_util.resolve_artifact_reference(
                file_uri=cast(str, part.file_data.file_uri),
                app_name=app_name,
                user_id=user_id,
                session_id=session_id,
                remaining_depth=depth,
            )
            depth -= 1
            app_name, user_id = target.app_name, target.user_id
            filename, session_id, version = target.filename, target.session_id, target.version

    @override
    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        artifact_util.validate_path_segment(app_name, "app_name")
        artifact_util.validate_path_segment(user_id, "user_id")
        names: list[str] = []
        if session_id is not None:
            holder = await self._holder(app_name, user_id, "", session_id, make=False)
            if holder is not None:
                names += [
                    a.name
                    for a in await self.client.list_artifacts(holder)
                    if not a.name.startswith(USER_PREFIX)
                ]
        users = await self._holder(app_name, user_id, USER_PREFIX, None, make=False)
        if users is not None:
            names += [
                a.name
                for a in await self.client.list_artifacts(users)
                if a.name.startswith(USER_PREFIX)
            ]
        return sorted(original_name(name) for name in names)

    @override
    async def delete_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
    ) -> None:
        holder = await self._holder(app_name, user_id, filename, session_id, make=False)
        if holder is None:
            return
        with contextlib.suppress(NotFound):  # none stored (or deleted meanwhile): as asked
            await self.client.delete_artifact(holder, stored_name(filename))

    @override
    async def list_versions(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
    ) -> list[int]:
        found = await self._stored(app_name, user_id, filename, session_id)
        return [] if found is None else list(range(len(found[1])))

    @override
    async def list_artifact_versions(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
    ) -> list[ArtifactVersion]:
        found = await self._stored(app_name, user_id, filename, session_id)
        if found is None:
            return []
        holder, versions = found
        return [await self._described(holder, stored, n) for n, stored in enumerate(versions)]

    @override
    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        found = await self._stored(app_name, user_id, filename, session_id)
        if found is None:
            return None
        holder, versions = found
        chosen = _pick(versions, version)
        if chosen is None:
            return None
        return await self._described(holder, chosen, versions.index(chosen))

    async def _described(self, holder: str, stored: m.Artifact, number: int) -> ArtifactVersion:
        uri = (
            f"{self.client.url}/api/v1/sessions/{holder}/artifacts/"
            f"{quote(stored.name, safe=':@+,=')}?version={stored.version}"
        )
        mime_type = _mime_type(stored.content_type)
        if stored.content_type == FILE_DATA_TYPE:
            # A file_data part's type is the one it names (none for an artifact:// reference),
            # read from its few stored bytes.
            with contextlib.suppress(NotFound):
                data = await self.client.get_artifact(holder, stored.name, version=stored.version)
                part = _decode(data, stored.content_type)
                if part.file_data is not None and not artifact_util.is_artifact_ref(part):
                    mime_type = part.file_data.mime_type
        return ArtifactVersion(
            version=number,
            canonical_uri=uri,
            create_time=stored.created_at.timestamp(),
            mime_type=mime_type,
        )


# --- Names and parts ---------------------------------------------------------------------------


def stored_name(filename: str) -> str:
    """The Switchboard artifact name of an ADK file name: the characters a name may hold kept,
    the others (and `=`) as `=XX` per UTF-8 byte, so no two file names share one."""
    written = []
    for position, char in enumerate(filename):
        kept = _KEPT_FIRST if position == 0 else _KEPT
        if char in kept:
            written.append(char)
        else:
            written.append("".join(f"={byte:02X}" for byte in char.encode()))
    name = "".join(written)
    if name.startswith("="):
        name = _ESCAPED_FIRST + name
    if not name or len(name) > _MAX_NAME:
        raise InputValidationError(
            f"An artifact file name must be 1 to {_MAX_NAME} characters once escaped for "
            f"Switchboard ({len(name)}): {filename[:80]!r}"
        )
    return name


def original_name(name: str) -> str:
    """The ADK file name stored_name made `name` from."""
    return _ESCAPED.sub(
        lambda run: bytes.fromhex(run.group(0).replace("=", "")).decode(errors="replace"),
        name.removeprefix(_ESCAPED_FIRST),
    )


def _trimmed(session_id: str | None) -> str | None:
    """The session id as the session service keeps it: without spaces around (so a reference
    to `sess0` stays in the scope of a caller that says `sess0\\n`)."""
    return session_id.strip() if session_id else session_id


def _pick(versions: list[m.Artifact], version: int | None) -> m.Artifact | None:
    """ADK's version `version` (None: the latest) of the stored versions, oldest first."""
    if not versions:
        return None
    if version is None:
        return versions[-1]
    if 0 <= version < len(versions):
        return versions[version]
    return None


def _decode(data: bytes, content_type: str) -> types.Part:
    if content_type == TEXT_TYPE:
        try:
            return types.Part(text=data.decode())
        except UnicodeDecodeError:
            pass  # a text/plain blob that is not UTF-8: its bytes as they are
    if content_type == FILE_DATA_TYPE:
        return types.Part(file_data=types.FileData.model_validate(json.loads(data)))
    return types.Part(inline_data=types.Blob(mime_type=_mime_type(content_type), data=data))


def _mime_type(content_type: str) -> str | None:
    """The mime type ADK gave a part stored as `content_type`."""
    if content_type == FILE_DATA_TYPE:
        return None  # the type of the file it names: _described reads it
    return TEXT_TYPE if content_type == PLAIN_BLOB_TYPE else content_type
