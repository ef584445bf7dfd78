"""The OpenAI Agents SDK's session store on Switchboard: `SwitchboardSession`.

    from agents import Runner
    from switchboard_client.openai_agents import SwitchboardSession

    session = SwitchboardSession("user-42")  # was: SQLiteSession("user-42", "chat.db")
    result = await Runner.run(agent, "Hi", session=session)

An SDK session id is a Switchboard session whose external_id is namespaced(namespace, id),
opened when items are first added (reading an unknown session opens nothing). A session id
`switchboard:<session id>` is that Switchboard session itself (a fork made in the dashboard:
the SDK continues it from the fork point); one that does not exist raises NotFound. Each item is one
event an operator reads on the session page: a `message` (role and `text`) for a message, a
`tool_call` / `tool_result` for a tool call and its output, a `note` for anything else; the
SDK's own JSON of the item rides in the event's content (`item`), and is what get_items returns.

An item whose event would be over the server's event size limit (a tool's large output: the
SDK's own stores take any size) is kept in the session's blobs, in pieces of 256 KiB sent with
the append that writes its event (or stored just before it when too large for one request).
Its event holds what an operator reads instead: the same kind and role, each field cut to its
first 2,000 characters, and `item_in_blobs` (the item's type and role, its size in bytes, the
blob names), which reads follow to return the item exactly as added. A fork reads them through
its parent (a session's blobs are its ancestors' too); they go when the session is deleted.

The log is append-only, so removals are events too, which reads fold:
- `pop_item` appends a `note` dropping the newest item (`drop`: its seq). It is conditioned on
  the head the read saw (`expected_head_seq`): when another writer got in first (409
  head_seq_mismatch) it reads again and retries, so two concurrent pops return two items.
- `clear_session` appends a `note` marking the clear: reads stop there. It needs no condition:
  whatever was appended before it is cleared, whatever after it is kept.
- The compaction session's atomic suffix rewrite (OpenAIResponsesCompactionSession) is one
  append, conditioned the same way: a `note` dropping the suffix, then the items replacing it.
Operators still see everything that was said, and what the agent no longer sees.

Every event the adapter writes has an idempotency key starting with `oai:` (`oai:item:`,
`oai:drop:`, `oai:clear:`), so reads ask only for those (key_prefix), newest first, and read
no more than the last `limit` items (plus the removals among them). A whole read is kept
(_Kept): the next get_items reads only the adapter's events since and folds them in, unless a
compaction removed events of the history meanwhile (the slice's compaction_mark changed).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import uuid
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory.session import _CompactionSnapshot
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from . import models as m
from ._adapters import (
    DEFAULT_EVENT_BYTES,
    content_bytes,
    namespaced,
    preview,
    refused_limit,
    session_reference,
)
from ._async_client import AsyncClient
from ._core import PIECE_SIZE
from ._sync_client import Client
from .errors import Conflict, NotFound, PayloadTooLarge

__all__ = ["SwitchboardSession", "approve_in_switchboard"]

KEY_PREFIX = "oai:"
ITEM_KEY = KEY_PREFIX + "item:"
DROP_KEY = KEY_PREFIX + "drop:"
CLEAR_KEY = KEY_PREFIX + "clear:"

# Items per append request, and bytes of content (as content_bytes counts them: at least the
# UTF-8 bytes sent): three events at the event limit, a body under the server's default 1 MiB.
_APPEND_BATCH = 200
_APPEND_BYTES = 768 * 1024
# Where an item kept in blobs is named, in the content of its event.
STORED = "item_in_blobs"
# The most events one read asks for (the API's limit).
_PAGE = 1000
# The most events GET /sessions?include=events gives per session (its events_limit).
_LISTED = 200
# The most characters of items' JSON a session keeps between get_items calls (_Kept).
_KEPT_CHARACTERS = 64 * 1024 * 1024
# Seconds between asks while the session's last handoff is answered but not handed back.
_HANDBACK_POLL = 0.5
# Attempts of a conditioned rewrite before giving up (each after a fresh read).
_REWRITE_ATTEMPTS = 50


class SwitchboardSession:
    """The SDK's Session protocol on a Switchboard session (see the module's docstring). It
    implements the protocol rather than subclassing SessionABC, as the SDK asks of third-party
    stores.

    `client`: a Client or an AsyncClient (None: one from SWITCHBOARD_URL and
    SWITCHBOARD_API_KEY). An AsyncClient given is used as it is, on the event loop it belongs
    to; otherwise the session makes one AsyncClient per event loop it runs on (Runner.run_sync
    starts a new loop each time), from the same URL and key. `namespace` prefixes the external
    id, so several applications (or test runs) share one project. `agent` names the agent of the
    sessions it opens; `title` and `metadata` are theirs too.
    """

    def __init__(
        self,
        session_id: str,
        client: Client | AsyncClient | None = None,
        *,
        namespace: str = "",
        agent: str = "openai-agents",
        title: str | None = None,
        metadata: m.JsonObject | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self.external_id = namespaced(namespace, session_id)
        self.agent = agent
        self.title = title
        self.metadata = metadata
        self._given = client if isinstance(client, AsyncClient) else None
        self._config = client if isinstance(client, Client) else None
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        # The Switchboard session's id, once found or opened.
        self._sid: str | None = None
        # The live items as a whole read found them, brought up to date by each get_items.
        self._kept: _Kept | None = None
        # Content bytes above which an item's event goes to blobs (DEFAULT_EVENT_BYTES).
        self._event_bytes = DEFAULT_EVENT_BYTES

    # --- The client --------------------------------------------------------------------------

    def _client(self) -> AsyncClient:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        client = self._per_loop.get(loop)
        if client is None:
            if self._config is not None:
                client = AsyncClient(
                    self._config.url,
                    self._config.api_key,
                    timeout=self._config.timeout,
                    retry=self._config.retry,
                )
            else:
                client = AsyncClient()
            self._per_loop[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the clients this session made (not one it was given)."""
        clients = list(self._per_loop.values())
        self._per_loop.clear()
        for client in clients:
            await client.aclose()

    # --- Finding and opening the Switchboard session -----------------------------------------

    async def switchboard_id(self, *, create: bool = False) -> str | None:
        """The id of the Switchboard session behind this one; None when there is none yet
        (with `create`, it is opened)."""
        if self._sid is None and (referenced := session_reference(self.session_id)):
            # `switchboard:<id>` (a dashboard fork): that session, opened by nobody here.
            self._sid = (await self._client().get_session(referenced)).id
        if self._sid is None:
            found = await self._client().find_session(self.external_id)
            if found is not None:
                self._sid = found.id
            elif create:
                opened = await self._client().open_session(
                    self.agent,
                    external_id=self.external_id,
                    title=self.title,
                    metadata=self.metadata,
                )
                self._sid = opened.id
        return self._sid

    async def _retrying_gone[T](
        self, call: Callable[[str], Awaitable[T]], *, create: bool
    ) -> T | None:
        """call(session id); once more after a fresh look-up if the session was deleted
        meanwhile (its external_id may belong to a new session now)."""
        sid = await self.switchboard_id(create=create)
        if sid is None:
            return None
        try:
            return await call(sid)
        except NotFound:
            self._sid = self._kept = None
            sid = await self.switchboard_id(create=create)
            if sid is None:
                return None
            return await call(sid)

    # --- The Session protocol ----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items as added, oldest first; with `limit` (or session_settings.limit), the
        last `limit` of them. As SQLiteSession: 0 gives none, a negative limit all."""
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None and wanted < 0:
            wanted = None
        if wanted == 0:
            return []
        if self._sid is None and session_reference(self.session_id) is None:
            # Not looked up yet (a fresh process): the session and its last events in one
            # request; the tail holds every event, so it has a few more than the items wanted.
            size = _LISTED if wanted is None else min(_LISTED, wanted + 8)
            found = await self._client().find_sessions([self.external_id], include_events=size)
            listed = found.get(self.external_id)
            if listed is None:
                return []
            self._sid = listed.id
            try:
                fresh = await _Tail.read(self, listed.id, wanted, first=listed)
                return await self._items(listed.id, fresh.items)
            except NotFound:
                self._sid = None  # deleted while paging back: looked up again below

        async def read(sid: str) -> list[TResponseInputItem]:
            kept = self._kept
            if kept is not None and kept.sid == sid:
                caught_up = await kept.caught_up(self)
                if caught_up is not None:
                    self._kept = caught_up
                    return caught_up.items(wanted)
            tail = await _Tail.read(self, sid, wanted)
            items = await self._items(sid, tail.items)
            if wanted is None:
                self._kept = _Kept.of(sid, tail, items)
            return items

        return await self._retrying_gone(read, create=False) or []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return

        async def append(sid: str) -> None:
            encoded = self._item_events(items)
            start = 0
            for end in _batch_ends([event for event, _ in encoded]):
                await self._append_items(sid, items[start:end], encoded[start:end])
                start = end

        await self._retrying_gone(append, create=True)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item and return it (None when there is none)."""

        async def pop(sid: str) -> TResponseInputItem | None:
            async def attempt() -> TResponseInputItem | None:
                tail = await _Tail.read(self, sid, 1)
                if not tail.items:
                    return None
                newest = tail.items[-1]
                (item,) = await self._items(sid, [newest])
                note = drop_event([newest.seq], "popped")
                await self._client().append(sid, [note], expected_head_seq=tail.head_seq)
                return item

            return await _conditioned(attempt)

        return await self._retrying_gone(pop, create=False)

    async def clear_session(self) -> None:
        """Clear the items: later reads see none of those added before (the log keeps them)."""

        async def clear(sid: str) -> None:
            note: m.EventIn = {
                "kind": "note",
                "content": {"text": "session cleared (openai-agents clear_session)", "clear": True},
                "idempotency_key": CLEAR_KEY + uuid.uuid4().hex,
            }
            await self._client().append(sid, [note])

        await self._retrying_gone(clear, create=False)

    async def _get_compaction_snapshot(
        self,
        limit: int,
        *,
        prune_prefix: Callable[[TResponseInputItem], bool] | None = None,
    ) -> _CompactionSnapshot | None:
        """The last `limit` items and an atomic replacement of any suffix of them (the SDK's
        hook for OpenAIResponsesCompactionSession, as SQLiteSession has): one append dropping
        the suffix (and the expired prefix items prune_prefix names) and adding `output`,
        conditioned on the head read here. False, writing nothing, when the log moved on."""
        sid = await self.switchboard_id()
        if sid is None:
            return _CompactionSnapshot([], True, _nothing_to_replace)
        tail = await _Tail.read(self, sid, limit)
        items = await self._items(sid, tail.items)

        async def replace_suffix(start: int, output: list[TResponseInputItem]) -> bool:
            replaced = tail.items[start:]
            if not replaced:
                return False
            dropped = [event.seq for event in replaced]
            if prune_prefix is not None:
                dropped = await self._expired_prefix(sid, replaced[0].seq, prune_prefix) + dropped
            note = drop_event(dropped, "compacted")
            try:
                await self._append_items(
                    sid,
                    output,
                    self._item_events(output),
                    first=note,
                    expected_head_seq=tail.head_seq,
                )
            except Conflict as error:
                if error.code == "head_seq_mismatch":
                    return False
                raise
            return True

        return _CompactionSnapshot(items, tail.complete, replace_suffix)

    async def _expired_prefix(
        self, sid: str, before_seq: int, expired: Callable[[TResponseInputItem], bool]
    ) -> list[int]:
        """Seqs of the live items before `before_seq`, oldest first, while `expired` holds."""
        everything = await _Tail.read(self, sid, None, before_seq=before_seq)
        seqs: list[int] = []
        for event in everything.items:
            (item,) = await self._items(sid, [event])
            if not expired(item):
                break
            seqs.append(event.seq)
        return seqs

    # --- Items over the event size limit -----------------------------------------------------

    def _item_events(
        self, items: Sequence[TResponseInputItem], keys: Sequence[str] = ()
    ) -> list[tuple[m.EventIn, list[bytes]]]:
        """item_events(items) (with these idempotency keys, when given), each with the blobs
        it names: an item whose event is over the event limit goes in pieces, its event a
        preview naming them."""
        encoded: list[tuple[m.EventIn, list[bytes]]] = []
        for position, (item, event) in enumerate(zip(items, item_events(items), strict=True)):
            if keys:
                event["idempotency_key"] = keys[position]
            if content_bytes(event["content"]) > self._event_bytes:
                encoded.append(_in_blobs(_as_dict(item), event))
            else:
                encoded.append((event, []))
        return encoded

    async def _append_items(
        self,
        sid: str,
        items: Sequence[TResponseInputItem],
        encoded: list[tuple[m.EventIn, list[bytes]]],
        *,
        first: m.EventIn | None = None,
        expected_head_seq: int | None = None,
    ) -> None:
        """One append of `first` and the items' events, with the blobs they name (the client
        stores those first when they do not fit in the request). When the server refuses an
        event as over its limit (set lower than DEFAULT_EVENT_BYTES), the session takes that
        limit and appends again, what is over it now in blobs (nothing of a refused append
        was written)."""
        while True:
            events = [event for event, _ in encoded]
            blobs = [piece for _, pieces in encoded for piece in pieces]
            batch = [first, *events] if first is not None else events
            try:
                await self._client().append(
                    sid, batch, expected_head_seq=expected_head_seq, blobs=blobs
                )
                return
            except PayloadTooLarge as error:
                limit = refused_limit(error)
                if limit is None or limit >= self._event_bytes:
                    raise
                self._event_bytes = limit
                encoded = self._item_events(
                    items, [str(event.get("idempotency_key")) for event in events]
                )

    async def _items(self, sid: str, events: Sequence[m.Event]) -> list[TResponseInputItem]:
        """The items `events` carry, oldest first; those kept in blobs loaded in one look-up
        (through the session's ancestors too: a fork reads its parent's)."""
        names = [
            name
            for event in events
            if "item" not in event.content
            for name in _stored(event).get("blobs", ())
        ]
        loaded = dict(zip(names, await self._client().load_blobs(sid, names), strict=True))
        items: list[TResponseInputItem] = []
        for event in events:
            if "item" in event.content:
                items.append(cast(TResponseInputItem, event.content["item"]))
            else:
                data = b"".join(loaded[name] for name in _stored(event)["blobs"])
                items.append(cast(TResponseInputItem, json.loads(data)))
        return items


