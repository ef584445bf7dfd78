"""The MCP server's tools, on the official SDK's MCPServer (FastMCP before mcp 2).

Three tools, each acting on a session named by the caller (its external id, prefixed by the
server's namespace, opened for the server's agent on first use):

- `ask_person`: a handoff (question, approval or takeover) in the project's queue, waited for
  by long-poll, the person's answer returned as structured content;
- `record_event`: one event appended to the session's log;
- `read_state`: the session's working state and facts.

A failure of the API (a refused argument, a wrong key, a session in the wrong state) is the
tool's error (`isError`) with the API's code and message; the server keeps serving.
"""

import contextlib
import dataclasses
import inspect
import json
import math
import time
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal, cast, get_args

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from .. import models as m
from .._adapters import async_client, namespaced, session_reference
from .._async_client import AsyncClient
from .._sync_client import Client
from .._version import __version__
from ..errors import Conflict, SwitchboardError

# The agent the server's sessions belong to unless told otherwise (`--agent`).
DEFAULT_AGENT = "mcp"
# Seconds each long-poll waits (the API allows 60); a progress notification follows each.
DEFAULT_POLL = 15
# A handoff's reason (the queue's one-line summary) holds at most this many characters.
MAX_REASON = 1000
# Seconds between reads while a take-over is in progress (its long-poll does not wait).
TAKEOVER_POLL = 5.0
# Statuses in which the person has not finished: still asked, claimed, or holding the
# conversation (a take-over ends when it is handed back or closed).
WAITING_STATUSES = frozenset({"open", "claimed", "taken_over"})

SessionName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="The session to act on: your own name for it (an external id), opened on "
        "first use; use the same name for one conversation or task. `switchboard:<session "
        "id>` (as a session or fork page in the dashboard shows it) is that session itself.",
    ),
]


Outcome = Literal[
    "answered",
    "approved",
    "rejected",
    "ignored",
    "handed_back",
    "closed",
    "cancelled",
    "expired",
    "timed_out",
]


class PersonAnswer(BaseModel):
    """What became of a question to a person."""

    outcome: Outcome = Field(
        description="answered: a question's text (and choice); approved: the action may run, "
        "with `args` (edited when `edited`); rejected: it may not (`reason`, or the person's "
        "`text`); ignored: the person dismissed the request without a verdict (go on without "
        "the action); handed_back: a take-over ended and the session is the agent's again "
        "(`messages` the person wrote meanwhile); closed: the person closed the session; "
        "cancelled / expired: nobody answered; timed_out: no answer within timeout_seconds "
        "(the request was withdrawn unless the person holds the session)."
    )
    handoff_id: str
    status: str = Field(description="The handoff's status in Switchboard.")
    text: str | None = None
    choice: str | None = None
    action: str | None = None
    args: dict[str, Any] | None = None
    edited: bool = False
    reason: str | None = None
    by: str | None = Field(default=None, description="The person who answered.")
    messages: list[str] = Field(
        default_factory=list, description="What the person wrote in the conversation."
    )


class RecordedEvent(BaseModel):
    seq: int = Field(description="The event's position in the session's log.")
    head_seq: int
    session_id: str


class SessionState(BaseModel):
    session_id: str
    seq: int = Field(description="The log position the state is read at.")
    state: dict[str, Any] = Field(description="The working state (JSON merge patches applied).")
    facts: dict[str, Any] = Field(description="Each fact's latest value.")
    summary: str


def build_server(
    client: Client | AsyncClient | None = None,
    *,
    namespace: str = "",
    agent: str = DEFAULT_AGENT,
    poll: int = DEFAULT_POLL,
) -> MCPServer[Any]:
    """The MCP server. `client`: a Client or AsyncClient (the tools talk through an AsyncClient
    on the same URL and key), or None for one made from SWITCHBOARD_URL and
    SWITCHBOARD_API_KEY; `namespace` prefixes every session name a caller gives; `agent` is
    the agent the sessions are opened for; `poll`: seconds per long-poll while waiting for a
    person (a progress notification after each)."""
    tools = _Tools(async_client(client), namespace=namespace, agent=agent, poll=poll)
    server: MCPServer[Any] = MCPServer(
        "switchboard",
        version=__version__,
        instructions="Ask a person (question, approval, take-over) through Switchboard's "
        "handoff queue, record events in a session's log and read its state.",
    )
    for tool in (tools.ask_person, tools.record_event, tools.read_state):
        described = inspect.cleandoc(tool.__doc__ or "")
        server.tool(name=tool.__name__, description=described, structured_output=True)(tool)
    return server


