"""Google ADK's session store on Switchboard: `SwitchboardSessionService`, a `BaseSessionService`.

    from switchboard_client.adk import SwitchboardSessionService

    runner = Runner(agent=agent, app_name="support", session_service=SwitchboardSessionService())

How ADK's model is kept (docs/adapters/adk.md says the same for users):

- An ADK session is a Switchboard session whose external_id is made from the namespace, the app
  name, the user id and the session id (`adk:s:<app>:<user>:<id>`, each part percent-encoded so
  none can run into the next; a SHA-256 of it when that is over the API's 200 characters), with
  metadata {adk, namespace, app_name, user_id, session_id}, so list_sessions is one filtered
  request (with include=state) whatever the external ids look like. A session id
  `switchboard:<session id>` is that Switchboard session itself: a fork made in the dashboard
  (no external_id, its parent's metadata), listed under that id and continued from its fork
  point.
- Each ADK event is one event an operator can read: a `message` (the text of its parts), a
  `tool_call` / `tool_result` (function calls / responses: name, arguments, result), or a `note`
  (an event with neither, e.g. state only); each carries the whole ADK event as JSON under
  `adk`, so get_session returns events equal to the ones appended. Its state delta rides in the
  same append as a `state` event.
- An ADK event whose Switchboard event would be over the server's event size limit (a tool's
  large response: ADK's own stores take any size) is kept in the session's blobs, in pieces of
  256 KiB sent with the append that writes its event (or stored just before it when too large
  for one request); its event shows the same kind, role and author, each field cut to its
  first 2,000 characters, and `adk_in_blobs` (the event's id, timestamp, size in bytes and blob
  names), which get_session follows to return the event as appended. A fork reads them through
  its parent (a session's blobs are its ancestors' too); they go when the session is deleted.
- ADK state replaces per key and keeps `None`; a working-state patch (RFC 7386) deletes a key
  set to null and merges objects. So each value is stored wrapped in a one-element list,
  `{"adk_state": {"key": [value]}}`: a list replaces whole, so the patch replaces per key and
  `None` stays `[null]`. A value that would take its state event over the event size limit
  is kept in the session's blobs like a large event, its place holding `{"adk_in_blobs":
  {"bytes", "blobs", "preview"}}` instead of the list; a read loads it back (one more request
  for a read that meets one). `temp:` keys are never sent. `app:` and `user:` keys live in one
  Switchboard session per app (`adk:a:<app>`) and one per app and user (`adk:u:<app>:<user>`),
  read into every session of that app / user as ADK does.
- Stale writers are refused: a session read or written here carries its Switchboard id and head
  seq in ADK's `_storage_update_marker`, and the next append sends that head as
  `expected_head_seq`; a session written by someone else since answers 409 head_seq_mismatch,
  raised as ADK's StaleSessionError. Only `artifact` events since (a tool's saves through
  SwitchboardArtifactService, adk_artifacts.py) do not make it stale: the append goes after them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, override
from urllib.parse import quote

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.platform import time as platform_time
from google.adk.platform import uuid as platform_uuid
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from google.genai import types

from . import models as m
from ._adapters import (
    DEFAULT_EVENT_BYTES,
    SESSION_PREFIX,
    async_client,
    content_bytes,
    namespaced,
    preview,
    refused_limit,
    session_reference,
)
from ._async_client import AsyncClient
from ._core import PIECE_SIZE
from ._sync_client import Client
from .errors import Conflict, NotFound, PayloadTooLarge, SwitchboardError

__all__ = ["HandoffUnanswered", "SwitchboardSessionService", "ask_person"]

# The API's longest external_id; a longer readable one is replaced by its SHA-256.
_MAX_EXTERNAL_ID = 200
# Where ADK's state lives in a session's working state, each value wrapped in a list.
_STATE = "adk_state"
_UPDATED = "last_update_time"
# The event kinds ADK events are written as (a state delta rides as a `state` event beside).
_EVENT_KINDS = ("message", "tool_call", "tool_result", "note")
_PAGE = 1000
# The most events GET /sessions?include=events gives per session (its events_limit).
_LISTED_EVENTS = 200
# Where an ADK event kept in blobs is named, in the content of its Switchboard event.
_STORED = "adk_in_blobs"

Scope = Literal["session", "app_state", "user_state"]


class SwitchboardSessionService(BaseSessionService):
    """ADK's BaseSessionService on a Switchboard project.

    `client`: a Client or AsyncClient (this service talks through an AsyncClient on the same URL
    and key), or None for one from SWITCHBOARD_URL and SWITCHBOARD_API_KEY. `namespace`
    prefixes every external id made here, so several applications or test runs share a project
    without their sessions colliding."""

    def __init__(self, client: Client | AsyncClient | None = None, *, namespace: str = "") -> None:
        self.client = async_client(client)
        # A client made here (from a sync Client's settings, or the environment) is closed by
        # close(); one passed in belongs to the caller.
        self._owns_client = self.client is not client
        self.namespace = namespace
        # Appends to one session from this process go one at a time, so each sends the head
        # the previous one left (parallel agents of an invocation share one Session object).
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        # Switchboard ids of the app- and user-state sessions opened here (never deleted).
        self._shared_ids: dict[str, str] = {}
        # Content bytes above which an ADK event goes to blobs (DEFAULT_EVENT_BYTES).
        self._event_bytes = DEFAULT_EVENT_BYTES

    async def close(self) -> None:
        """Close the AsyncClient this service made (not one it was given)."""
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> SwitchboardSessionService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- Names ---------------------------------------------------------------------------------

    def _external_id(self, *parts: str) -> str:
        readable = namespaced(self.namespace, "adk:" + ":".join(quote(p, safe="") for p in parts))
        if len(readable) <= _MAX_EXTERNAL_ID:
            return readable
        digest = hashlib.sha256(readable.encode()).hexdigest()
        return namespaced(self.namespace, "adk:h:" + digest)

    def _session_ref(self, app_name: str, user_id: str, session_id: str) -> str:
        return self._external_id("s", app_name, user_id, session_id)

    def _app_ref(self, app_name: str) -> str:
        return self._external_id("a", app_name)

    def _user_ref(self, app_name: str, user_id: str) -> str:
        return self._external_id("u", app_name, user_id)

    def _metadata(self, scope: Scope, app_name: str, **ids: str) -> dict[str, Any]:
        # Sessions carry app_name; the shared-state ones carry state_of instead, so listing an
        # app's sessions by metadata never finds them.
        app_key = "app_name" if scope == "session" else "state_of"
        return {"adk": scope, "namespace": self.namespace, app_key: app_name, **ids}

    @staticmethod
    def _agent(app_name: str) -> str:
        return f"adk:{app_name}"[:100]

    async def _find(
        self, app_name: str, user_id: str, session_id: str, *, include_state: bool = False
    ) -> tuple[str, int, dict[str, Any]] | None:
        """(Switchboard id, head seq, working state: with include_state) of the ADK session,
        or None. A session id `switchboard:<id>` names a Switchboard session directly (a fork
        made in the dashboard, which has no external_id): found when its metadata says it is
        a session of this app and user (a fork keeps its parent's)."""
        referenced = session_reference(session_id)
        if referenced is None:
            ref = self._session_ref(app_name, user_id, session_id)
            found = await self.client.find_session(ref, include_state=include_state)
            if found is None:
                return None
            return found.id, found.head_seq, found.state or {}
        try:
            named = await self.client.get_session(referenced)
        except NotFound:
            return None
        ours = self._metadata("session", app_name, user_id=user_id)
        if any(named.metadata.get(key) != value for key, value in ours.items()):
            return None
        working: dict[str, Any] = {}
        if include_state:
            working = (await self.client.state(named.id, at_seq=named.head_seq)).state
        return named.id, named.head_seq, working

    # --- BaseSessionService --------------------------------------------------------------------

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id.strip() if session_id else None) or platform_uuid.new_uuid()
        deltas = _session_util.extract_json_safe_state_delta(state or {})
        ref = self._session_ref(app_name, user_id, session_id)
        opened = await self.client.open_session(
            self._agent(app_name),
            external_id=ref,
            title=f"{app_name} · {user_id} · {session_id}"[:300],
            metadata=self._metadata("session", app_name, user_id=user_id, session_id=session_id),
        )
        if opened.head_seq:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        now = platform_time.get_time()
        content, pieces = _state_content(deltas["session"], self._event_bytes, {_UPDATED: now})
        first: m.EventIn = {"kind": "state", "content": content}
        try:
            # expected_head_seq=0: of two creators racing on one id, one writes and the other
            # is told the session exists (open answered both with the same, empty session).
            written = await self.client.append(
                opened.id, [first], expected_head_seq=0, blobs=pieces
            )
        except Conflict as error:
            if error.code == "head_seq_mismatch":
                raise AlreadyExistsError(f"Session with id {session_id} already exists.") from error
            raise
        await self._write_shared(app_name, user_id, deltas)
        app_state, user_states = await self._shared_of_user(app_name, user_id)
        user_state = user_states[user_id]
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=_merge(app_state, user_state, deltas["session"]),
            last_update_time=now,
        )
        session._storage_update_marker = _marker(opened.id, written.head_seq)
        return session

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        session_id = session_id.strip() if session_id else session_id
        config = config or GetSessionConfig()
        wanted = config.num_recent_events
        tail: m.SessionListItem | None = None
        if session_reference(session_id) is None:
            # One request: the session, its state and its last events, with the app's and the
            # user's shared state (each ADK event is two events in the log: itself and its
            # state delta, hence 2 × wanted; a few more cover an operator's message between).
            app_ref, user_ref = self._app_ref(app_name), self._user_ref(app_name, user_id)
            ref = self._session_ref(app_name, user_id, session_id)
            listed = await self.client.find_sessions(
                [ref, app_ref, user_ref],
                include_state=True,
                include_events=None if wanted == 0 else _tail_size(wanted),
            )
            tail = listed.get(ref)
            if tail is None:
                return None
            app_state, user_state = await self._shared_found(listed, app_ref, user_ref)
            switchboard_id, head_seq, working = tail.id, tail.head_seq, tail.state or {}
        else:
            # A fork made in the dashboard, named by its Switchboard id.
            found, (app_state, user_states) = await asyncio.gather(
                self._find(app_name, user_id, session_id, include_state=True),
                self._shared_of_user(app_name, user_id),
            )
            if found is None:
                return None
            switchboard_id, head_seq, working = found
            user_state = user_states[user_id]
        values = _unwrap(working.get(_STATE))
        await self._load_kept((switchboard_id, values))
        events: list[Event] = []
        if wanted != 0:
            events = await self._recent_events(
                switchboard_id, wanted, config.after_timestamp, first=tail
            )
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=_merge(app_state, user_state, values),
            events=events,
            last_update_time=float(working.get(_UPDATED) or 0.0),
        )
        session._storage_update_marker = _marker(switchboard_id, head_seq)
        return session

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        metadata: dict[str, str | int | float | bool | None] = {
            "adk": "session",
            "namespace": self.namespace,
            "app_name": app_name,
        }
        if user_id is not None:
            metadata["user_id"] = user_id
            shared: Awaitable[tuple[dict[str, Any], dict[str, dict[str, Any]]]] = (
                self._shared_of_user(app_name, user_id)
            )
        else:
            shared = self._shared_of_app(app_name)
        listed, (app_state, user_states) = await asyncio.gather(
            _collect(self.client.iter_sessions(metadata=metadata, include_state=True, limit=200)),
            shared,
        )
        values = {item.id: _unwrap((item.state or {}).get(_STATE)) for item in listed}
        await self._load_kept(*values.items())
        sessions = []
        for item in listed:
            owner = str(item.metadata.get("user_id", ""))
            working = item.state or {}
            session_id = str(item.metadata.get("session_id", ""))
            if item.external_id != self._session_ref(app_name, owner, session_id):
                # A fork made in the dashboard (its parent's metadata, no external_id): ADK
                # opens it by its Switchboard id.
                session_id = SESSION_PREFIX + item.id
            session = Session(
                id=session_id,
                app_name=app_name,
                user_id=owner,
                state=_merge(app_state, user_states.get(owner, {}), values[item.id]),
                last_update_time=float(working.get(_UPDATED) or 0.0),
            )
            session._storage_update_marker = _marker(item.id, item.head_seq)
            sessions.append(session)
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        session_id = session_id.strip() if session_id else session_id
        found = await self._find(app_name, user_id, session_id)
        if found is None:
            return
        with contextlib.suppress(NotFound):  # deleted meanwhile: what was asked
            await self.client.delete_session(found[0])

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self._read_shared(self._user_ref(app_name, user_id))

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        # temp: keys reach the in-memory session for the rest of the invocation, never storage.
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        deltas = _session_util.extract_json_safe_state_delta(event.actions.state_delta or {})
        ref = self._session_ref(session.app_name, session.user_id, session.id)
        async with self._lock(ref):
            switchboard_id, head = _parse_marker(session._storage_update_marker)
            if switchboard_id is None:
                # A Session made by hand (no marker): append at whatever head the log has.
                found = await self._find(session.app_name, session.user_id, session.id)
                if found is None:
                    raise SessionNotFoundError(f"Session {session.id} not found.")
                switchboard_id = found[0]
            data = event.model_dump(exclude_none=True, mode="json")
            # The event's id with a digest of its content: an equal event delivered again is
            # replayed by the server (nothing written twice); another one sharing its id is not.
            digest = hashlib.sha256(
                json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
            ).hexdigest()[:24]
            key = f"adk:{event.id}:{digest}"[:190]
            readable = _readable(event, data)
            readable["idempotency_key"] = key
            pieces: list[bytes] = []
            while True:
                if content_bytes(readable["content"]) > self._event_bytes:
                    readable, pieces = _in_blobs(readable, data)
                content, state_pieces = _state_content(
                    deltas["session"], self._event_bytes, {_UPDATED: event.timestamp}
                )
                state: m.EventIn = {
                    "kind": "state",
                    "content": content,
                    "idempotency_key": key + ":state",
                }
                try:
                    written = await self._append_unless_stale(
                        session, switchboard_id, [readable, state], head, pieces + state_pieces
                    )
                    break
                except PayloadTooLarge as error:
                    # A server set lower than DEFAULT_EVENT_BYTES: its limit from now on
                    # (nothing of the refused batch was written).
                    limit = refused_limit(error)
                    if limit is None or limit >= self._event_bytes:
                        raise
                    self._event_bytes = limit
            if all(e.replayed for e in written.events) and any(
                e == event for e in session.events if e.id == event.id
            ):
                return event  # delivered again: neither stored nor applied twice
            # Where this batch stands, not the head: the same as the head when it was just
            # written; when it was written before (the client's retry of a request whose answer
            # was lost), what came after it is not in this Session, which is then stale.
            session._storage_update_marker = _marker(switchboard_id, written.events[-1].seq)
            session.last_update_time = event.timestamp
            await self._write_shared(session.app_name, session.user_id, deltas)
        return self._commit_event_to_session(session, event)

    async def _append_unless_stale(
        self,
        session: Session,
        switchboard_id: str,
        batch: list[m.EventIn],
        head: int | None,
        blobs: list[bytes],
    ) -> m.AppendResult:
        """Append `batch` at `head`, with the `blobs` its events name (stored with them);
        StaleSessionError when someone else wrote since. Artifacts
        are not part of an ADK Session: when only `artifact` events came after `head` (a tool's
        save_artifact through SwitchboardArtifactService, between the session's last append
        and this one), the batch goes after them."""
        while True:
            try:
                return await self.client.append(
                    switchboard_id, batch, expected_head_seq=head, blobs=blobs
                )
            except Conflict as error:
                if error.code != "head_seq_mismatch" or head is None:
                    raise
                newer = await self.client.events(switchboard_id, after_seq=head, limit=_PAGE)
                if newer.has_more or not newer.events:
                    raise _stale() from error
                if any(event.kind != "artifact" for event in newer.events):
                    raise _stale() from error
                head = newer.events[-1].seq
            except NotFound as error:
                raise SessionNotFoundError(f"Session {session.id} not found.") from error

    # --- Reading events ------------------------------------------------------------------------

    async def _recent_events(
        self,
        switchboard_id: str,
        limit: int | None,
        after: float | None,
        *,
        first: m.SessionListItem | None = None,
    ) -> list[Event]:
        """The session's ADK events, oldest first: the last `limit` of them, of those the ones
        after the newest one older than `after` (as InMemorySessionService filters). `first`:
        the session as listed with its last events (include_events), read before asking for
        more."""
        # Events kept in blobs wait as their _STORED marker, all loaded in one look-up at the end.
        newest_first: list[Event | dict[str, Any]] = []
        before: int | None = None
        while limit is None or len(newest_first) < limit:
            page: _TailPage | m.EventSlice
            if first is not None and first.events is not None:
                page = _TailPage(first.events[::-1], bool(first.events_has_more))
                first = None
            else:
                page = await self.client.events(
                    switchboard_id,
                    before_seq=before,
                    order="desc",
                    kind=_EVENT_KINDS,
                    limit=_PAGE if limit is None else min(_PAGE, limit - len(newest_first) + 8),
                )
            ended = False
            for stored in page.events:
                data = stored.content.get("adk")
                marker = stored.content.get(_STORED)
                found: Event | dict[str, Any]
                if isinstance(data, dict):
                    found = Event.model_validate(data)
                    timestamp = found.timestamp
                elif isinstance(marker, dict):
                    found, timestamp = marker, float(marker["timestamp"])
                else:
                    continue  # written by someone else (an operator's message): not ADK's
                if after is not None and timestamp < after:
                    ended = True
                    break
                newest_first.append(found)
                if limit is not None and len(newest_first) == limit:
                    break
            if ended or not page.has_more or not page.events:
                break
            before = page.events[-1].seq
        return await self._loaded(switchboard_id, newest_first[::-1])

    async def _loaded(
        self, switchboard_id: str, found: list[Event | dict[str, Any]]
    ) -> list[Event]:
        """`found` with each _STORED marker replaced by the event its blobs hold."""
        names = [name for f in found if isinstance(f, dict) for name in f["blobs"]]
        loaded = dict(zip(names, await self.client.load_blobs(switchboard_id, names), strict=True))
        return [
            Event.model_validate_json(b"".join(loaded[name] for name in f["blobs"]))
            if isinstance(f, dict)
            else f
            for f in found
        ]

    # --- app: and user: state ------------------------------------------------------------------

    async def _read_shared(self, ref: str) -> dict[str, Any]:
        values = self._shared_from(ref, await self.client.find_session(ref, include_state=True))
        await self._load_kept((self._shared_ids.get(ref), values))
        return values

    def _shared_from(self, ref: str, found: m.SessionListItem | None) -> dict[str, Any]:
        """The shared state a look-up of `ref` found (include_state), its id remembered; a
        value kept in blobs as a _Kept (the caller loads it: _load_kept)."""
        if found is None:
            return {}
        self._shared_ids[ref] = found.id
        return _unwrap((found.state or {}).get(_STATE))

    async def _shared_of_user(
        self, app_name: str, user_id: str
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        app_ref, user_ref = self._app_ref(app_name), self._user_ref(app_name, user_id)
        listed = await self.client.find_sessions([app_ref, user_ref], include_state=True)
        app_state, user_state = await self._shared_found(listed, app_ref, user_ref)
        return app_state, {user_id: user_state}

    async def _shared_found(
        self, listed: Mapping[str, m.SessionListItem], app_ref: str, user_ref: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The app's and the user's shared state as a look-up by external id found them, the
        values kept in blobs loaded."""
        app_state = self._shared_from(app_ref, listed.get(app_ref))
        user_state = self._shared_from(user_ref, listed.get(user_ref))
        await self._load_kept(
            (self._shared_ids.get(app_ref), app_state),
            (self._shared_ids.get(user_ref), user_state),
        )
        return app_state, user_state

    async def _shared_of_app(
        self, app_name: str
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The app's state and every user's, from one listing of the app's state sessions."""
        app_state: dict[str, Any] = {}
        user_states: dict[str, dict[str, Any]] = {}
        metadata: dict[str, str | int | float | bool | None] = {
            "namespace": self.namespace,
            "state_of": app_name,
        }
        async for item in self.client.iter_sessions(
            metadata=metadata, include_state=True, limit=200
        ):
            values = _unwrap((item.state or {}).get(_STATE))
            await self._load_kept((item.id, values))
            if item.metadata.get("adk") == "app_state":
                app_state = values
            elif item.metadata.get("adk") == "user_state":
                user_states[str(item.metadata.get("user_id", ""))] = values
        return app_state, user_states

    async def _write_shared(
        self, app_name: str, user_id: str, deltas: Mapping[str, dict[str, Any]]
    ) -> None:
        writes = []
        if deltas["app"]:
            writes.append(
                self._patch_shared(
                    self._app_ref(app_name),
                    self._metadata("app_state", app_name),
                    app_name,
                    deltas["app"],
                )
            )
        if deltas["user"]:
            writes.append(
                self._patch_shared(
                    self._user_ref(app_name, user_id),
                    self._metadata("user_state", app_name, user_id=user_id),
                    app_name,
                    deltas["user"],
                )
            )
        await asyncio.gather(*writes)

    async def _open_shared(self, ref: str, metadata: dict[str, Any], app_name: str) -> str:
        """The Switchboard id of a shared-state session, opened on first use."""
        switchboard_id = self._shared_ids.get(ref)
        if switchboard_id is None:
            opened = await self.client.open_session(
                self._agent(app_name), external_id=ref, title=ref[:300], metadata=metadata
            )
            switchboard_id = self._shared_ids[ref] = opened.id
        return switchboard_id

    async def _patch_shared(
        self, ref: str, metadata: dict[str, Any], app_name: str, delta: dict[str, Any]
    ) -> None:
        """Apply `delta` to a shared-state session (opened on first use): no head is expected,
        since ADK's app: and user: writes are last-write-wins per key."""
        content, pieces = _state_content(delta, self._event_bytes)
        patch: m.EventIn = {"kind": "state", "content": content}
        for attempt in range(2):
            switchboard_id = await self._open_shared(ref, metadata, app_name)
            try:
                await self.client.append(switchboard_id, [patch], blobs=pieces)
                return
            except NotFound:
                # Deleted by someone else since this process opened it: open it again.
                self._shared_ids.pop(ref, None)
                if attempt:
                    raise

    async def _load_kept(self, *states: tuple[str | None, dict[str, Any]]) -> None:
        """Replace each _Kept value of `states` (each beside the Switchboard id of the session
        whose blobs hold it) by the value: one look-up per session that has any, together."""

        async def load(switchboard_id: str, values: dict[str, Any]) -> None:
            kept = {key: v for key, v in values.items() if isinstance(v, _Kept)}
            if not kept:
                return
            names = list(dict.fromkeys(name for v in kept.values() for name in v.blobs))
            loaded = dict(
                zip(names, await self.client.load_blobs(switchboard_id, names), strict=True)
            )
            for key, v in kept.items():
                values[key] = json.loads(b"".join(loaded[name] for name in v.blobs))

        await asyncio.gather(*(load(sid, values) for sid, values in states if sid))

    @asynccontextmanager
    async def _lock(self, ref: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(ref, (asyncio.Lock(), 0))
        self._locks[ref] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[ref]
            if users == 1:
                del self._locks[ref]
            else:
                self._locks[ref] = (lock, users - 1)


# --- Encoding ----------------------------------------------------------------------------------


def _in_blobs(readable: m.EventIn, data: dict[str, Any]) -> tuple[m.EventIn, list[bytes]]:
    """The ADK event (`data`) as JSON in pieces, and `readable` with its fields cut, naming
    them under _STORED."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    pieces = [raw[i : i + PIECE_SIZE] for i in range(0, len(raw), PIECE_SIZE)]
    content: dict[str, Any] = {
        name: preview(value, len(raw), "event")
        for name, value in readable.get("content", {}).items()
        if name != "adk"
    }
    content[_STORED] = {
        "id": data.get("id"),
        "timestamp": data.get("timestamp"),
        "bytes": len(raw),
        "blobs": [hashlib.sha256(piece).hexdigest() for piece in pieces],
    }
    return {**readable, "content": content}, pieces


def _tail_size(wanted: int | None) -> int:
    """Events of the log that hold the last `wanted` ADK events (None: all of them) when no one
    else wrote between: each is two (the event and its state delta); the API's most at once."""
    return _LISTED_EVENTS if wanted is None else min(_LISTED_EVENTS, 2 * wanted + 8)


@dataclass
class _TailPage:
    """A listed session's last events as a page of the events endpoint: newest first."""

    events: list[m.Event]
    has_more: bool


def _wrap(values: Mapping[str, Any]) -> dict[str, Any]:
    """ADK state as a merge patch that replaces per key and keeps None: each value in a list."""
    return {key: [value] for key, value in values.items()}


@dataclass(frozen=True)
class _Kept:
    """A state value read as kept in blobs (its pieces' names), until _load_kept loads it."""

    blobs: tuple[str, ...]


def _state_content(
    values: Mapping[str, Any], limit: int, more: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], list[bytes]]:
    """A state event's content, `values` wrapped (and `more` beside), with the largest values
    kept in blobs until it fits the event size `limit`; and those blobs. A kept value's place
    names its pieces under _STORED, with its size and a preview for the operator: an object
    where a stored value is a list, so the next write of the key (a list, or another object of
    the same three fields) replaces it whole under the merge patch."""
    wrapped = _wrap(values)
    content: dict[str, Any] = {_STATE: wrapped, **(more or {})}
    pieces: list[bytes] = []
    while content_bytes(content) > limit:
        inline = [(content_bytes(v), key) for key, v in wrapped.items() if isinstance(v, list)]
        if not inline:
            break  # the keys' names alone are over it: the server says so
        _, key = max(inline)
        raw = json.dumps(values[key], ensure_ascii=False, separators=(",", ":")).encode()
        parts = [raw[i : i + PIECE_SIZE] for i in range(0, len(raw), PIECE_SIZE)]
        shown = preview(values[key], len(raw), "value")
        wrapped[key] = {
            _STORED: {
                "bytes": len(raw),
                "blobs": [hashlib.sha256(part).hexdigest() for part in parts],
                "preview": shown if shown is not values[key] else "",
            }
        }
        pieces.extend(parts)
    return content, pieces


def _unwrap(stored: Any) -> dict[str, Any]:
    """ADK state from its stored form: each value out of its list; one kept in blobs as a
    _Kept."""
    if not isinstance(stored, dict):
        return {}
    values: dict[str, Any] = {}
    for key, value in stored.items():
        if isinstance(value, list) and value:
            values[key] = value[0]
        elif isinstance(value, dict) and isinstance(value.get(_STORED), dict):
            values[key] = _Kept(tuple(value[_STORED].get("blobs") or ()))
    return values


def _merge(
    app_state: Mapping[str, Any], user_state: Mapping[str, Any], session_state: Mapping[str, Any]
) -> dict[str, Any]:
    merged = dict(session_state)
    merged.update({State.APP_PREFIX + key: value for key, value in app_state.items()})
    merged.update({State.USER_PREFIX + key: value for key, value in user_state.items()})
    return merged


def _stale() -> StaleSessionError:
    return StaleSessionError(
        "The session has been modified in storage since it was loaded. "
        "Please reload the session before appending more events."
    )


def _marker(switchboard_id: str, head_seq: int) -> str:
    return f"{switchboard_id}@{head_seq}"


def _parse_marker(marker: str | None) -> tuple[str | None, int | None]:
    if not marker or "@" not in marker:
        return None, None
    switchboard_id, _, head = marker.rpartition("@")
    return switchboard_id, int(head)


async def _collect(items: AsyncIterator[m.SessionListItem]) -> list[m.SessionListItem]:
    return [item async for item in items]


def _readable(event: Event, data: dict[str, Any]) -> m.EventIn:
    """The ADK event as an operator reads it: its text, its tool call or its tool result, with
    the whole event under `adk`."""
    parts = event.content.parts if event.content and event.content.parts else []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    calls = event.get_function_calls()
    responses = event.get_function_responses()
    tokens = 0
    if event.usage_metadata and event.usage_metadata.total_token_count:
        tokens = event.usage_metadata.total_token_count
    content: dict[str, Any]
    if calls:
        kind: m.EventKind = "tool_call"
        role = "assistant"
        content = {"name": calls[0].name, "arguments": calls[0].args or {}}
        if len(calls) > 1:
            content["calls"] = [{"name": c.name, "arguments": c.args or {}} for c in calls]
    elif responses:
        kind, role = "tool_result", "tool"
        content = {"name": responses[0].name, "result": responses[0].response}
        if len(responses) > 1:
            content["results"] = [{"name": r.name, "result": r.response} for r in responses]
    elif text:
        kind = "message"
        role = "user" if event.author == "user" else "assistant"
        content = {"text": text}
    else:
        kind, role = "note", "assistant"
        content = {}
    if text and kind != "message":
        content["text"] = text
    content.update(author=event.author, adk=data)
    readable: m.EventIn = {"kind": kind, "role": role, "content": content, "tokens": tokens}
    return readable


# --- Asking a person ---------------------------------------------------------------------------

# The function calls ADK pauses a run on (google.adk.utils._function_call_names).
CONFIRMATION = "adk_request_confirmation"
REQUEST_INPUT = "adk_request_input"


class HandoffUnanswered(SwitchboardError):
    """The person gave no answer: the handoff was cancelled, expired, closed or handed back,
    or `timeout` passed first (`handoff` as last read; its `status` says which)."""

    def __init__(self, handoff: m.Handoff) -> None:
        super().__init__(
            f"handoff {handoff.id} has no answer ({handoff.status})", code="handoff_unanswered"
        )
        self.handoff = handoff


async def ask_person(
    service: SwitchboardSessionService,
    session: Session,
    events: Event | Iterable[Event],
    *,
    timeout: float | None = None,
    poll: int = 30,
    priority: m.Priority | None = None,
) -> types.Content | None:
    """Ask a person, in the Switchboard handoff queue, for what a run paused on; the answers,
    as the user message that resumes it (`runner.run_async(..., new_message=...)`), or None
    when it paused on nothing. `events`: what the run yielded (or `session.events`).

    ADK pauses a run on long-running function calls (an event's `long_running_tool_ids`) that
    no later user function response answers:
    - a tool confirmation (`adk_request_confirmation`, from `require_confirmation=True` or
      `tool_context.request_confirmation(hint=..., payload=...)`) becomes an approval handoff
      of the original call (action = the tool's name, args = its arguments, description = the
      hint). Accept answers `{"confirmed": true}` (with the confirmation's payload), reject
      `{"confirmed": false}` (with the reason), ignore (the person dismissed it: the handoff
      ends `ignored`) `{"confirmed": false, "payload": {"ignored": true}}`, and edited
      arguments, offered when the tool asked for a payload, answer `{"confirmed": true,
      "payload": <the edited arguments>}`;
    - `adk_request_input` (`message`) becomes a question; the person's text is the result;
    - any other long-running tool becomes a question naming the call; the text is its result
      (`{"result": text}`, with `choice` when the person picked one).

    One handoff at a time (a session has one open handoff at most), each waited for by
    long-poll and sent with an idempotency key made from the call's id, so a process that
    restarts and asks again finds the same handoff. The session is resumed after the answers.
    Raises HandoffUnanswered when one gets no answer within `timeout` seconds (None: no limit).
    """
    calls = _open_interrupts([events] if isinstance(events, Event) else list(events))
    if not calls:
        return None
    client = service.client
    switchboard_id, _ = _parse_marker(session._storage_update_marker)
    if switchboard_id is None:
        found = await service._find(session.app_name, session.user_id, session.id)
        if found is None:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        switchboard_id = found[0]
    parts = []
    for call in calls:
        kind, reason, payload = _handoff_for(call)
        handoff = await client.request_handoff(
            switchboard_id,
            kind,
            reason=reason,
            payload=payload,
            priority=priority,
            idempotency_key=f"adk:{call.id}"[:200],
        )
        handoff = await client.wait_handoff(handoff.id, timeout=timeout, poll=poll)
        # Ignored is an answer too: the tool's confirmation is declined.
        answer = handoff.answer
        if answer is None or not handoff.has_answer:
            raise HandoffUnanswered(handoff)
        parts.append(
            types.Part(
                function_response=types.FunctionResponse(
                    id=call.id, name=call.name, response=_response_for(call, answer)
                )
            )
        )
    with contextlib.suppress(Conflict):  # resumed already (by the person, or a retry)
        await client.resume_session(switchboard_id, "answered in the handoff queue")
    return types.Content(role="user", parts=parts)


def _open_interrupts(events: list[Event]) -> list[types.FunctionCall]:
    """The long-running calls of `events` that no later user function response answers."""
    answered = {
        response.id
        for event in events
        if event.author == "user"
        for response in event.get_function_responses()
        if response.id
    }
    return [
        call
        for event in events
        for call in event.get_function_calls()
        if call.id and call.id in (event.long_running_tool_ids or set()) and call.id not in answered
    ]


def _handoff_for(call: types.FunctionCall) -> tuple[m.HandoffKind, str, dict[str, Any]]:
    args = call.args or {}
    if call.name == CONFIRMATION:
        original = args.get("originalFunctionCall") or {}
        confirmation = args.get("toolConfirmation") or {}
        action = str(original.get("name") or "tool")
        hint = str(confirmation.get("hint") or f"Allow {action} to run?")
        wants_payload = confirmation.get("payload") is not None
        payload: dict[str, Any] = {
            "action_request": {"action": action, "args": original.get("args") or {}},
            "config": {
                "allow_accept": True,
                "allow_edit": wants_payload,
                "allow_respond": False,
                "allow_ignore": True,
            },
            "description": hint,
            "adk": {"function_call_id": call.id, "tool_confirmation": confirmation},
        }
        return "approval", hint[:1000], payload
    if call.name == REQUEST_INPUT:
        question = str(args.get("message") or "The agent asks for input.")
        return "question", question[:1000], {"question": question, "adk": {"call": call.id}}
    question = f"The tool {call.name} waits for a person: what is its result?"
    described = {"question": question, "tool": call.name, "arguments": args}
    return "question", question[:1000], {**described, "adk": {"call": call.id}}


def _response_for(call: types.FunctionCall, answer: dict[str, Any]) -> dict[str, Any]:
    kind = answer.get("type")
    if call.name == CONFIRMATION:
        confirmation = (call.args or {}).get("toolConfirmation") or {}
        if kind == "accept":
            return {"confirmed": True, "payload": confirmation.get("payload")}
        if kind == "edit":
            return {"confirmed": True, "payload": answer.get("args")}
        if kind == "ignore":
            return {"confirmed": False, "payload": {"ignored": True}}
        return {"confirmed": False, "payload": {"reason": answer.get("reason", "")}}
    response: dict[str, Any] = {"result": answer.get("text", "")}
    if "choice" in answer:
        response["choice"] = answer["choice"]
    return response