def _in_blobs(item: dict[str, Any], event: m.EventIn) -> tuple[m.EventIn, list[bytes]]:
    """The item's JSON in pieces, and `event` showing a preview of it that names them."""
    data = json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()
    pieces = [data[i : i + PIECE_SIZE] for i in range(0, len(data), PIECE_SIZE)]
    content: m.JsonObject = {
        name: preview(value, len(data), "item")
        for name, value in event.get("content", {}).items()
        if name != "item"
    }
    stored: m.JsonObject = {
        "bytes": len(data),
        "blobs": [hashlib.sha256(piece).hexdigest() for piece in pieces],
    }
    for field in ("type", "role"):
        if item.get(field) is not None:
            stored[field] = item[field]
    content[STORED] = stored
    return {**event, "content": content}, pieces


def _batch_ends(events: Sequence[m.EventIn]) -> list[int]:
    """Where each append of `events` ends: at most _APPEND_BATCH events and _APPEND_BYTES of
    content each (one larger event alone)."""
    ends: list[int] = []
    count = size = 0
    for position, event in enumerate(events):
        grown = content_bytes(event.get("content", {}))
        if count and (count == _APPEND_BATCH or size + grown > _APPEND_BYTES):
            ends.append(position)
            count = size = 0
        count += 1
        size += grown
    return [*ends, len(events)]