class _Tools:
    def __init__(self, client: AsyncClient, *, namespace: str, agent: str, poll: int) -> None:
        self.client = client
        self.namespace = namespace
        self.agent = agent
        self.poll = max(1, min(poll, 60))
        # Session name -> Switchboard id, once opened (opening by external id is idempotent).
        self._sessions: dict[str, str] = {}

    async def _session_id(self, name: str) -> str:
        known = self._sessions.get(name) or session_reference(name)
        if known is None:
            opened = await self.client.open_session(
                self.agent, external_id=namespaced(self.namespace, name)
            )
            known = self._sessions[name] = opened.id
        return known

    async def ask_person(
        self,
        session: SessionName,
        kind: Annotated[
            Literal["question", "approval", "takeover"],
            Field(
                description="question: the person answers `prompt` in words (or picks one of "
                "`choices`); approval: the person approves `action` with `args` (perhaps "
                "edited) or rejects it; takeover: the person takes the conversation over and "
                "hands it back."
            ),
        ],
        prompt: Annotated[
            str,
            Field(
                min_length=1,
                max_length=20_000,
                description="What the person reads: the question, what the action does and "
                "why, or why a person should take over.",
            ),
        ],
        ctx: Context[Any, Any],
        choices: Annotated[
            list[str] | None,
            Field(description="question only: the answers the person may pick from."),
        ] = None,
        action: Annotated[
            str | None, Field(description="approval only (required): the action's name.")
        ] = None,
        args: Annotated[
            dict[str, Any] | None,
            Field(description="approval only: the action's arguments, which the person may edit."),
        ] = None,
        priority: Literal["low", "normal", "high", "urgent"] | None = None,
        timeout_seconds: Annotated[
            float | None,
            Field(
                gt=0,
                le=30 * 24 * 3600,
                description="Give up after this many seconds without an answer (outcome "
                "timed_out); none: wait until the person answers or the handoff expires.",
            ),
        ] = None,
    ) -> PersonAnswer:
        """Ask a person in Switchboard's handoff queue and wait for the answer. The session
        pauses until the person answers. Blocks until then (progress notifications while
        waiting); if the call is cancelled, the request is withdrawn from the queue."""
        payload = _payload(kind, prompt, choices, action, args)
        with _api_errors():
            sid = await self._session_id(session)
            # Where the log stood: what the person writes during a take-over comes after.
            before = (await self.client.events(sid, order="desc", limit=1)).head_seq
            handoff = await self.client.request_handoff(
                sid, kind, reason=_reason(prompt), payload=payload, priority=priority
            )
            try:
                handoff = await self._wait(handoff, ctx, timeout_seconds)
            except anyio.get_cancelled_exc_class():
                # Nobody is left to read the answer: withdraw the request, so no person works
                # on it and the session is the agent's again (a take-over in progress stays).
                with anyio.CancelScope(shield=True), contextlib.suppress(SwitchboardError):
                    await self.client.cancel_handoff(
                        handoff.id, "the MCP client cancelled the call"
                    )
                raise
            timed_out = handoff.status in WAITING_STATUSES
            if timed_out:
                handoff = await self._give_up(handoff, timeout_seconds)
            if handoff.status == "answered":
                # The answer is the agent's to act on: the session is writable again.
                with contextlib.suppress(Conflict):
                    await self.client.resume_session(sid, "answered in the handoff queue")
            messages: list[str] = []
            if handoff.status in ("handed_back", "closed", "taken_over"):
                messages = await self._human_messages(sid, handoff.id, before)
        return _answer(handoff, messages, timed_out=timed_out)

    async def _wait(
        self, handoff: m.Handoff, ctx: Context[Any, Any], timeout: float | None
    ) -> m.Handoff:
        """Long-poll until the person is done (a take-over counts as not yet) or `timeout`."""
        began = time.monotonic()
        deadline = None if timeout is None else began + timeout
        while handoff.status in WAITING_STATUSES:
            wait = self.poll
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                wait = min(wait, max(1, math.ceil(left)))
            polled = time.monotonic()
            handoff = await self.client.get_handoff(handoff.id, wait=wait)
            await ctx.report_progress(
                time.monotonic() - began,
                timeout,
                f"Waiting for a person: handoff {handoff.id} is {handoff.status}.",
            )
            early = wait - (time.monotonic() - polled)
            if handoff.status in WAITING_STATUSES and early > wait / 2:
                # Answered early with nothing new (the long-poll returns at once during a
                # take-over, or from a server stopping): at most a request every few seconds.
                await anyio.sleep(min(early, TAKEOVER_POLL))
        return handoff

    async def _give_up(self, handoff: m.Handoff, timeout: float | None) -> m.Handoff:
        """No outcome in time: withdraw the request (unless answered meanwhile)."""
        try:
            return await self.client.cancel_handoff(
                handoff.id, f"no answer within {timeout:g} s" if timeout else "no answer"
            )
        except Conflict:
            # Answered just now, or taken over (which cannot be withdrawn): as it is.
            return await self.client.get_handoff(handoff.id)

    async def _human_messages(self, sid: str, handoff_id: str, after_seq: int) -> list[str]:
        texts = []
        async for event in self.client.iter_events(sid, after_seq=after_seq, kind=["message"]):
            content = event.content
            if event.role == "human" and content.get("handoff_id") == handoff_id:
                texts.append(str(content.get("text", "")))
        return texts

    async def record_event(
        self,
        session: SessionName,
        kind: Annotated[
            Literal[
                "message", "tool_call", "tool_result", "note", "error", "state", "fact", "decision"
            ],
            Field(
                description="message (with role), tool_call, tool_result, note, error, "
                "state (content is a JSON merge patch of the working state), fact (content "
                '{"key", "value"}), decision.'
            ),
        ],
        content: Annotated[
            dict[str, Any] | str,
            Field(description='A JSON object; a string is stored as {"text": ...}.'),
        ],
        tier: Annotated[
            Literal["transient", "durable"] | None,
            Field(
                description="transient (compactible) or durable (survives compaction); "
                "default: the kind's."
            ),
        ] = None,
        role: Annotated[
            str | None, Field(description="A message's role: user, assistant, tool...")
        ] = None,
    ) -> RecordedEvent:
        """Append one event to the session's log (what operators read on its page)."""
        event: m.EventIn = {
            "kind": kind,
            "content": {"text": content} if isinstance(content, str) else content,
        }
        if tier is not None:
            event["tier"] = tier
        if role is not None:
            event["role"] = role
        with _api_errors():
            sid = await self._session_id(session)
            result = await self.client.append(sid, [event])
        return RecordedEvent(seq=result.events[0].seq, head_seq=result.head_seq, session_id=sid)

    async def read_state(
        self,
        session: SessionName,
        at_seq: Annotated[
            int | None, Field(ge=0, description="Read as it was at this seq (default: now).")
        ] = None,
    ) -> SessionState:
        """The session's working state, facts and summary."""
        with _api_errors():
            sid = await self._session_id(session)
            state = await self.client.state(sid, at_seq=at_seq)
        return SessionState(
            session_id=sid,
            seq=state.seq,
            state=state.state,
            facts={key: _plain(fact.value) for key, fact in state.facts.items()},
            summary=state.summary,
        )


