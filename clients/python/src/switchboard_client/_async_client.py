"""AsyncClient: the agent API over httpx.AsyncClient (one pool of keep-alive connections).

This file is the source of the sync Client too: clients/python/unasync.py writes
_sync_client.py from it (`python clients/python/unasync.py`), and a test fails while the two
differ. Edit this one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from base64 import b64encode
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Literal

import httpx

from . import models as m
from . import operations as ops
from ._core import (
    _BATCH_BYTES,
    ASK_FIRST_BYTES,
    BLOBS_PER_CALL,
    LOOKUP_NAMES_PER_CALL,
    PIECE_SIZE,
    Request,
    RetryPolicy,
    StoredBlobNames,
    blob_batches,
    blobs_lookup,
    build,
    build_upload,
    default_headers,
    error_from,
    given,
    http_headers,
    http_options,
    network_error,
    new_key,
    read,
    read_blobs,
    resolve_config,
    target,
)
from ._decode import decode

# The body of an append carrying blobs, at most: a store's batch in base64 with room for the
# events (a checkpoint's are a few KiB), under the server's default 1 MiB body limit. A larger
# one stores its blobs first (POST …/blobs), then appends.
_APPEND_BYTES = 4 * _BATCH_BYTES // 3 + 64 * 1024

# GET /healthz: the process answers (not an /api/v1 operation, so not in the schema).
_HEALTHZ = ops.Operation("GET", "/healthz", responses={200: dict[str, Any]})


class AsyncExport:
    """An export being read: `session` is its header line; iterating gives its events, oldest
    first, as the server streams them."""

    def __init__(self, session: m.ExportedSession, lines: AsyncIterator[str]) -> None:
        self.session = session
        self._lines = lines

    def __aiter__(self) -> AsyncIterator[m.Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[m.Event]:
        async for line in self._lines:
            if line:
                yield decode(m.Event, json.loads(line))


class AsyncClient:
    """The Switchboard agent API.

    `url` (the server, e.g. http://localhost:8000) and `api_key` default to SWITCHBOARD_URL and
    SWITCHBOARD_API_KEY. Connections are kept alive and reused; close the client when done
    (`async with AsyncClient() as sb: ...`).

    Failures raise SwitchboardError subclasses (errors.py). Connection failures, 429 and 503
    are retried by `retry` (a RetryPolicy: 3 retries, Retry-After honoured, else exponential
    backoff with full jitter); a request that may have been processed when its connection broke
    is sent again only when that is safe: appends (every event carries an idempotency key, made
    here when not given), handoff requests and signals (a key made here too), opens and forks
    with an external_id, and GET/PUT/DELETE.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        httpx_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.url, self.api_key = resolve_config(url, api_key)
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self._http = httpx.AsyncClient(
            headers=default_headers(self.api_key),
            timeout=timeout,
            transport=transport,
            **http_options(self.url, httpx_options),
        )
        # Blob names this client stored or found per session: not asked about, nor sent again.
        self._stored_blobs = StoredBlobNames()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- Sending -----------------------------------------------------------------------------

    async def _send(self, request: Request, *, stream: bool = False) -> httpx.Response:
        """The answer to `request`, after the retries the policy allows. An error answer is
        returned read (the caller raises it); a stream's success is returned unread."""
        attempt = 0
        while True:
            # The query in the URL (target), and the client's timeout unless the call has its
            # own: httpx then skips merging params into the URL and building a Timeout, which
            # were most of what the client added to a call's CPU.
            outgoing = self._http.build_request(
                request.operation.method,
                self.url + target(request),
                content=request.content,
                headers=http_headers(request),
                timeout=httpx.USE_CLIENT_DEFAULT if request.timeout is None else request.timeout,
            )
            try:
                response = await self._http.send(outgoing, stream=stream)
                if stream and response.status_code >= 400:
                    await response.aread()
                    await response.aclose()
            except httpx.TransportError as error:
                delay = self.retry.after_error(attempt, error, request)
                if delay is None:
                    raise network_error(error, request) from error
            else:
                delay = self.retry.after_response(attempt, response)
                if delay is None:
                    return response
            attempt += 1
            await asyncio.sleep(delay)

    async def _call(self, request: Request) -> Any:
        return read(request, await self._send(request))

    # --- Project -----------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """GET /healthz: `{"status": "ok"}` when the server answers."""
        request = Request(_HEALTHZ, "/healthz", (), None, idempotent=True)
        result: dict[str, Any] = await self._call(request)
        return result

    async def project(self) -> m.Project:
        """The key's project (and the key's scope)."""
        result: m.Project = await self._call(build(ops.PROJECT_READ))
        return result

    async def rename_project(self, name: str) -> m.Project:
        """PATCH /project (admin-scoped keys)."""
        result: m.Project = await self._call(build(ops.PROJECT_UPDATE, body={"name": name}))
        return result

    # --- Sessions ----------------------------------------------------------------------------

    async def open_session(
        self,
        agent: str,
        *,
        external_id: str | None = None,
        title: str | None = None,
        metadata: m.JsonObject | None = None,
        budget: m.BudgetIn | None = None,
        task_ids: Sequence[str] | None = None,
    ) -> m.SessionWithTasks:
        """Open a session. With `external_id`, the agent's session of that id if there is one
        (so safe to retry); another agent's is 409 external_id_taken."""
        body = given(
            agent=agent,
            external_id=external_id,
            title=title,
            metadata=metadata,
            budget=budget,
            task_ids=list(task_ids) if task_ids is not None else None,
        )
        request = build(ops.SESSION_OPEN, body=body, idempotent=external_id is not None)
        result: m.SessionWithTasks = await self._call(request)
        return result

    async def get_session(self, session_id: str) -> m.SessionWithTasks:
        result: m.SessionWithTasks = await self._call(
            build(ops.SESSION_READ, {"session_id": session_id})
        )
        return result

    async def list_sessions(
        self,
        *,
        status: Sequence[m.SessionStatus] | None = None,
        agent: str | None = None,
        q: str | None = None,
        external_id: str | Sequence[str] | None = None,
        metadata: Mapping[str, str | int | float | bool | None] | None = None,
        has_pending_handoff: bool | None = None,
        include_state: bool = False,
        include_events: int | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> m.SessionPage:
        """One page of the project's sessions, newest first; the filters AND together.

        `external_id`: a look-up that never opens one (several: the sessions with any of
        them, at most 20). `metadata`: top-level keys and the values they must hold
        (`{"tier": "gold", "priority": 3}`). `include_state`: each session also carries its
        working state and facts at head (`state`, `facts`, `state_error`). `include_events`:
        each session also carries its last `include_events` events (`events`, oldest first,
        and `events_has_more`).
        """
        include = [
            *(["state"] if include_state else []),
            *(["events"] if include_events is not None else []),
        ]
        query: dict[str, Any] = {
            "status": status,
            "agent": agent,
            "q": q,
            "external_id": [external_id] if isinstance(external_id, str) else external_id,
            "has_pending_handoff": has_pending_handoff,
            "include": include or None,
            "events_limit": include_events,
            "created_after": created_after,
            "created_before": created_before,
            "updated_after": updated_after,
            "updated_before": updated_before,
            "cursor": cursor,
            "limit": limit,
        }
        for name, value in (metadata or {}).items():
            query["metadata." + name] = _metadata_value(value)
        result: m.SessionPage = await self._call(build(ops.SESSION_LIST, query=query))
        return result

    async def iter_sessions(self, **filters: Any) -> AsyncIterator[m.SessionListItem]:
        """Every session list_sessions(**filters) finds, page after page."""
        cursor = filters.pop("cursor", None)
        while True:
            page = await self.list_sessions(cursor=cursor, **filters)
            for session in page.sessions:
                yield session
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def find_session(
        self, external_id: str, *, include_state: bool = False
    ) -> m.SessionListItem | None:
        """The project's session with this external_id, or None (nothing is opened)."""
        page = await self.list_sessions(
            external_id=external_id, include_state=include_state, limit=1
        )
        return page.sessions[0] if page.sessions else None

    async def find_sessions(
        self,
        external_ids: Sequence[str],
        *,
        include_state: bool = False,
        include_events: int | None = None,
    ) -> dict[str, m.SessionListItem]:
        """The project's sessions with these external_ids (at most 20), by external_id, in one
        request: those that do not exist are left out (nothing is opened). With
        `include_state` / `include_events`, as list_sessions."""
        if not external_ids:
            return {}
        page = await self.list_sessions(
            external_id=list(external_ids),
            include_state=include_state,
            include_events=include_events,
            limit=len(external_ids),
        )
        return {s.external_id: s for s in page.sessions if s.external_id is not None}

    async def delete_session(
        self, session_id: str, *, with_forks: bool = False
    ) -> m.SessionDeleted:
        """Delete a session whole (its external_id is free again); with_forks: its forks too."""
        request = build(
            ops.SESSION_DELETE,
            {"session_id": session_id},
            query={"with_forks": True if with_forks else None},
        )
        result: m.SessionDeleted = await self._call(request)
        return result

    # --- Events, state, snapshots, forks, lifecycle ----------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[m.EventIn],
        *,
        expected_head_seq: int | None = None,
        blobs: Sequence[bytes] = (),
    ) -> m.AppendResult:
        """Append a batch, in order; the answer has each event's seq. Every event goes with an
        idempotency key (a random one when it has none), so a retried batch writes once.

        `blobs`: bytes the events name by SHA-256 (as store_blobs stores them), sent in the
        same request and stored with the events, both or neither. Those this client stored or
        found in the session before are not sent again; past ASK_FIRST_BYTES it first asks
        which the session lacks, as store_blobs does. When they do not fit in one request with
        the events, they are stored first (store_blobs), then the events appended."""
        keyed = [
            event if event.get("idempotency_key") else {**event, "idempotency_key": new_key()}
            for event in events
        ]
        names = [hashlib.sha256(content).hexdigest() for content in blobs]
        unsent = await self._unsent_blobs(session_id, names, blobs)
        sent: list[m.BlobIn] = [{"data": b64encode(c).decode()} for c in unsent]
        body = given(events=keyed, expected_head_seq=expected_head_seq, blobs=sent or None)
        request = build(ops.EVENTS_APPEND, {"session_id": session_id}, body=body, idempotent=True)
        if sent and (len(sent) > BLOBS_PER_CALL or len(request.content or b"") > _APPEND_BYTES):
            await self._send_blobs(session_id, unsent)
            body = given(events=keyed, expected_head_seq=expected_head_seq)
            request = build(
                ops.EVENTS_APPEND, {"session_id": session_id}, body=body, idempotent=True
            )
        result: m.AppendResult = await self._call(request)
        self._stored_blobs.add(session_id, names)
        return result

    async def events(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        kind: Sequence[str] | None = None,
        tier: m.Tier | None = None,
        order: Literal["asc", "desc"] | None = None,
        key: Sequence[str] | None = None,
        key_prefix: str | None = None,
    ) -> m.EventSlice:
        """A slice of the log (a fork's includes its parent's prefix). `key`: only the events
        with these idempotency keys; `key_prefix`: those whose key starts with it."""
        query = {
            "after_seq": after_seq,
            "before_seq": before_seq,
            "limit": limit,
            "kind": kind,
            "tier": tier,
            "order": order,
            "key": key,
            "key_prefix": key_prefix,
        }
        request = build(ops.EVENTS_SLICE, {"session_id": session_id}, query=query)
        result: m.EventSlice = await self._call(request)
        return result

    async def iter_events(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        kind: Sequence[str] | None = None,
        tier: m.Tier | None = None,
        page_size: int = 1000,
    ) -> AsyncIterator[m.Event]:
        """Every event after `after_seq`, oldest first, a slice at a time."""
        while True:
            page = await self.events(
                session_id, after_seq=after_seq, limit=page_size, kind=kind, tier=tier
            )
            for event in page.events:
                yield event
            if not page.has_more or not page.events:
                return
            after_seq = page.events[-1].seq

    async def state(self, session_id: str, *, at_seq: int | None = None) -> m.State:
        """Working state, facts and summary at `at_seq` (default: head)."""
        request = build(ops.STATE_READ, {"session_id": session_id}, query={"at_seq": at_seq})
        result: m.State = await self._call(request)
        return result

    async def snapshot(self, session_id: str) -> m.Snapshot:
        """Checkpoint the state at head."""
        result: m.Snapshot = await self._call(
            build(ops.SNAPSHOT_CREATE, {"session_id": session_id})
        )
        return result

    async def fork(
        self,
        session_id: str,
        at_seq: int,
        *,
        external_id: str | None = None,
        title: str | None = None,
        metadata: m.JsonObject | None = None,
    ) -> m.Session:
        """A new session whose history is this one's up to at_seq (rewind: an earlier seq).
        With `external_id` the same fork asked for again is the first one (safe to retry)."""
        body = given(
            at_seq=at_seq,
            external_id=external_id,
            title=title,
            metadata=metadata,
        )
        request = build(
            ops.SESSION_FORK,
            {"session_id": session_id},
            body=body,
            idempotent=external_id is not None,
        )
        result: m.Session = await self._call(request)
        return result

    async def pause_session(self, session_id: str, reason: str = "") -> m.Session:
        return await self._lifecycle(ops.SESSION_PAUSE, session_id, reason)

    async def resume_session(self, session_id: str, reason: str = "") -> m.Session:
        return await self._lifecycle(ops.SESSION_RESUME, session_id, reason)

    async def close_session(self, session_id: str, reason: str = "") -> m.Session:
        return await self._lifecycle(ops.SESSION_CLOSE, session_id, reason)

    async def _lifecycle(self, operation: ops.Operation, session_id: str, reason: str) -> m.Session:
        body: m.ReasonIn = {"reason": reason}
        result: m.Session = await self._call(
            build(operation, {"session_id": session_id}, body=body)
        )
        return result

    @asynccontextmanager
    async def export(self, session_id: str) -> AsyncIterator[AsyncExport]:
        """The whole log as the server streams it (JSON Lines), read as it arrives:

            async with client.export(session_id) as export:
                export.session          # the header: id, title, agent, lineage, head_seq, usage
                async for event in export: ...

        Opening is retried as any call (a project's concurrent exports are limited: 429
        export_busy with Retry-After); a stream broken mid-way raises NetworkError.
        """
        request = build(ops.SESSION_EXPORT, {"session_id": session_id})
        response = await self._send(request, stream=True)
        if response.status_code >= 400:
            raise error_from(response)
        try:
            lines = response.aiter_lines()
            try:
                first = await anext(lines)
                header = decode(m.ExportHeader, json.loads(first))
                yield AsyncExport(header.session, lines)
            except httpx.TransportError as error:
                raise network_error(error, request) from error
        finally:
            await response.aclose()

    async def session_tasks(self, session_id: str) -> list[m.Task]:
        """The tasks linked to a session."""
        result: m.SessionTasks = await self._call(
            build(ops.SESSION_TASKS, {"session_id": session_id})
        )
        return result.tasks

    # --- Tasks and workflows -----------------------------------------------------------------

    async def create_task(
        self,
        workflow: str,
        *,
        params: m.JsonObject | None = None,
        metadata: m.JsonObject | None = None,
        session_ids: Sequence[str] | None = None,
        external_id: str | None = None,
        workflow_version: int | None = None,
    ) -> m.TaskWithSessions:
        """Start a task of `workflow`: a CreatedTask (with its signal_token, shown once) when
        new; with an external_id already used, that task (safe to retry)."""
        body = given(
            workflow=workflow,
            workflow_version=workflow_version,
            params=params,
            metadata=metadata,
            session_ids=list(session_ids) if session_ids is not None else None,
            external_id=external_id,
        )
        request = build(ops.TASK_CREATE, body=body, idempotent=external_id is not None)
        result: m.TaskWithSessions = await self._call(request)
        return result

    async def list_tasks(
        self,
        *,
        workflow: str | None = None,
        state: Sequence[str] | None = None,
        step_status: Sequence[m.StepStatus] | None = None,
        session_id: str | None = None,
        external_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> m.TaskPage:
        query = {
            "workflow": workflow,
            "state": state,
            "step_status": step_status,
            "session": session_id,
            "external_id": external_id,
            "cursor": cursor,
            "limit": limit,
        }
        result: m.TaskPage = await self._call(build(ops.TASK_LIST, query=query))
        return result

    async def get_task(self, task_id: str, *, history_limit: int | None = None) -> m.TaskDetail:
        request = build(ops.TASK_READ, {"task_id": task_id}, query={"history_limit": history_limit})
        result: m.TaskDetail = await self._call(request)
        return result

    async def task_history(
        self,
        task_id: str,
        *,
        after_id: int | None = None,
        step: str | None = None,
        limit: int | None = None,
    ) -> m.HistoryPage:
        query = {"after_id": after_id, "step": step, "limit": limit}
        request = build(ops.TASK_HISTORY, {"task_id": task_id}, query=query)
        result: m.HistoryPage = await self._call(request)
        return result

    async def transition(
        self,
        task_id: str,
        to: str | None = None,
        *,
        transition: str | None = None,
        expected_version: int | None = None,
        reason: str = "",
    ) -> m.Task:
        """Move the task to state `to` (or by the named `transition`), checked against its
        workflow; with expected_version, 409 if the task changed meanwhile."""
        body = given(to=to, transition=transition, expected_version=expected_version, reason=reason)
        result: m.Task = await self._call(
            build(ops.TASK_TRANSITION, {"task_id": task_id}, body=body)
        )
        return result

    async def get_step(self, task_id: str, key: str) -> m.StepDetail:
        result: m.StepDetail = await self._call(
            build(ops.STEP_READ, {"task_id": task_id, "key": key})
        )
        return result

    async def update_step(
        self,
        task_id: str,
        key: str,
        status: Literal["running", "waiting", "succeeded", "failed", "skipped"],
        *,
        attempt: int | None = None,
        error: m.StepErrorIn | None = None,
        inputs: m.JsonObject | None = None,
        outputs: m.JsonObject | None = None,
        branch: str | None = None,
        waiting_on: m.WaitIn | None = None,
        agent: str | None = None,
        expected_version: int | None = None,
        reason: str | None = None,
    ) -> m.StepUpdate:
        """Report a step: its status and attempt, error, inputs, outputs, branch taken, or the
        signal it waits on."""
        body = given(
            status=status,
            attempt=attempt,
            error=error,
            inputs=inputs,
            outputs=outputs,
            branch=branch,
            waiting_on=waiting_on,
            agent=agent,
            expected_version=expected_version,
            reason=reason,
        )
        request = build(ops.STEP_UPDATE, {"task_id": task_id, "key": key}, body=body)
        result: m.StepUpdate = await self._call(request)
        return result

    async def signal(
        self,
        task_id: str,
        name: str,
        *,
        payload: m.JsonObject | None = None,
        error: m.StepErrorIn | None = None,
        idempotency_key: str | None = None,
    ) -> m.SignalResult:
        """An external dependency reports in; resolves the steps waiting on `name`. Sent with an
        idempotency key (a random one unless given), so a retry is recorded once."""
        body = given(
            payload=payload,
            error=error,
            idempotency_key=idempotency_key or new_key(),
        )
        request = build(
            ops.TASK_SIGNAL, {"task_id": task_id, "name": name}, body=body, idempotent=True
        )
        result: m.SignalResult = await self._call(request)
        return result

    async def task_sessions(self, task_id: str) -> list[m.TaskSession]:
        result: m.TaskSessions = await self._call(build(ops.TASK_SESSIONS, {"task_id": task_id}))
        return result.sessions

    async def link_sessions(self, task_id: str, session_ids: Sequence[str]) -> m.LinkResult:
        body: m.LinkIn = {"session_ids": list(session_ids)}
        result: m.LinkResult = await self._call(
            build(ops.TASK_LINK, {"task_id": task_id}, body=body)
        )
        return result

    async def unlink_session(self, task_id: str, session_id: str) -> m.UnlinkResult:
        request = build(ops.TASK_UNLINK, {"task_id": task_id, "session_id": session_id})
        result: m.UnlinkResult = await self._call(request)
        return result

    async def register_workflow(self, definition: m.WorkflowIn) -> m.Workflow:
        """Register a workflow (states, transitions, steps). Without a version it is the next
        one; with a version, the same definition again is the one registered (safe to retry)."""
        request = build(
            ops.WORKFLOW_REGISTER, body=definition, idempotent=definition.get("version") is not None
        )
        result: m.Workflow = await self._call(request)
        return result

    async def list_workflows(self, *, name: str | None = None) -> list[m.Workflow]:
        result: m.WorkflowList = await self._call(build(ops.WORKFLOW_LIST, query={"name": name}))
        return result.workflows

    async def get_workflow(self, name: str, *, version: int | None = None) -> m.Workflow:
        request = build(ops.WORKFLOW_READ, {"name": name}, query={"version": version})
        result: m.Workflow = await self._call(request)
        return result

    # --- Handoffs ----------------------------------------------------------------------------

    async def request_handoff(
        self,
        session_id: str,
        kind: m.HandoffKind,
        *,
        reason: str | None = None,
        payload: m.JsonObject | None = None,
        priority: m.Priority | None = None,
        due_in: int | None = None,
        idempotency_key: str | None = None,
    ) -> m.Handoff:
        """Ask for a person (the session pauses). Sent with an idempotency key (a random one
        unless given): a retry answers the request made first. An approval's payload may carry
        `action_request.args_schema`, a JSON Schema of its `args`: the dashboard then edits
        them as form fields, and edited args always satisfy it."""
        body = given(
            kind=kind,
            reason=reason,
            payload=payload,
            priority=priority,
            due_in=due_in,
            idempotency_key=idempotency_key or new_key(),
        )
        request = build(ops.HANDOFF_ASK, {"session_id": session_id}, body=body, idempotent=True)
        result: m.Handoff = await self._call(request)
        return result

    async def get_handoff(self, handoff_id: str, *, wait: int = 0) -> m.Handoff:
        """The handoff; with `wait` (seconds, at most 60), the server holds the answer until it
        has an outcome or the time is up."""
        request = build(
            ops.HANDOFF_READ,
            {"handoff_id": handoff_id},
            query={"wait": wait or None},
            timeout=self.timeout + wait,
        )
        result: m.Handoff = await self._call(request)
        return result

    async def wait_handoff(
        self, handoff_id: str, *, timeout: float | None = None, poll: int = 30
    ) -> m.Handoff:
        """Long-poll until the handoff has its outcome (answered, taken over, handed back,
        closed, cancelled, expired, ignored: see `.ignored`) or `timeout` seconds have passed
        (None: no limit); returns it as last read (check `.resolved`). Each poll waits up to
        `poll` seconds (at most 60)."""
        poll = max(1, min(poll, 60))
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = poll
            if deadline is not None:
                wait = min(poll, max(0, math.ceil(deadline - time.monotonic())))
            started = time.monotonic()
            handoff = await self.get_handoff(handoff_id, wait=wait)
            if handoff.resolved or (deadline is not None and time.monotonic() >= deadline):
                return handoff
            if time.monotonic() - started < wait / 2:
                # Answered early with no outcome (a server stopping): do not spin.
                await asyncio.sleep(min(1.0, wait / 2))

    async def cancel_handoff(self, handoff_id: str, reason: str = "") -> m.Handoff:
        """Withdraw the request (while nobody has answered)."""
        body: m.CancelIn = {"reason": reason}
        result: m.Handoff = await self._call(
            build(ops.HANDOFF_CANCEL, {"handoff_id": handoff_id}, body=body)
        )
        return result

    async def list_handoffs(
        self,
        *,
        status: Sequence[m.HandoffStatus] | None = None,
        session_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> m.HandoffPage:
        query = {"status": status, "session_id": session_id, "cursor": cursor, "limit": limit}
        result: m.HandoffPage = await self._call(build(ops.HANDOFF_LIST, query=query))
        return result

    # --- Retention and holds (admin-scoped keys) -----------------------------------------------

    async def retention_policy(self) -> m.RetentionPolicy:
        result: m.RetentionPolicy = await self._call(build(ops.RETENTION_POLICY_READ))
        return result

    async def set_retention_policy(self, policy: m.PolicyIn) -> m.RetentionPolicy:
        """Replace the policy: every field (seconds; None: never); `agents`: their overrides."""
        request = build(ops.RETENTION_POLICY_UPDATE, body=policy)
        result: m.RetentionPolicy = await self._call(request)
        return result

    async def retention_preview(self) -> m.RetentionPreview:
        """What a retention run would do now under the saved policy."""
        result: m.RetentionPreview = await self._call(build(ops.RETENTION_PREVIEW))
        return result

    async def reset_retention_policy(self) -> m.RetentionPolicy:
        """Back to the deployment's defaults (`defaults` true), agent overrides removed."""
        result: m.RetentionPolicy = await self._call(build(ops.RETENTION_POLICY_RESET))
        return result

    async def retention_runs(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> m.RetentionRuns:
        """A page of the project's retention runs, newest first (`next_cursor`: the next)."""
        query = {"cursor": cursor, "limit": limit}
        result: m.RetentionRuns = await self._call(build(ops.RETENTION_RUNS, query=query))
        return result

    async def run_retention(self) -> list[m.RetentionRun]:
        """Queue both retention jobs over the project now; the runs, `queued`. With the
        server's job queue down: Unavailable (jobs_unavailable)."""
        result: m.QueuedRuns = await self._call(build(ops.RETENTION_RUN_START))
        return result.runs

    async def list_holds(
        self,
        *,
        include_released: bool | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> m.HoldPage:
        """The project's standing legal holds (with include_released, the lifted ones too)."""
        query = {"include_released": include_released, "cursor": cursor, "limit": limit}
        result: m.HoldPage = await self._call(build(ops.HOLD_LIST, query=query))
        return result

    async def hold_session(self, session_id: str, reason: str) -> m.Hold:
        """Place a legal hold on a session: no compaction, no deletion."""
        body: m.HoldIn = {"reason": reason}
        result: m.Hold = await self._call(
            build(ops.HOLD_PLACE, {"session_id": session_id}, body=body)
        )
        return result

    async def release_hold(self, session_id: str) -> m.Hold:
        result: m.Hold = await self._call(build(ops.HOLD_RELEASE, {"session_id": session_id}))
        return result

    # --- API keys and webhook endpoints (admin-scoped keys) ----------------------------------

    async def list_api_keys(self) -> list[m.ApiKey]:
        """The project's keys, active first (never their secrets)."""
        result: m.ApiKeys = await self._call(build(ops.API_KEY_LIST))
        return result.api_keys

    async def create_api_key(
        self,
        name: str,
        *,
        scope: Literal["agent", "admin"] = "agent",
        expires_at: datetime | None = None,
    ) -> m.CreatedApiKey:
        """A new key; its secret (`key`) is in this answer only."""
        body: m.ApiKeyIn = {"name": name, "scope": scope, "expires_at": expires_at}
        result: m.CreatedApiKey = await self._call(build(ops.API_KEY_CREATE, body=body))
        return result

    async def revoke_api_key(self, key_id: int) -> m.ApiKey:
        """Revoke a key: requests with it answer 401 from now on. Not the client's own key
        (Conflict, own_key)."""
        result: m.ApiKey = await self._call(build(ops.API_KEY_REVOKE, {"key_id": str(key_id)}))
        return result

    async def list_webhooks(self) -> list[m.Webhook]:
        result: m.Webhooks = await self._call(build(ops.WEBHOOK_LIST))
        return result.webhooks

    async def create_webhook(self, url: str, events: Sequence[m.WebhookEvent]) -> m.CreatedWebhook:
        """A new endpoint; its signing secret (`secret`) is in this answer only."""
        body: m.WebhookIn = {"url": url, "events": list(events)}
        result: m.CreatedWebhook = await self._call(build(ops.WEBHOOK_CREATE, body=body))
        return result

    async def delete_webhook(self, endpoint_id: int) -> m.Webhook:
        """Delete an endpoint, with its deliveries."""
        request = build(ops.WEBHOOK_DELETE, {"endpoint_id": str(endpoint_id)})
        result: m.Webhook = await self._call(request)
        return result

    # --- Blobs -------------------------------------------------------------------------------
    #
    # Bytes stored once per session under their SHA-256, for events to name: a value sent again
    # and again (a framework's growing message list) costs its new parts only. store_blobs
    # sends only what the server lacks; store_value cuts a value into pieces first.

    async def store_blobs(self, session_id: str, contents: Sequence[bytes]) -> list[str]:
        """Store `contents` in the session; their names (SHA-256, hex), in order. What this
        client stored or found there before is not sent again; of the rest, more than
        ASK_FIRST_BYTES in all, it first asks which the session (or its ancestors) lacks. Sent
        in requests that fit the server's body limit."""
        names = [hashlib.sha256(content).hexdigest() for content in contents]
        await self._send_blobs(session_id, await self._unsent_blobs(session_id, names, contents))
        self._stored_blobs.add(session_id, names)
        return names

    async def _unsent_blobs(
        self, session_id: str, names: Sequence[str], contents: Sequence[bytes]
    ) -> list[bytes]:
        """Of `contents` (named `names`), once each, those to send: not known to this client
        as held by the session and, past ASK_FIRST_BYTES in all, not held by it (asked)."""
        known = self._stored_blobs.of(session_id)
        unsent = {
            name: content
            for name, content in zip(names, contents, strict=True)
            if name not in known
        }
        if sum(map(len, unsent.values())) > ASK_FIRST_BYTES:
            missing = set(await self.missing_blobs(session_id, list(unsent)))
            unsent = {name: content for name, content in unsent.items() if name in missing}
        return list(unsent.values())

    async def _send_blobs(self, session_id: str, contents: list[bytes]) -> None:
        """POST …/blobs, in requests that fit the server's body limit."""
        for batch in blob_batches(contents):
            body: m.BlobsIn = {"blobs": [{"data": b64encode(c).decode()} for c in batch]}
            await self._call(build(ops.BLOBS_STORE, {"session_id": session_id}, body=body))

    async def missing_blobs(self, session_id: str, names: Sequence[str]) -> list[str]:
        """Which of `names` the session and its ancestors do not hold."""
        missing: list[str] = []
        for start in range(0, len(names), LOOKUP_NAMES_PER_CALL):
            asked = list(names[start : start + LOOKUP_NAMES_PER_CALL])
            body: m.BlobLookupIn = {"sha256": asked}
            found: m.BlobLookup = await self._call(
                build(ops.BLOBS_LOOKUP, {"session_id": session_id}, body=body)
            )
            missing.extend(found.missing)
            self._stored_blobs.add(session_id, [b.sha256 for b in found.blobs])
        return missing

    async def load_blobs(self, session_id: str, names: Sequence[str]) -> list[bytes]:
        """The bytes of each of `names`, in order (as many requests as the answers' size
        budget takes). Raises NotFound naming the ones the session does not hold."""
        loaded: dict[str, bytes] = {}
        wanted = list(dict.fromkeys(names))
        while wanted:
            asked = wanted[:LOOKUP_NAMES_PER_CALL]
            request = blobs_lookup(session_id, asked)
            loaded.update(read_blobs(request, await self._send(request), asked))
            wanted = [name for name in wanted if name not in loaded]
        self._stored_blobs.add(session_id, list(loaded))  # held: not sent again
        return [loaded[name] for name in names]

    async def read_blob(self, session_id: str, sha256: str) -> bytes:
        """One blob's bytes (GET …/blobs/{sha256}: raw, no base64)."""
        request = build(ops.BLOB_READ, {"session_id": session_id, "sha256": sha256})
        response = await self._send(request)
        if response.status_code >= 400:
            raise error_from(response)
        return response.content

    async def store_value(
        self, session_id: str, data: bytes, *, piece_size: int = PIECE_SIZE
    ) -> list[str]:
        """Store a value of any size as pieces of `piece_size` bytes; the pieces' names, for an
        event to keep (load_value reads it back). A value that grew at its end since it was
        last stored sends only its last pieces again."""
        pieces = [data[i : i + piece_size] for i in range(0, len(data), piece_size)] or [b""]
        return await self.store_blobs(session_id, pieces)

    async def load_value(self, session_id: str, names: Sequence[str]) -> bytes:
        """The value store_value stored under these piece names."""
        return b"".join(await self.load_blobs(session_id, names))

    # --- Artifacts ---------------------------------------------------------------------------
    # Named, versioned files of a session (reports, screenshots, generated code): each put
    # saves the next version and an `artifact` event; a fork sees its parent's up to its fork
    # point. A put is never sent twice (it would save two versions): a broken connection
    # after it went out raises, and list_artifacts says whether it was saved.

    async def put_artifact(
        self,
        session_id: str,
        name: str,
        data: bytes,
        *,
        content_type: str = "application/octet-stream",
    ) -> m.Artifact:
        """PUT …/artifacts/{name}: save `data` as the next version of `name`."""
        request = build_upload(
            ops.ARTIFACT_PUT,
            {"session_id": session_id, "name": name},
            data,
            content_type=content_type,
        )
        result: m.Artifact = await self._call(request)
        return result

    async def get_artifact(
        self,
        session_id: str,
        name: str,
        *,
        version: int | None = None,
        at_seq: int | None = None,
    ) -> bytes:
        """The bytes of `name`'s latest version (or `version`; or as the session stood at
        `at_seq`). NotFound when the session has no such version."""
        request = build(
            ops.ARTIFACT_READ,
            {"session_id": session_id, "name": name},
            query={"version": version, "at_seq": at_seq},
        )
        response = await self._send(request)
        if response.status_code >= 400:
            raise error_from(response)
        return response.content

    async def list_artifacts(
        self, session_id: str, *, at_seq: int | None = None
    ) -> list[m.ArtifactVersions]:
        """The session's artifacts by name, each with its stored versions (at `at_seq`)."""
        request = build(ops.ARTIFACT_LIST, {"session_id": session_id}, query={"at_seq": at_seq})
        result: m.Artifacts = await self._call(request)
        return result.artifacts

    async def delete_artifact(
        self, session_id: str, name: str, *, version: int | None = None
    ) -> list[int]:
        """Delete one version of `name` (or all of them); the versions deleted."""
        request = build(
            ops.ARTIFACT_DELETE,
            {"session_id": session_id, "name": name},
            query={"version": version},
        )
        result: m.DeletedArtifacts = await self._call(request)
        return result.versions

    async def export_artifacts(self, session_id: str) -> bytes:
        """Every stored version as a tar archive (`<name>/v<version>`, then manifest.json),
        read whole: for a large one, GET …/export/artifacts streamed to a file instead."""
        request = build(ops.ARTIFACTS_EXPORT, {"session_id": session_id})
        response = await self._send(request)
        if response.status_code >= 400:
            raise error_from(response)
        return response.content


def _metadata_value(value: str | int | float | bool | None) -> str:
    """A metadata filter's value as the query spells it: JSON for true, false, null."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return str(value)
