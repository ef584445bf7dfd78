"""LangGraph checkpoints in Switchboard: `SwitchboardSaver`, a BaseCheckpointSaver (sync and
async) whose threads are Switchboard sessions.

    from switchboard_client.langgraph import SwitchboardSaver

    graph = builder.compile(checkpointer=SwitchboardSaver(namespace="support-bot/"))

A thread is the session whose external_id is `namespace + thread_id`, opened by the first
checkpoint written to it; reading an unknown thread opens nothing. A thread id
`switchboard:<session id>` is that session itself: a fork made in the dashboard at seq N,
whose newest checkpoint is the last one at or before N. In its log:

- a checkpoint is a durable `note` event (`{"langgraph": "checkpoint", "ns", "checkpoint_id",
  "parent_checkpoint_id", "metadata", "checkpoint", "values"}`), keyed
  `lg/<ns hash>/<checkpoint id>/c/<digest>`, so a fresh process finds one by id (events?key_prefix=)
  and the newest of a namespace by reading the log backwards;
- each pending write is a durable `note` keyed by (checkpoint, task, index): written once, so
  the first write of a (task, index) wins as LangGraph expects (ERROR, INTERRUPT, RESUME and
  SCHEDULED writes, whose last one wins, are keyed by their content too);
- channel values live in the session's blobs (content-addressed: a value stored again costs
  nothing), named by the checkpoint's `values`. A value is sent only when its channel's version
  changed. A list (the messages channel) is stored one blob per element, with the list of their
  names in 4 KiB pieces: a list re-sent whole at every step costs its new elements and a piece
  or two of names, never the whole list again. Values of 256 bytes or less sit in the event;
- `prune` and `delete_for_runs` append a `deleted` note per checkpoint they remove (the log is
  append-only: the content stays until the session is deleted); `delete_thread` deletes the
  session (its storage is freed), or hides its checkpoints when copies of it (forks) still read
  through it; `copy_thread` is a fork.

Imports the client and LangGraph only (`pip install switchboard-client[langgraph]`).
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import hashlib
import json
import random
import re
import threading
import time
from base64 import b64decode, b64encode
from collections import OrderedDict
from collections.abc import (
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from . import models as m
from ._adapters import async_client, namespaced, session_reference, sync_client
from ._async_client import AsyncClient
from ._sync_client import Client
from .errors import Conflict, NotFound, SwitchboardError

__all__ = [
    "HandoffNotAnswered",
    "SwitchboardSaver",
    "arun_with_handoffs",
    "handoff_for",
    "resume_value",
    "run_with_handoffs",
]

T = TypeVar("T")

# A value of at most this many bytes (serialised) is kept in the event that names it.
INLINE_BYTES = 256
# A pending write's value of at most this many bytes is kept in its event (written once, never
# named again by a later event, so never re-sent).
INLINE_WRITE_BYTES = 16 * 1024
# A list's element names are stored in pieces of this many bytes (128 names of 32 bytes);
# when a level has more than MAX_PIECES pieces, their names are stored the same way again.
NAMES_PIECE = 4096
MAX_PIECES = 16
# A blob holds at most this many bytes (half the server's default blob limit).
BLOB_PIECE = 256 * 1024
# Events per append when writing many (deletion notes): well within the body limit.
APPEND_BATCH = 500
# Seconds between asks while the session's last handoff is answered but not yet handed back.
HANDBACK_POLL = 0.5
# Bytes of blob contents kept in memory (content-addressed: never stale).
CACHE_BYTES = 64 * 1024 * 1024
# List elements kept per channel (what _put skips, what get_tuple copies), in all channels of
# all threads a process has used: ten 5,000-message threads. Past it, the channels least
# recently used are forgotten (their next put encodes, their next read decodes, again).
ELEMENTS_KEPT = 50_000
# Channels whose last ref is kept (a dict of a few keys each).
REFS_KEPT = 50_000

_SAFE_PART = re.compile(r"[A-Za-z0-9._:-]{1,64}")


# --- Plans: the saver's logic written once, run by a sync and an async driver ------------------


@dataclass(frozen=True, slots=True)
class _Call:
    """A client method to call; the plan receives its result (or its error)."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Item:
    """A result a listing plan hands to its caller."""

    value: CheckpointTuple


Plan = Generator[_Call, Any, T]
ListPlan = Generator[_Call | _Item, Any, None]


def _call(method: str, *args: Any, **kwargs: Any) -> _Call:
    return _Call(method, args, kwargs)


@dataclass(frozen=True, slots=True)
class _Done:
    """A plan that has returned `value`."""

    value: Any


def _advance(
    plan: Generator[Any, Any, Any], result: Any = None, error: BaseException | None = None
) -> Any:
    """The plan's next request (or item) after the outcome of its last one, or _Done."""
    try:
        return plan.throw(error) if error is not None else plan.send(result)
    except StopIteration as stop:
        return _Done(stop.value)


def _outcome(perform: Callable[[_Call], Any], call: _Call) -> tuple[Any, BaseException | None]:
    try:
        return perform(call), None
    except SwitchboardError as error:
        return None, error


async def _aoutcome(
    perform: Callable[[_Call], Any], call: _Call
) -> tuple[Any, BaseException | None]:
    try:
        return await perform(call), None
    except SwitchboardError as error:
        return None, error


def _drive(plan: Generator[Any, Any, Any], perform: Callable[[_Call], Any]) -> Any:
    """Run `plan`, each call it makes performed by `perform`: its return value."""
    step = _advance(plan)
    while not isinstance(step, _Done):
        step = _advance(plan, *_outcome(perform, step))
    return step.value


async def _adrive(plan: Generator[Any, Any, Any], perform: Callable[[_Call], Any]) -> Any:
    """_drive with `perform` returning awaitables."""
    step = _advance(plan)
    while not isinstance(step, _Done):
        step = _advance(plan, *(await _aoutcome(perform, step)))
    return step.value


# --- Keys and encodings ----------------------------------------------------------------------


def _digest(data: bytes | str, size: int = 16) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:size]


def _part(text: str) -> str:
    """`text` as one part of an idempotency key: itself when short and plain, else a hash."""
    return text if _SAFE_PART.fullmatch(text) else "h" + _digest(text, 32)