def _stored(event: m.Event) -> dict[str, Any]:
    stored = event.content.get(STORED)
    if not isinstance(stored, dict):
        raise ValueError(f"the event at seq {event.seq} holds no item")
    return stored


async def _nothing_to_replace(start: int, output: list[TResponseInputItem]) -> bool:
    return False


async def _conditioned[T](attempt: Callable[[], Awaitable[T]]) -> T:
    """attempt() again (after a short random pause) while another writer moves the head
    between its read and its conditioned append."""
    for tries in range(_REWRITE_ATTEMPTS):
        try:
            return await attempt()
        except Conflict as error:
            if error.code != "head_seq_mismatch":
                raise
            await asyncio.sleep(random.uniform(0, min(0.2, 0.005 * 2**tries)))
    raise RuntimeError(f"the session kept changing: {_REWRITE_ATTEMPTS} conditioned writes lost")


class _Tail:
    """The live items at the end of the log, read newest first and folded: a `clear` note
    ends the read, a `drop` note hides the items it names."""

    def __init__(
        self,
        items: list[m.Event],
        head_seq: int,
        complete: bool,
        *,
        folded_through: int = 0,
        compaction_mark: int | None = None,
    ) -> None:
        self.items = items  # oldest first
        self.head_seq = head_seq
        # True when the items are all there are (no live item older than the first).
        self.complete = complete
        # Every event of the adapter's at or below this seq is in the fold (the head the read
        # began at, or a newer event it met: appends commit in seq order).
        self.folded_through = folded_through
        # The first page of the events endpoint's compaction_mark (None: none was read).
        self.compaction_mark = compaction_mark

    @classmethod
    async def read(
        cls,
        session: SwitchboardSession,
        sid: str,
        limit: int | None,
        *,
        before_seq: int | None = None,
        first: m.SessionListItem | None = None,
    ) -> _Tail:
        """`first`: the session as listed with its last events (include_events), read before
        asking the events endpoint for more."""
        client = session._client()
        found: list[m.Event] = []
        dropped: set[int] = set()
        head_seq: int | None = None
        mark: int | None = None
        # A few events more than the items wanted: a removal or two costs no second read.
        page = _PAGE if limit is None else min(_PAGE, limit + 8)
        newest = 0  # the newest event's seq the read met

        def tail(complete: bool) -> _Tail:
            assert head_seq is not None
            return cls(
                found[::-1],
                head_seq,
                complete,
                folded_through=max(head_seq, newest),
                compaction_mark=mark,
            )

        while True:
            chunk: m.EventSlice | _Listed
            if first is not None:
                chunk = _Listed(first.events[::-1] if first.events else [], first)
                first = None
            else:
                chunk = await client.events(
                    sid, key_prefix=KEY_PREFIX, order="desc", limit=page, before_seq=before_seq
                )
                if head_seq is None:
                    mark = chunk.compaction_mark
            if head_seq is None:
                head_seq = chunk.head_seq
                newest = chunk.events[0].seq if chunk.events else 0
            for event in chunk.events:
                key = event.idempotency_key or ""
                if key.startswith(CLEAR_KEY):
                    return tail(True)
                if key.startswith(DROP_KEY):
                    dropped.update(event.content.get("drop", ()))
                elif key.startswith(ITEM_KEY) and event.seq not in dropped:
                    if limit is not None and len(found) == limit:
                        return tail(False)
                    found.append(event)
            if not chunk.has_more or not chunk.events:
                return tail(True)
            before_seq = chunk.events[-1].seq
            page = _PAGE