@contextlib.contextmanager
def _api_errors() -> Iterator[None]:
    """A failure of the API as the tool's error, with the API's status, code and message."""
    try:
        yield
    except SwitchboardError as error:
        raise ToolError(f"Switchboard refused: {error}{_detail(error)}") from error


def _detail(error: SwitchboardError) -> str:
    detail = error.detail
    return f" {json.dumps(detail, default=str)}" if detail else ""


def _reason(prompt: str) -> str:
    line = prompt.strip().splitlines()[0] if prompt.strip() else prompt
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 1] + "…"


def _payload(
    kind: str,
    prompt: str,
    choices: list[str] | None,
    action: str | None,
    args: dict[str, Any] | None,
) -> m.JsonObject:
    if kind != "question" and choices is not None:
        raise ToolError("`choices` go with kind question only.")
    if kind != "approval" and (action is not None or args is not None):
        raise ToolError("`action` and `args` go with kind approval only.")
    if kind == "question":
        question: m.JsonObject = {"question": prompt}
        if choices is not None:
            question["choices"] = choices
        return question
    if kind == "approval":
        if not action:
            raise ToolError("An approval needs `action`: the name of what the person approves.")
        return {
            "action_request": {"action": action, "args": args or {}},
            "config": {
                "allow_accept": True,
                "allow_edit": True,
                "allow_respond": True,
                "allow_ignore": True,
            },
            "description": prompt,
        }
    return {"description": prompt}


def _answer(handoff: m.Handoff, messages: list[str], *, timed_out: bool) -> PersonAnswer:
    answer = handoff.answer or {}
    fields: dict[str, Any] = {
        "handoff_id": handoff.id,
        "status": handoff.status,
        "by": answer.get("by"),
        "messages": messages,
    }
    kind = answer.get("type")
    outcome: Outcome
    # The answer decides, even when the person went on to hand back or close the session.
    if kind == "respond" and handoff.kind == "question":
        outcome = "answered"
        fields |= {"text": answer.get("text"), "choice": answer.get("choice")}
    elif kind in ("accept", "edit"):
        outcome = "approved"
        edited = kind == "edit"
        fields |= {"action": answer.get("action"), "args": answer.get("args"), "edited": edited}
    elif kind == "ignore":
        outcome = "ignored"
    elif kind in ("reject", "respond"):
        # Refused, or words instead of a decision: either way the action is not approved.
        outcome = "rejected"
        fields |= {"reason": answer.get("reason") or None, "text": answer.get("text")}
    elif timed_out:
        # Withdrawn by this server (status cancelled), or still held in a take-over.
        outcome = "timed_out"
    else:
        # handed_back, closed, cancelled, expired: the status names the outcome (a status this
        # version does not know ended without an answer, as a cancellation does).
        known = handoff.status in get_args(Outcome)
        outcome = cast(Outcome, handoff.status) if known else "cancelled"
    return PersonAnswer(outcome=outcome, **fields)


def _plain(value: Any) -> Any:
    """`value` as JSON: dataclasses as objects, datetimes as ISO text, decimals as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