def _ns_prefix(ns: str) -> str:
    return f"lg/{_digest(ns)}/"


def _checkpoint_prefix(ns: str, checkpoint_id: str) -> str:
    return f"{_ns_prefix(ns)}{_part(checkpoint_id)}/"


def _run_key(run_id: str) -> str:
    return f"lgrun/{_part(run_id)}"


def _json_dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _as_json(value: Any) -> Any | None:
    """`value` when it is stored as JSON and read back equal (no tuples, bytes, NULs, huge
    numbers), else None."""
    try:
        dumped = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None
    if "\\u0000" in dumped or len(dumped) > 64 * 1024:
        return None
    loaded = json.loads(dumped)
    return value if loaded == value and _bounded(loaded) else None


def _bounded(value: Any, depth: int = 0) -> bool:
    if depth > 32:
        return False
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return True
    if isinstance(value, int):
        return abs(value) < 10**30
    if isinstance(value, list):
        return all(_bounded(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(_bounded(item, depth + 1) for item in value.values())
    return False


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _split_names(raw: bytes) -> list[str]:
    return [raw[i : i + 32].hex() for i in range(0, len(raw), 32)]


type _Slot = tuple[str, str, str]  # (session, ns, channel)


def _one(_: object) -> int:
    return 1


def _of_session(session_id: str) -> Callable[[_Slot], bool]:
    return lambda slot: slot[0] == session_id


class _Recent[K, V]:
    """Values by key, the least recently used dropped once their sizes add up past `limit`
    (the newest is always kept). A process serving many threads would otherwise keep what it
    learnt of each for as long as it lives. Safe to share between threads (as a saver is,
    like LangGraph's own, which lock too): each call holds the lock."""

    def __init__(self, limit: int, size_of: Callable[[V], int]) -> None:
        self.limit = limit
        self.size = 0
        self._size_of = size_of
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def get_many(self, keys: Iterable[K]) -> dict[K, V]:
        """The values of those of `keys` held (one lock for all: a read meets thousands)."""
        found: dict[K, V] = {}
        with self._lock:
            data = self._data
            for key in keys:
                value = data.get(key)
                if value is not None:
                    data.move_to_end(key)
                    found[key] = value
        return found

    def __setitem__(self, key: K, value: V) -> None:
        self.update({key: value})

    def update(self, items: Mapping[K, V]) -> None:
        with self._lock:
            for key, value in items.items():
                before = self._data.pop(key, None)
                if before is not None:
                    self.size -= self._size_of(before)
                self._data[key] = value
                self.size += self._size_of(value)
            while self.size > self.limit and len(self._data) > 1:
                _, dropped = self._data.popitem(last=False)
                self.size -= self._size_of(dropped)

    def forget(self, matching: Callable[[K], bool]) -> None:
        with self._lock:
            for key in [key for key in self._data if matching(key)]:
                self.size -= self._size_of(self._data.pop(key))


@dataclass
class _Stored:
    """One live checkpoint as its event says, with the write events made at it."""

    seq: int
    content: dict[str, Any]
    writes: list[dict[str, Any]]

    @property
    def ns(self) -> str:
        ns: str = self.content["ns"]
        return ns

    @property
    def checkpoint_id(self) -> str:
        checkpoint_id: str = self.content["checkpoint_id"]
        return checkpoint_id


class _Reader:
    """Turns a thread's events, read newest first, into its live checkpoints (newest first)
    and their writes. A deletion note is always later than its checkpoint; a write may be
    earlier (LangGraph saves a step's writes while its checkpoint is still being saved)."""

    def __init__(self) -> None:
        self._decided: set[tuple[str, str]] = set()
        self._writes: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def feed(self, event: m.Event) -> _Stored | None:
        content = event.content
        what = content.get("langgraph")
        at = (content.get("ns", ""), content.get("checkpoint_id", ""))
        if what == "write":
            self._writes.setdefault(at, []).append(content)
        elif what == "deleted":
            self._decided.add(at)
        elif what == "checkpoint" and at not in self._decided:
            self._decided.add(at)
            return _Stored(event.seq, content, [])
        return None

    def attach(self, stored: _Stored) -> _Stored:
        """`stored` with the writes read so far made at it, oldest first."""
        stored.writes = list(reversed(self._writes.get((stored.ns, stored.checkpoint_id), [])))
        return stored


@dataclass
class _Scan:
    """A read of a thread's events under `prefix`, newest first, a page at a time."""

    session_id: str
    prefix: str
    limit: int
    before: int | None = None
    done: bool = False
    reader: _Reader = field(default_factory=_Reader)


# --- The saver -------------------------------------------------------------------------------


class SwitchboardSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpoints in Switchboard sessions, sync and async (module docstring).

    `client`: a Client or AsyncClient (the other flavour is made from its URL and key), or
    None for one from SWITCHBOARD_URL and SWITCHBOARD_API_KEY. `namespace` prefixes every
    thread's external_id, so several applications (or test runs) share a project. `agent`
    names the sessions' agent.
    """

    def __init__(
        self,
        client: Client | AsyncClient | None = None,
        *,
        namespace: str = "",
        agent: str = "langgraph",
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.namespace = namespace
        self.agent = agent
        self._given = client
        self._sync: Client | None = client if isinstance(client, Client) else None
        self._async: AsyncClient | None = client if isinstance(client, AsyncClient) else None
        self._sessions: dict[str, str] = {}  # thread_id -> session id
        # The ref last written or read per (session, ns, channel): an unchanged channel's
        # next checkpoint names it again instead of sending its value (one forgotten is
        # sent again, or found at the parent checkpoint).
        self._refs: _Recent[_Slot, dict[str, Any]] = _Recent(REFS_KEPT, _one)
        self._runs: set[tuple[str, str]] = set()  # (session, run_id) markers written
        self._blobs: _Recent[str, bytes] = _Recent(CACHE_BYTES, len)
        # Per (session, ns, channel): the elements of the list last stored, by id (holding
        # them, so no id is reused meanwhile), with their blob and its name.
        self._elements: _Recent[_Slot, dict[int, tuple[Any, bytes, str]]] = _Recent(
            ELEMENTS_KEPT, len
        )
        # Per (session, ns, channel): the elements of the list a get_tuple last read, decoded,
        # by their blob's name; never handed out (the caller gets copies), so the next read of
        # that channel copies them instead of decoding them again.
        self._pristine: _Recent[_Slot, dict[str, Any]] = _Recent(ELEMENTS_KEPT, len)

    @property
    def client(self) -> Client:
        if self._sync is None:
            self._sync = sync_client(self._given)
        return self._sync

    @property
    def aclient(self) -> AsyncClient:
        if self._async is None:
            self._async = async_client(self._given)
        return self._async

    def external_id(self, thread_id: str) -> str:
        """The external_id of the session holding `thread_id`."""
        return namespaced(self.namespace, thread_id)

    def get_next_version(self, current: str | None, channel: None) -> str:
        # As InMemorySaver and PostgresSaver: a counter, then a random fraction.
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # --- Drivers ---------------------------------------------------------------------------

    def _perform(self, call: _Call) -> Any:
        return getattr(self.client, call.method)(*call.args, **call.kwargs)

    def _aperform(self, call: _Call) -> Any:
        return getattr(self.aclient, call.method)(*call.args, **call.kwargs)

    def _retrying(self, make: Callable[[], Plan[T]]) -> Plan[T]:
        """`make()`'s plan, made and run again once when a session this process knew is gone
        (deleted by another process): the thread is then looked up again."""
        try:
            return (yield from make())
        except NotFound:
            if not self._sessions:
                raise
            self._sessions.clear()
        return (yield from make())

    def _run(self, make: Callable[[], Plan[T]]) -> T:
        value: T = _drive(self._retrying(make), self._perform)
        return value

    async def _arun(self, make: Callable[[], Plan[T]]) -> T:
        value: T = await _adrive(self._retrying(make), self._aperform)
        return value

    def _iterate(self, plan: ListPlan) -> Iterator[CheckpointTuple]:
        step = _advance(plan)
        while not isinstance(step, _Done):
            if isinstance(step, _Item):
                yield step.value
                step = _advance(plan)
            else:
                step = _advance(plan, *_outcome(self._perform, step))

    async def _aiterate(self, plan: ListPlan) -> AsyncIterator[CheckpointTuple]:
        step = _advance(plan)
        while not isinstance(step, _Done):
            if isinstance(step, _Item):
                yield step.value
                step = _advance(plan)
            else:
                step = _advance(plan, *(await _aoutcome(self._aperform, step)))

    # --- BaseCheckpointSaver: sync ---------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run(lambda: self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self._iterate(self._list(config, filter=filter, before=before, limit=limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run(lambda: self._put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._run(lambda: self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._run(lambda: self._delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run(lambda: self._delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(lambda: self._copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._run(lambda: self._prune(thread_ids, strategy))

    # --- BaseCheckpointSaver: async --------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._arun(lambda: self._get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        plan = self._list(config, filter=filter, before=before, limit=limit)
        async for item in self._aiterate(plan):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._arun(lambda: self._put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._arun(lambda: self._put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(lambda: self._delete_thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(lambda: self._delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(lambda: self._copy_thread(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._arun(lambda: self._prune(thread_ids, strategy))

    # --- Threads ---------------------------------------------------------------------------

    def _session(self, thread_id: str, *, create: bool) -> Plan[str | None]:
        """The id of the thread's session; with `create`, opened when there is none."""
        known = self._sessions.get(thread_id)
        if known is not None:
            return known
        referenced = session_reference(thread_id)
        if referenced is not None:
            # `switchboard:<id>` (a fork made in the dashboard): that session, never opened here.
            try:
                named: m.SessionWithTasks = yield _call("get_session", referenced)
            except NotFound:
                if create:
                    raise
                return None
            self._sessions[thread_id] = named.id
            return named.id
        external_id = self.external_id(thread_id)
        found: m.SessionListItem | None = yield _call("find_session", external_id)
        if found is None:
            if not create:
                return None
            opened: m.Session = yield _call(
                "open_session",
                self.agent,
                external_id=external_id,
                title=f"LangGraph thread {thread_id}",
                metadata={"framework": "langgraph", "langgraph_namespace": self.namespace},
            )
            session_id = opened.id
        else:
            session_id = found.id
        self._sessions[thread_id] = session_id
        return session_id

    def _threads(self) -> Plan[builtins.list[tuple[str, str]]]:
        """(thread_id, session id) of every thread in the namespace."""
        threads: builtins.list[tuple[str, str]] = []
        cursor = None
        while True:
            page: m.SessionPage = yield _call(
                "list_sessions",
                metadata={"framework": "langgraph", "langgraph_namespace": self.namespace},
                cursor=cursor,
                limit=200,
            )
            for session in page.sessions:
                # A fork made in the dashboard has the metadata and no external_id: it is no
                # thread of the namespace (its thread id is `switchboard:<id>`).
                external_id = session.external_id
                if external_id is not None and external_id.startswith(self.namespace):
                    threads.append((external_id[len(self.namespace) :], session.id))
            if page.next_cursor is None:
                return threads
            cursor = page.next_cursor

    def _forget(self, thread_id: str) -> None:
        session_id = self._sessions.pop(thread_id, None)
        if session_id is not None:
            for memory in (self._refs, self._elements, self._pristine):
                memory.forget(_of_session(session_id))

    # --- Reading ---------------------------------------------------------------------------

    def _page(self, scan: _Scan) -> Plan[builtins.list[_Stored] | None]:
        """The next live checkpoints of `scan` (newest first), or None when it is done."""
        if scan.done:
            return None
        found: m.EventSlice = yield _call(
            "events",
            scan.session_id,
            key_prefix=scan.prefix,
            order="desc",
            limit=scan.limit,
            before_seq=scan.before,
        )
        live = [s for s in map(scan.reader.feed, found.events) if s is not None]
        if not found.has_more or not found.events:
            scan.done = True
        else:
            scan.before, scan.limit = found.events[-1].seq, 1000
        return live

    def _read_all(self, session_id: str, prefix: str) -> Plan[builtins.list[_Stored]]:
        """Every live checkpoint under `prefix`, newest first, with its writes."""
        scan = _Scan(session_id, prefix, 1000)
        live: builtins.list[_Stored] = []
        while (page := (yield from self._page(scan))) is not None:
            live.extend(page)
        return [scan.reader.attach(stored) for stored in live]

    def _get_tuple(self, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        configurable = config["configurable"]
        thread_id: str = configurable["thread_id"]
        ns: str = configurable.get("checkpoint_ns", "")
        session_id = yield from self._session(thread_id, create=False)
        if session_id is None:
            return None
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            # The newest live checkpoint of the namespace: the log read backwards.
            scan = _Scan(session_id, _ns_prefix(ns), 50)
            while (live := (yield from self._page(scan))) is not None and not live:
                pass
            if not live:
                return None
            if scan.done:
                # The namespace's events were all read: its writes are among them.
                (loaded,) = yield from self._tuples(
                    session_id, thread_id, [scan.reader.attach(live[0])]
                )
                return loaded
            checkpoint_id = live[0].checkpoint_id
        # The checkpoint with all its writes, wherever they are in the log: one read.
        found = yield from self._read_all(session_id, _checkpoint_prefix(ns, checkpoint_id))
        if not found:
            return None
        (loaded,) = yield from self._tuples(session_id, thread_id, found[:1])
        return loaded

    def _list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> ListPlan:
        if limit is not None and limit <= 0:
            return
        if config is None:
            threads = yield from self._threads()
        else:
            thread_id = config["configurable"]["thread_id"]
            session_id = yield from self._session(thread_id, create=False)
            threads = [] if session_id is None else [(thread_id, session_id)]
        configurable = config["configurable"] if config else {}
        ns: str | None = configurable.get("checkpoint_ns")
        wanted_id = configurable.get("checkpoint_id")
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for thread_id, session_id in threads:
            if ns is None:
                prefix = "lg/"
            elif wanted_id:
                prefix = _checkpoint_prefix(ns, wanted_id)
            else:
                prefix = _ns_prefix(ns)
            live = yield from self._read_all(session_id, prefix)
            chosen = [s for s in live if self._matches(s, wanted_id, before_id, filter)]
            if left is not None:
                chosen, left = chosen[:left], left - len(chosen[:left])
            for start in range(0, len(chosen), 100):
                batch = chosen[start : start + 100]
                for item in (yield from self._tuples(session_id, thread_id, batch)):
                    yield _Item(item)
            if left == 0:
                return

    def _matches(
        self,
        stored: _Stored,
        wanted_id: str | None,
        before_id: str | None,
        filter: dict[str, Any] | None,
    ) -> bool:
        checkpoint_id = stored.checkpoint_id
        if wanted_id and checkpoint_id != wanted_id:
            return False
        if before_id and checkpoint_id >= before_id:
            return False
        if filter:
            metadata = self._metadata(stored.content)
            return all(metadata.get(k) == v for k, v in filter.items())
        return True

    def _metadata(self, content: dict[str, Any]) -> CheckpointMetadata:
        if "metadata_typed" in content:
            typed = content["metadata_typed"]
            metadata: CheckpointMetadata = self.serde.loads_typed(
                (typed["t"], b64decode(typed["b64"]))
            )
            return metadata
        plain: CheckpointMetadata = content.get("metadata") or CheckpointMetadata()
        return plain

    def _tuples(
        self, session_id: str, thread_id: str, stored: builtins.list[_Stored]
    ) -> Plan[builtins.list[CheckpointTuple]]:
        """The checkpoint tuples of `stored`, their values and writes' values loaded."""
        if not stored:
            return []
        refs: dict[tuple[int, str], dict[str, Any]] = {}
        for position, item in enumerate(stored):
            for channel, ref in item.content["values"].items():
                refs[(position, channel)] = ref
            for index, write in enumerate(item.writes):
                refs[(position, f"\0{index}")] = write["value"]
        # One checkpoint (get_tuple: the one a graph goes on from): its lists' elements are
        # kept as if this process had stored them, so the next put sends only the new ones
        # without serialising the others again (5,000 messages a turn, otherwise).
        elements: dict[Any, dict[int, tuple[Any, bytes, str]]] | None = None
        pristine: dict[Any, dict[str, Any]] | None = None
        if len(stored) == 1:
            elements = {}
            ns = stored[0].ns
            pristine = {
                (0, channel): self._pristine.get((session_id, ns, channel)) or {}
                for channel in stored[0].content["values"]
            }
        values = yield from self._load(session_id, refs, elements, pristine)
        tuples = []
        for position, item in enumerate(stored):
            content = item.content
            ns = item.ns
            body: dict[str, Any] | None = content.get("checkpoint")
            if body is None:
                typed = content["checkpoint_typed"]
                body = self.serde.loads_typed((typed["t"], b64decode(typed["b64"])))
            channel_values: dict[str, Any] = {}
            for channel, ref in content["values"].items():
                self._refs[(session_id, ns, channel)] = ref
                if elements and (position, channel) in elements:
                    self._elements[(session_id, ns, channel)] = elements[(position, channel)]
                if pristine and (position, channel) in pristine:
                    self._pristine[(session_id, ns, channel)] = pristine[(position, channel)]
                if (position, channel) in values:
                    channel_values[channel] = values[(position, channel)]
            writes = self._pending(item, values, position)
            checkpoint = cast(Checkpoint, {**body, "channel_values": channel_values})
            parent = content.get("parent_checkpoint_id")
            tuples.append(
                CheckpointTuple(
                    config=_config(thread_id, ns, item.checkpoint_id),
                    checkpoint=checkpoint,
                    metadata=self._metadata(content),
                    parent_config=_config(thread_id, ns, parent) if parent else None,
                    pending_writes=writes,
                )
            )
        return tuples

    def _pending(
        self, item: _Stored, values: dict[tuple[int, str], Any], position: int
    ) -> builtins.list[PendingWrite]:
        """The writes in writes_sort_key order; of a special write (negative index) written
        more than once, the last."""
        chosen: dict[tuple[str, int], tuple[tuple[str, str, int], PendingWrite]] = {}
        for index, write in enumerate(item.writes):
            at = (write["task_id"], write["idx"])
            if at in chosen and write["idx"] >= 0:
                continue
            key = writes_sort_key(write["task_path"], write["task_id"], write["idx"])
            value = values[(position, f"\0{index}")]
            chosen[at] = (key, (write["task_id"], write["channel"], value))
        return [w for _, w in sorted(chosen.values(), key=lambda kw: kw[0])]

    def _load(
        self,
        session_id: str,
        refs: dict[Any, dict[str, Any]],
        elements: dict[Any, dict[int, tuple[Any, bytes, str]]] | None = None,
        pristine: dict[Any, dict[str, Any]] | None = None,
    ) -> Plan[dict[Any, Any]]:
        """The values `refs` name, by the same keys (an empty channel's is left out). Blobs
        are read in as few requests as the levels of names take (two for a list). With
        `elements`, each list's elements go there too, with their blobs, as _put keeps them.
        With `pristine` (a key's list elements decoded before, by blob name), such a list's
        elements are copies of those, decoding only the others; `pristine` is left holding
        this read's, decoded, for the next."""
        values: dict[Any, Any] = {}
        # key -> (names still to read, levels of names above the elements, is a list)
        jobs: dict[Any, tuple[builtins.list[str], int, bool]] = {}
        for key, ref in refs.items():
            if "b64" in ref:
                values[key] = self.serde.loads_typed((ref["t"], b64decode(ref["b64"])))
            elif "blobs" in ref:
                jobs[key] = (ref["blobs"], 0, False)
            elif "list" in ref:
                jobs[key] = (ref["list"]["pieces"], ref["list"]["depth"], True)
            elif "empty_list" in ref:
                values[key] = []
        # This read's blobs by name: the cache may drop some before the read ends (one bigger
        # than CACHE_BYTES); these stay until it does.
        held: dict[str, bytes] = {}
        # A list element's value by its blob's name, decoded once per read: a message held by
        # every checkpoint of a list(limit=50) is decoded once, not fifty times.
        decoded: dict[str, Any] = {}
        # Of those, the ones a list holds already. Met again (in another checkpoint of the
        # read), an element is a shallow copy: an object of its own, as a fresh decode gives,
        # sharing its fields' values, as LangGraph's own checkpoints in memory share their
        # messages (copy_checkpoint copies the channel values' dict, not the messages).
        handed: set[str] = set()
        while jobs:
            unread = {name: None for names, _, _ in jobs.values() for name in names}
            held.update(self._blobs.get_many(name for name in unread if name not in held))
            wanted = [name for name in unread if name not in held]
            if wanted:
                loaded: builtins.list[bytes] = yield _call("load_blobs", session_id, wanted)
                arrived = dict(zip(wanted, loaded, strict=True))
                self._blobs.update(arrived)
                held.update(arrived)
            for key, (names, depth, is_list) in builtins.list(jobs.items()):
                if depth:
                    joined = b"".join([held[n] for n in names])
                    jobs[key] = (_split_names(joined), depth - 1, is_list)
                    continue
                del jobs[key]
                if not is_list:
                    values[key] = self._untyped(b"".join([held[n] for n in names]))
                    continue
                if pristine is not None and key in pristine:
                    # Copies of values never handed out, as fresh as a decode (a shallow copy,
                    # a third of a decode's time: the fields' values are shared, as LangGraph's
                    # own checkpoints in memory share their messages').
                    known = pristine[key]
                    self._decode_elements(held, decoded, [n for n in names if n not in known])
                    now = pristine[key] = {n: known[n] if n in known else decoded[n] for n in names}
                    listed = values[key] = [copy.copy(now[name]) for name in names]
                else:
                    self._decode_elements(held, decoded, names)
                    listed = values[key] = []
                    for name in names:
                        if name in handed:
                            listed.append(copy.copy(decoded[name]))
                        else:
                            handed.add(name)
                            listed.append(decoded[name])
                if elements is not None:
                    elements[key] = {
                        id(value): (value, held[name], name)
                        for value, name in zip(listed, names, strict=True)
                    }
        return values

    def _decode_elements(
        self, held: dict[str, bytes], decoded: dict[str, Any], names: builtins.list[str]
    ) -> None:
        """Decode the elements `names` holds that are not in `decoded` yet. With LangGraph's
        own serializer, its msgpack ones in one call, as an array of them (what its own savers
        store for the whole list): one call per element took a sixth of a 5,000-message read."""
        batched: builtins.list[tuple[str, bytes]] = []
        whole = isinstance(self.serde, JsonPlusSerializer)
        for name in dict.fromkeys(names):
            if name in decoded:
                continue
            kind, _, payload = held[name].partition(b"\n")
            if whole and kind == b"msgpack":
                batched.append((name, payload))
            else:
                decoded[name] = self.serde.loads_typed((kind.decode(), payload))
        if batched:
            # A msgpack array (array 32: 0xdd, then its length) of the elements as they are.
            array = b"\xdd" + len(batched).to_bytes(4, "big") + b"".join(p for _, p in batched)
            elements = self.serde.loads_typed(("msgpack", array))
            for (name, _), value in zip(batched, elements, strict=True):
                decoded[name] = value

    def _untyped(self, data: bytes) -> Any:
        kind, _, payload = data.partition(b"\n")
        return self.serde.loads_typed((kind.decode(), payload))

    # --- Writing ---------------------------------------------------------------------------

    def _typed(self, value: Any) -> tuple[str, bytes]:
        kind, data = self.serde.dumps_typed(value)
        return kind, data

    def _encode(
        self,
        value: Any,
        contents: builtins.list[bytes],
        slot: tuple[str, str, str],
        pending: dict[tuple[str, str, str], dict[int, tuple[Any, bytes, str]]],
    ) -> dict[str, Any]:
        """A ref to `value` (of the channel `slot` names), adding the blobs it needs to
        `contents`. A list's elements that were in the list this channel last stored (the
        same objects) are not serialised or sent again: LangGraph replaces state, it does not
        change it in place."""
        if type(value) is list:
            if not value:
                return {"empty_list": True}
            before = self._elements.get(slot) or {}
            now: dict[int, tuple[Any, bytes, str]] = {}
            names = []
            for element in value:
                known = before.get(id(element))
                if known is None or known[0] is not element:
                    blob = self._blob_of(*self._typed(element))
                    if len(blob) > BLOB_PIECE:
                        return self._scalar(value, contents, INLINE_BYTES)
                    known = (element, blob, self._remember(blob))
                    contents.append(blob)
                now[id(element)] = known
                names.append(known[2])
            pending[slot] = now
            return {"list": self._names_tree(names, contents)}
        return self._scalar(value, contents, INLINE_BYTES)

    def _names_tree(
        self, names: builtins.list[str], contents: builtins.list[bytes]
    ) -> dict[str, Any]:
        """The elements' names stored in pieces (and the pieces' names again while there are
        more than MAX_PIECES): the ref names the top level's pieces."""
        level, depth = names, 0
        while True:
            raw = b"".join(bytes.fromhex(n) for n in level)
            pieces = [raw[i : i + NAMES_PIECE] for i in range(0, len(raw), NAMES_PIECE)]
            contents.extend(pieces)
            level = [self._remember(p) for p in pieces]
            depth += 1
            if len(level) <= MAX_PIECES:
                return {"n": len(names), "depth": depth, "pieces": level}

    @staticmethod
    def _blob_of(kind: str, data: bytes) -> bytes:
        return kind.encode() + b"\n" + data

    def _remember(self, data: bytes) -> str:
        name = _sha(data)
        self._blobs[name] = data
        return name

    def _encoded(self, content: dict[str, Any], name: str, value: Any) -> None:
        """`value` in `content` under `name`: as JSON when it reads back equal, else typed."""
        plain = _as_json(value)
        if plain is not None or value is None:
            content[name] = plain
        else:
            kind, data = self._typed(value)
            content[name + "_typed"] = {"t": kind, "b64": b64encode(data).decode()}

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Plan[RunnableConfig]:
        configurable = config["configurable"]
        thread_id: str = configurable["thread_id"]
        ns: str = configurable.get("checkpoint_ns", "")
        parent_id: str | None = configurable.get("checkpoint_id")
        session_id = yield from self._session(thread_id, create=True)
        assert session_id is not None
        channel_values = checkpoint["channel_values"]
        pending: dict[tuple[str, str, str], dict[int, tuple[Any, bytes, str]]] = {}
        contents: builtins.list[bytes] = []
        refs: dict[str, dict[str, Any]] = {}
        for channel, version in checkpoint["channel_versions"].items():
            known = self._refs.get((session_id, ns, channel))
            if channel not in new_versions and known is not None and known["v"] == version:
                refs[channel] = known
            elif channel in channel_values:
                value = channel_values[channel]
                slot = (session_id, ns, channel)
                refs[channel] = {"v": version, **self._encode(value, contents, slot, pending)}
            elif channel in new_versions:
                refs[channel] = {"v": version, "empty": True}
            elif parent_id:
                # Unchanged, not given, not known here (another process wrote it): the
                # parent names it.
                parent = yield from self._get_tuple(_config(thread_id, ns, parent_id))
                if parent is not None:
                    known = self._refs.get((session_id, ns, channel))
                if known is not None and known["v"] == version:
                    refs[channel] = known
        body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        content: dict[str, Any] = {
            "langgraph": "checkpoint",
            "ns": ns,
            "checkpoint_id": checkpoint["id"],
            "parent_checkpoint_id": parent_id,
        }
        full_metadata = get_checkpoint_metadata(config, metadata)
        self._encoded(content, "metadata", full_metadata)
        self._encoded(content, "checkpoint", body)
        content["values"] = refs
        key = f"{_checkpoint_prefix(ns, checkpoint['id'])}c/{_digest(_json_dump(content), 12)}"
        events: builtins.list[m.EventIn] = [
            {"kind": "note", "tier": "durable", "content": content, "idempotency_key": key}
        ]
        run_id = full_metadata.get("run_id")
        if isinstance(run_id, str) and (session_id, run_id) not in self._runs:
            events.append(
                {
                    "kind": "note",
                    "tier": "durable",
                    "content": {"langgraph": "run", "run_id": run_id},
                    "idempotency_key": _run_key(run_id),
                }
            )
        # The values' new blobs go with the event (one request; stored first when too big).
        yield _call("append", session_id, events, blobs=contents)
        if isinstance(run_id, str):
            self._runs.add((session_id, run_id))
        for channel, ref in refs.items():
            self._refs[(session_id, ns, channel)] = ref
        # Stored: the elements of the lists just sent are known from now on.
        self._elements.update(pending)
        return _config(thread_id, ns, checkpoint["id"])

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Plan[None]:
        if not writes:
            return None
        configurable = config["configurable"]
        thread_id: str = configurable["thread_id"]
        ns: str = configurable.get("checkpoint_ns", "")
        checkpoint_id: str = configurable["checkpoint_id"]
        session_id = yield from self._session(thread_id, create=True)
        assert session_id is not None
        contents: builtins.list[bytes] = []
        events: builtins.list[m.EventIn] = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            content = {
                "langgraph": "write",
                "ns": ns,
                "checkpoint_id": checkpoint_id,
                "task_id": task_id,
                "task_path": task_path,
                "idx": idx,
                "channel": channel,
                "value": self._scalar(value, contents, INLINE_WRITE_BYTES),
            }
            key = f"{_checkpoint_prefix(ns, checkpoint_id)}w/{_part(task_id)}/{idx}"
            if idx < 0:
                # The last of these wins (as in LangGraph's own savers): one event each.
                key += "/" + _digest(_json_dump(content), 12)
            events.append(
                {"kind": "note", "tier": "durable", "content": content, "idempotency_key": key}
            )
        while events:
            try:
                # Refused, the append stores none of the blobs: they go again with the rest.
                yield _call("append", session_id, events, blobs=contents)
                return None
            except Conflict as error:
                # A (task, index) written before with another value: the first write wins.
                index = (error.detail or {}).get("index")
                if error.code != "idempotency_key_reused" or not isinstance(index, int):
                    raise
                del events[index]
        return None

    def _scalar(self, value: Any, contents: builtins.list[bytes], inline: int) -> dict[str, Any]:
        kind, data = self._typed(value)
        if len(data) <= inline:
            return {"t": kind, "b64": b64encode(data).decode()}
        blob = self._blob_of(kind, data)
        pieces = [blob[i : i + BLOB_PIECE] for i in range(0, len(blob), BLOB_PIECE)]
        contents.extend(pieces)
        return {"blobs": [self._remember(p) for p in pieces]}

    # --- Deleting and copying --------------------------------------------------------------

    def _hide(
        self, session_id: str, reason: str, keep: Callable[[_Stored, set[str]], bool]
    ) -> Plan[None]:
        """Append a deletion note for each live checkpoint `keep` refuses. `keep` gets the
        checkpoint and the namespaces whose newest live checkpoint was already seen."""
        seen: set[str] = set()
        notes: builtins.list[m.EventIn] = []
        scan = _Scan(session_id, "lg/", 1000)
        while (live := (yield from self._page(scan))) is not None:
            for stored in live:
                if not keep(stored, seen):
                    notes.append(_deletion_note(stored, reason))
                seen.add(stored.ns)
        for start in range(0, len(notes), APPEND_BATCH):
            yield _call("append", session_id, notes[start : start + APPEND_BATCH])
        self._refs.forget(_of_session(session_id))

    def _delete_thread(self, thread_id: str) -> Plan[None]:
        session_id = yield from self._session(thread_id, create=False)
        if session_id is None:
            return None
        try:
            yield _call("delete_session", session_id)
        except Conflict as error:
            if error.code != "session_has_forks":
                raise
            # Copies of this thread (forks) read through its log: hide, do not delete.
            yield from self._hide(session_id, "delete_thread", lambda stored, seen: False)
        self._forget(thread_id)
        return None

    def _copy_thread(self, source: str, target: str) -> Plan[None]:
        session_id = yield from self._session(source, create=False)
        if session_id is None:
            return None
        found: m.SessionWithTasks = yield _call("get_session", session_id)
        fork: m.Session = yield _call(
            "fork",
            session_id,
            found.head_seq,
            external_id=self.external_id(target),
            title=f"LangGraph thread {target} (copy of {source})",
            metadata={"framework": "langgraph", "langgraph_namespace": self.namespace},
        )
        self._sessions[target] = fork.id
        return None

    def _prune(self, thread_ids: Sequence[str], strategy: str) -> Plan[None]:
        if strategy not in {"keep_latest", "delete"}:
            raise ValueError(f"unknown prune strategy {strategy!r}")
        for thread_id in thread_ids:
            if strategy == "delete":
                yield from self._delete_thread(thread_id)
                continue
            session_id = yield from self._session(thread_id, create=False)
            if session_id is not None:
                yield from self._hide(
                    session_id, "prune", lambda stored, seen: stored.ns not in seen
                )
        return None

    def _delete_for_runs(self, run_ids: Sequence[str]) -> Plan[None]:
        wanted = set(run_ids)
        if not wanted:
            return None
        keys = [_run_key(r) for r in wanted]
        threads = yield from self._threads()
        for _, session_id in threads:
            marked: m.EventSlice = yield _call("events", session_id, key=keys, limit=1000)
            if not marked.events:
                continue
            yield from self._hide(
                session_id,
                "delete_for_runs",
                lambda stored, seen: self._metadata(stored.content).get("run_id") not in wanted,
            )
        return None


def _deletion_note(stored: _Stored, reason: str) -> m.EventIn:
    return {
        "kind": "note",
        "tier": "durable",
        "content": {
            "langgraph": "deleted",
            "ns": stored.ns,
            "checkpoint_id": stored.checkpoint_id,
            "reason": reason,
        },
        "idempotency_key": f"{_checkpoint_prefix(stored.ns, stored.checkpoint_id)}x/{stored.seq}",
    }


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


# --- interrupt() as a handoff ------------------------------------------------------------------


class HandoffNotAnswered(SwitchboardError):
    """The handoff an interrupt asked for ended without an answer (cancelled, expired, taken
    over, closed; an ignored one is answered "ignore") or is still waiting when the run's
    `timeout` is up: `.handoff` says which."""

    def __init__(self, handoff: m.Handoff) -> None:
        super().__init__(
            f"handoff {handoff.id} is {handoff.status}: the run cannot resume without an answer",
            code="handoff_not_answered",
            detail={"handoff_id": handoff.id, "status": handoff.status},
        )
        self.handoff = handoff


def handoff_for(value: Any) -> tuple[m.HandoffKind, m.JsonObject, str]:
    """The handoff (kind, payload, reason) an interrupt's value asks for:

    - Agent Inbox's HumanInterrupt (`{"action_request": {"action", "args"}, "config": {...},
      "description"}`, langgraph.prebuilt.interrupt): an approval with that payload;
    - a dict with a `"question"` string (and `"choices"`): a question with that payload;
    - anything else: a question whose text is the value (a string) or its JSON, with the value
      kept under `"value"` when it is JSON.
    """
    if isinstance(value, dict) and isinstance(value.get("action_request"), dict):
        payload = {
            "action_request": value["action_request"],
            "config": value.get("config") or {},
            "description": value.get("description") or "",
        }
        return "approval", payload, payload["description"] or "The agent asks for approval."
    if isinstance(value, dict) and isinstance(value.get("question"), str):
        return "question", dict(value), value["question"]
    plain = _as_json(value)
    if isinstance(value, str):
        text = value
    elif plain is not None:
        text = json.dumps(plain, ensure_ascii=False)
    else:
        text = repr(value)
    payload = {"question": text[:10_000]}
    if plain is not None and not isinstance(value, str):
        payload["value"] = plain
    return "question", payload, "The agent asks a person."


def resume_value(handoff: m.Handoff) -> Any:
    """What `interrupt()` returns in the resumed graph, from the person's answer: a
    question's text; for an approval, Agent Inbox's HumanResponse (`{"type": "accept" |
    "edit" | "response" | "ignore", "args": ...}`). Ignored (the person dismissed it) is
    `{"type": "ignore", "args": None}`, and so is a reject (Switchboard's refusal, allowed by
    the same `allow_ignore`: the action is not taken; its reason stays in `handoff.answer`)."""
    answer = handoff.answer or {}
    kind = answer.get("type")
    if handoff.kind == "question":
        return answer.get("text")
    if kind == "ignore":
        return {"type": "ignore", "args": None}
    if kind == "accept":
        return {"type": "accept", "args": None}
    if kind == "edit":
        return {"type": "edit", "args": {"action": answer.get("action"), "args": answer["args"]}}
    if kind == "respond":
        return {"type": "response", "args": answer.get("text")}
    return {"type": "ignore", "args": None}


def run_with_handoffs(
    graph: Any,
    input: Any,
    config: RunnableConfig,
    *,
    client: Client | AsyncClient | None = None,
    timeout: float | None = None,
    poll: int = 30,
    to_handoff: Callable[[Any], tuple[m.HandoffKind, m.JsonObject, str]] = handoff_for,
    to_resume: Callable[[m.Handoff], Any] = resume_value,
    **invoke_options: Any,
) -> Any:
    """`graph.invoke(input, config)`; each time the run stops at `interrupt()`, a person is
    asked through a Switchboard handoff on the thread's session (handoff_for: the interrupt's
    value becomes the question or the approval), the answer is awaited (long-poll), and the
    run goes on with `Command(resume=...)` (resume_value). Returns the run's last result.

    `graph` is compiled with a SwitchboardSaver; `client` defaults to the saver's. Each
    handoff's idempotency key is the interrupt's id: a process restarted while waiting asks
    nothing twice, and an answer given meanwhile is found at once. Raises HandoffNotAnswered
    when a handoff ends without an answer or `timeout` (seconds per handoff) passes; `poll`
    is each long-poll's wait (seconds, at most 60). Other keyword arguments go to invoke.
    """
    saver = _saver_of(graph)
    flow = _handoff_flow(saver, input, config, (timeout, poll), to_handoff, to_resume)
    sb = sync_client(client) if client is not None else saver.client
    perform = _performer({"graph": graph, "client": sb, "": time}, invoke_options, "")
    return _drive(flow, perform)


async def arun_with_handoffs(
    graph: Any,
    input: Any,
    config: RunnableConfig,
    *,
    client: Client | AsyncClient | None = None,
    timeout: float | None = None,
    poll: int = 30,
    to_handoff: Callable[[Any], tuple[m.HandoffKind, m.JsonObject, str]] = handoff_for,
    to_resume: Callable[[m.Handoff], Any] = resume_value,
    **invoke_options: Any,
) -> Any:
    """run_with_handoffs with `graph.ainvoke` and the async client."""
    saver = _saver_of(graph)
    flow = _handoff_flow(saver, input, config, (timeout, poll), to_handoff, to_resume)
    sb = async_client(client) if client is not None else saver.aclient
    perform = _performer({"graph": graph, "client": sb, "": asyncio}, invoke_options, "a")
    return await _adrive(flow, perform)


def _performer(
    targets: dict[str, Any], invoke_options: dict[str, Any], graph_prefix: str
) -> Callable[[_Call], Any]:
    """Performs a handoff flow's calls: "graph.invoke" (`graph_prefix` + the method: "a" for
    the async ones), "client.…", or "sleep" (time.sleep or asyncio.sleep)."""

    def perform(call: _Call) -> Any:
        target, _, name = call.method.rpartition(".")
        options = invoke_options if name == "invoke" else {}
        method = getattr(targets[target], graph_prefix + name if target == "graph" else name)
        return method(*call.args, **options, **call.kwargs)

    return perform


def _saver_of(graph: Any) -> SwitchboardSaver:
    saver = getattr(graph, "checkpointer", None)
    if not isinstance(saver, SwitchboardSaver):
        raise TypeError("run_with_handoffs needs a graph compiled with a SwitchboardSaver")
    return saver


def _handoff_flow(
    saver: SwitchboardSaver,
    input: Any,
    config: RunnableConfig,
    waiting: tuple[float | None, int],
    to_handoff: Callable[[Any], tuple[m.HandoffKind, m.JsonObject, str]],
    to_resume: Callable[[m.Handoff], Any],
) -> Plan[Any]:
    """The run as calls to the graph ("graph.…") and the client ("client.…")."""
    from langgraph.types import Command

    result = yield _call("graph.invoke", input, config)
    while True:
        state = yield _call("graph.get_state", config)
        interrupts = [i for task in state.tasks for i in task.interrupts]
        if not interrupts:
            return result
        thread_id = config["configurable"]["thread_id"]
        session_id = session_reference(thread_id)
        if session_id is None:
            external_id = saver.external_id(thread_id)
            session: m.SessionListItem | None = yield _call("client.find_session", external_id)
            if session is None:
                raise ValueError(f"no session holds the thread {external_id!r}")
            session_id = session.id
        answers: dict[str, Any] = {}
        # One at a time: a session has one open handoff at most.
        for interrupt in interrupts:
            kind, payload, reason = to_handoff(interrupt.value)
            asked: m.Handoff | None = None
            while asked is None:
                try:
                    asked = yield _call(
                        "client.request_handoff",
                        session_id,
                        kind,
                        reason=reason[:1000],
                        payload=payload,
                        idempotency_key=f"langgraph-interrupt-{interrupt.id}",
                    )
                except Conflict as error:
                    # The person answered the last one and has not handed the session back
                    # yet (the run went on with the answer meanwhile): ask when they have.
                    if error.code != "handoff_already_open":
                        raise
                    yield _call("sleep", HANDBACK_POLL)
            done: m.Handoff = yield _call(
                "client.wait_handoff", asked.id, timeout=waiting[0], poll=waiting[1]
            )
            # Ignored is an answer too: the graph goes on without the action.
            if not done.has_answer:
                raise HandoffNotAnswered(done)
            answers[interrupt.id] = to_resume(done)
        resume = answers if len(interrupts) > 1 else answers[interrupts[0].id]
        result = yield _call("graph.invoke", Command(resume=resume), config)