class _Listed:
    """A listed session's last events as a page of the events endpoint: newest first (every
    event, not only the adapter's: the fold skips the others)."""

    def __init__(self, events: list[m.Event], session: m.SessionListItem) -> None:
        self.events = events
        self.head_seq = session.head_seq
        self.has_more = bool(session.events_has_more)


class _Kept:
    """The live items of a session as of a seq, kept between get_items calls: the next call
    reads only the adapter's events after that seq and folds them in (new items, drops,
    clears), not the whole log again (5,000 items: five pages of 1,000 events, every turn of
    the Runner). Each item is kept as its JSON, so each call returns objects of its own, as
    the SDK's own stores do. A compaction of the session's history since (compaction_mark
    changed) may have removed kept items: the call then reads the whole log again. Immutable:
    calls running at once each make their own."""

    def __init__(
        self, sid: str, through: int, mark: int, entries: tuple[tuple[int, str], ...]
    ) -> None:
        self.sid = sid
        self.through = through  # every event of the adapter's at or below this seq is folded
        self.mark = mark
        self.entries = entries  # (seq, the item's JSON), oldest first

    @classmethod
    def of(cls, sid: str, tail: _Tail, items: list[TResponseInputItem]) -> _Kept | None:
        """What a whole read found (None: nothing to keep by, or too much to keep)."""
        if tail.compaction_mark is None or not tail.complete:
            return None
        entries = tuple(
            (event.seq, _item_json(item)) for event, item in zip(tail.items, items, strict=True)
        )
        if sum(len(text) for _, text in entries) > _KEPT_CHARACTERS:
            return None
        return cls(sid, tail.folded_through, tail.compaction_mark, entries)

    async def caught_up(self, session: SwitchboardSession) -> _Kept | None:
        """These items with the adapter's events since folded in; None when the history was
        compacted since (read it whole)."""
        client = session._client()
        entries = list(self.entries)
        through = self.through
        while True:
            page = await client.events(
                self.sid, key_prefix=KEY_PREFIX, order="asc", after_seq=through, limit=_PAGE
            )
            if page.compaction_mark != self.mark:
                return None
            added = [e for e in page.events if (e.idempotency_key or "").startswith(ITEM_KEY)]
            loaded = await session._items(self.sid, added)
            new = dict(zip((e.seq for e in added), loaded, strict=True))
            for event in page.events:
                key = event.idempotency_key or ""
                if key.startswith(CLEAR_KEY):
                    entries.clear()
                elif key.startswith(DROP_KEY):
                    dropped = set(event.content.get("drop", ()))
                    entries = [entry for entry in entries if entry[0] not in dropped]
                elif event.seq in new:
                    entries.append((event.seq, _item_json(new[event.seq])))
            if page.events:
                through = max(through, page.events[-1].seq)
            if not page.has_more or not page.events:
                # Read to the end: every event at or below the head the page saw is in.
                through = max(through, page.head_seq)
                return _Kept(self.sid, through, self.mark, tuple(entries))

    def items(self, limit: int | None) -> list[TResponseInputItem]:
        chosen = self.entries if limit is None else self.entries[-limit:]  # limit > 0
        listed: list[TResponseInputItem] = json.loads(
            "[" + ",".join(text for _, text in chosen) + "]"
        )
        return listed


def _item_json(item: TResponseInputItem) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


def drop_event(seqs: Sequence[int], why: str) -> m.EventIn:
    listed = ", ".join(map(str, seqs))
    return {
        "kind": "note",
        "content": {"text": f"{why}: the item at seq {listed}", "drop": list(seqs)},
        "idempotency_key": DROP_KEY + uuid.uuid4().hex,
    }


def item_events(items: Sequence[TResponseInputItem]) -> list[m.EventIn]:
    """One event per item, readable on the session page, carrying the item itself."""
    names = {
        str(item.get("call_id")): str(item.get("name"))
        for item in map(_as_dict, items)
        if item.get("call_id") and item.get("name")
    }
    return [_item_event(_as_dict(item), names) for item in items]


def _as_dict(item: TResponseInputItem) -> dict[str, Any]:
    return cast(dict[str, Any], item)


def _item_event(item: dict[str, Any], names: dict[str, str]) -> m.EventIn:
    kind_of = str(item.get("type") or "")
    key = ITEM_KEY + uuid.uuid4().hex
    if kind_of == "message" or (not kind_of and "role" in item):
        return {
            "kind": "message",
            # The API keeps roles of up to 16 characters; the item keeps the SDK's own.
            "role": str(item.get("role") or "")[:16],
            "content": {"text": _message_text(item.get("content")), "item": item},
            "idempotency_key": key,
        }
    if kind_of.endswith("_call_output") or kind_of.endswith("_output"):
        call_id = item.get("call_id")
        result: m.JsonObject = {"item": item, "result": item.get("output")}
        if call_id:
            result["call_id"] = call_id
            if str(call_id) in names:
                result["name"] = names[str(call_id)]
        return {"kind": "tool_result", "content": result, "idempotency_key": key}
    if kind_of.endswith("_call"):
        call: m.JsonObject = {
            "name": item.get("name") or kind_of,
            "arguments": item.get("arguments", item.get("action")),
            "item": item,
        }
        return {"kind": "tool_call", "content": call, "idempotency_key": key}
    return {
        "kind": "note",
        "content": {"text": kind_of or "item", "item": item},
        "idempotency_key": key,
    }


def _message_text(content: Any) -> str:
    """What a message says, as text: its string, or its parts' texts one per line."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content)
    texts: list[str] = []
    for part in content:
        if isinstance(part, dict):
            text = part.get("text", part.get("refusal"))
            texts.append(str(text) if text is not None else f"[{part.get('type', 'part')}]")
        else:
            texts.append(str(part))
    return "\n".join(texts)


# --- Tool approvals as Switchboard approval handoffs ---------------------------------------


async def approve_in_switchboard(
    result: Any,
    session: SwitchboardSession,
    *,
    reason: str = "A tool call needs approval",
    priority: m.Priority | None = None,
    timeout: float | None = None,
) -> Any:
    """The run's pending tool approvals (`result.interruptions`, from a tool with
    `needs_approval`), asked of a person as Switchboard approval handoffs on the session, one
    after the other (a session has one open handoff at a time); returns the RunState to resume
    with (`Runner.run(agent, state, session=session)`).

    Each handoff's payload is `{"action_request": {"action": tool, "args": arguments},
    "config": {"allow_accept", "allow_edit", "allow_respond", "allow_ignore": true},
    "description", "call_id"}`.
    The answer goes back into the run: accept approves the call; reject (or a response) rejects
    it, the person's reason (or text) being what the model reads; ignore (the person dismissed
    the request: the handoff ends `ignored`) rejects it too, telling the model to go on without
    it; edit declines this call and
    tells the model the arguments the person wants (the SDK runs no call whose arguments changed
    after the model made it), so its next call carries them. Raises TimeoutError when `timeout`
    seconds pass without an answer (the handoff stays open), RuntimeError when it ends
    unanswered (cancelled, expired)."""
    state = result.to_state()
    client = session._client()
    sid = await session.switchboard_id(create=True)
    assert sid is not None
    for item in result.interruptions:
        raw = item.raw_item
        arguments = _raw_field(raw, "arguments")
        try:
            args = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
        except json.JSONDecodeError:
            args = {"arguments": arguments}
        payload: m.JsonObject = {
            "action_request": {"action": item.tool_name or "tool", "args": args},
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                # Agent Inbox's "ignore" and Switchboard's reject: the call is not made.
                "allow_ignore": True,
            },
            "description": f"{item.agent.name} wants to call {item.tool_name}",
            "call_id": _raw_field(raw, "call_id"),
        }
        handoff = await _request_when_free(
            client, sid, reason=reason, payload=payload, priority=priority
        )
        answered = await client.wait_handoff(handoff.id, timeout=timeout)
        if not answered.resolved:
            raise TimeoutError(f"no answer to handoff {handoff.id} in {timeout} s")
        answer = answered.answer or {}
        kind = answer.get("type")
        if kind == "accept":
            state.approve(item)
        elif kind == "edit":
            # The SDK refuses to run a call whose arguments changed after the model made it
            # (its fingerprint check: "Model reused a tool call ID for a different
            # invocation"), so the edit goes back as the model's next input: this call is
            # declined, naming the arguments the person wants; the model's new call with them
            # asks for approval in its turn.
            edited = json.dumps(answer.get("args", {}), sort_keys=True)
            state.reject(
                item,
                rejection_message=(
                    f"A person edited this call before approving it. Call {item.tool_name} "
                    f"again with exactly these arguments: {edited}"
                ),
            )
        elif kind in ("reject", "respond"):
            text = answer.get("text") or answer.get("reason") or "A person rejected the call."
            state.reject(item, rejection_message=str(text))
        elif kind == "ignore":
            state.reject(
                item,
                rejection_message=(
                    f"A person dismissed this request: {item.tool_name} was not called. Go on "
                    "without it."
                ),
            )
        else:
            raise RuntimeError(f"handoff {handoff.id} ended {answered.status} without an answer")
    return state


def _raw_field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


async def _request_when_free(client: AsyncClient, sid: str, **asked: Any) -> m.Handoff:
    """An approval handoff on the session, asked once the last one is handed back: a person
    who answered the run's previous approval (an edit, whose new call asks again at once) may
    not have handed the session back yet, and a session has one open handoff at a time."""
    while True:
        try:
            handoff: m.Handoff = await client.request_handoff(sid, "approval", **asked)
            return handoff
        except Conflict as error:
            if error.code != "handoff_already_open":
                raise
            await asyncio.sleep(_HANDBACK_POLL)
