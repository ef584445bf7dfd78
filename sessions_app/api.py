"""Session endpoints of the agent API: parse, authorise, call a service, render.

Opening a session (it may link tasks) and reading one (it shows its tasks) are composed with
the tasks app in switchboard.api; everything else about sessions is here.
"""

import base64
import binascii
import json
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal
from uuid import UUID

from django.conf import settings
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from ninja import Field, Query, Router
from ninja.errors import ValidationError
from pydantic import ConfigDict

from core.actors import Actor
from core.errors import InvalidInput, PayloadTooLarge, StoredValueTooDeep
from core.http import json_response
from core.models import ApiKey
from core.schemas import (
    DECIMAL_PLACES,
    MAX_BIGINT,
    MAX_INT,
    DecimalString,
    ErrorBody,
    InSchema,
    IsoDateTime,
    OutSchema,
    decimal_in,
    json_int,
    responses,
)
from core.text import check_storable

from .access import get_session_for_key
from .http import jsonl_export_response
from .models import AGENT_KINDS, EventKind, Session, SessionStatus, Tier
from .queries import slice_events
from .services.blobs import MAX_BLOBS_PER_CALL
from .services.events import EventDraft, append_events
from .services.lifecycle import close_session, pause_session, resume_session
from .services.sessions import open_fork
from .services.state import FoldedState, state_at, take_snapshot

router = Router(tags=["sessions"])

# Decimal columns: events.cost numeric(12, 6), sessions.budget_max_cost numeric(14, 6).
EventCost = decimal_in(12 - DECIMAL_PLACES)
BudgetCost = decimal_in(14 - DECIMAL_PLACES)


def request_key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined,no-any-return]


# --- Schemas --------------------------------------------------------------------------------


class BudgetIn(InSchema):
    max_tokens: json_int(ge=0, le=MAX_BIGINT) | None = None
    max_cost: BudgetCost | None = None


class SessionIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "agent": "support-bot",
                    "external_id": "ticket-4812",
                    "title": "Refund request",
                    "metadata": {"channel": "email"},
                    "budget": {"max_tokens": 200000, "max_cost": "5.00"},
                }
            ]
        }
    )

    agent: str = Field(..., min_length=1, max_length=100)
    external_id: str | None = Field(None, min_length=1, max_length=200)
    title: str = Field("", max_length=300)
    metadata: dict[str, Any] = Field(default_factory=dict)
    budget: BudgetIn | None = None
    task_ids: list[UUID] = Field(default_factory=list, max_length=100)


class EventIn(InSchema):
    # Checked by the append service (after the session is found: an unknown session is a 404
    # whatever its events), so the schema lists the kinds and the parser takes any string.
    kind: str = Field(
        ...,
        json_schema_extra={"enum": sorted(AGENT_KINDS)},
        description="lifecycle and handoff events are written by the system only",
    )
    tier: Literal["transient", "durable"] | None = None
    role: str = Field("", max_length=16)
    content: dict[str, Any] = Field(default_factory=dict)
    tokens: json_int(ge=0, le=MAX_INT) = 0
    cost: EventCost = Decimal("0")
    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="A key already used in the session's log (a fork's includes its parent's "
        "prefix) answers the event written with it (replayed) and writes nothing, when this "
        "event repeats it (kind, tier, role, content, tokens, cost); otherwise 409 "
        "idempotency_key_reused, with the original's seq.",
    )


class BlobIn(InSchema):
    data: str = Field(..., description="The bytes, base64 (RFC 4648, standard alphabet, padded)")


def decoded_blobs(blobs: list[BlobIn]) -> list[bytes]:
    """The bytes of `blobs`; InvalidInput naming the first that is not base64."""
    contents = []
    for position, blob in enumerate(blobs):
        try:
            contents.append(base64.b64decode(blob.data, validate=True))
        except (binascii.Error, ValueError):
            raise InvalidInput(
                "Blob data must be base64 (standard alphabet, padded).",
                detail={"field": f"blobs[{position}].data"},
            ) from None
    return contents


class AppendIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "events": [
                        {
                            "kind": "message",
                            "role": "user",
                            "content": {"text": "Where is my refund?"},
                            "tokens": 12,
                            "cost": "0.000150",
                            "idempotency_key": "msg-0001",
                        },
                        {"kind": "state", "content": {"stage": "triage"}},
                        {"kind": "fact", "content": {"key": "order_id", "value": "A-1001"}},
                        {
                            "kind": "decision",
                            "content": {"decision": "refund", "rationale": "late delivery"},
                        },
                    ]
                }
            ]
        }
    )

    events: list[EventIn] = Field(..., min_length=1)
    expected_head_seq: json_int(ge=0, le=MAX_INT) | None = None
    blobs: list[BlobIn] = Field(
        default_factory=list,
        max_length=MAX_BLOBS_PER_CALL,
        description="Blobs the events name (as POST /sessions/{session_id}/blobs stores them), "
        "stored with the events: both or neither. A batch that is all replays stores any the "
        "session lacks.",
    )


class ReasonIn(InSchema):
    model_config = ConfigDict(json_schema_extra={"examples": [{"reason": "waiting on the user"}]})

    reason: str = Field("", max_length=1000)


class ForkIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "at_seq": 1,
                    "external_id": "ticket-4812-retry-1",
                    "title": "retry",
                    "metadata": {"attempt": 2},
                }
            ]
        }
    )

    at_seq: json_int(ge=0, le=MAX_INT)
    external_id: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The fork's own external_id (unique in the project, as a session's). The "
        "same fork asked for again (this parent, this at_seq) answers the fork made first, 200; "
        "an external_id held by any other session is 409 external_id_taken.",
    )
    title: str = Field("", max_length=300, description='default "Fork of <parent title>"')
    metadata: dict[str, Any] | None = Field(
        None, description="the fork's metadata; omitted, a copy of the parent's"
    )


ExternalId = Annotated[str, Field(min_length=1, max_length=200)]
# GET /sessions?external_id=…: the most ids one look-up takes (an ADK session, its app's and
# its user's shared state are three).
MAX_EXTERNAL_ID_LOOKUPS = 20
# GET /sessions?include=events: the most events per listed session.
MAX_LISTED_EVENTS = 200


class SessionListQuery(InSchema):
    status: list[SessionStatus] | None = None
    agent: str | None = None
    q: str | None = Field(None, min_length=1, max_length=200)
    metadata_key: str | None = None
    created_after: IsoDateTime | None = None
    created_before: IsoDateTime | None = None
    updated_after: IsoDateTime | None = None
    updated_before: IsoDateTime | None = None
    external_id: list[ExternalId] | None = Field(
        None,
        max_length=MAX_EXTERNAL_ID_LOOKUPS,
        description="The sessions with one of these external_ids (repeat the parameter: "
        f"external_id=a&external_id=b, at most {MAX_EXTERNAL_ID_LOOKUPS}), or an empty page: "
        "a look-up that never opens one (POST /sessions does).",
    )
    has_pending_handoff: bool | None = Field(
        None,
        description="true: only sessions waiting on a person (a handoff open, claimed, "
        "answered or taken over); false: only the others.",
    )
    include: list[Literal["state", "events"]] | None = Field(
        None,
        description="state: each session also carries `state`, `facts` and `state_error` "
        "(its working state at its head, as GET /sessions/{id}/state). events: each session "
        "also carries `events`, the last `events_limit` events of its log, oldest first, and "
        "`events_has_more` (as GET /sessions/{id}/events?order=desc&limit=…, reversed). "
        "Repeatable: include=state&include=events.",
    )
    events_limit: int = Field(
        50, ge=1, le=MAX_LISTED_EVENTS, description="with include=events: events per session"
    )
    cursor: str | None = None
    limit: int = Field(50, ge=1, le=200)


# GET /sessions?metadata.<name>=<value>: names are the client's, so not a schema's fields.
METADATA_PREFIX = "metadata."
MAX_METADATA_FILTERS = 20
MAX_METADATA_NAME = 200
MAX_METADATA_VALUE = 1000
METADATA_FILTERS_DOC = (
    "`metadata.<name>=<value>` (any number, ANDed; repeated, each value must hold): sessions "
    "whose metadata has the top-level key `<name>` holding the JSON string `<value>`, or, "
    "when `<value>` spells a JSON number, `true`, `false` or `null`, that value too "
    '(`metadata.priority=3` matches 3 and "3", `metadata.vip=true` matches true and '
    '"true"). Exact: no nested keys (a dot in `<name>` is part of the key), no patterns. '
    f"At most {MAX_METADATA_FILTERS}, names up to {MAX_METADATA_NAME} characters, values up "
    f"to {MAX_METADATA_VALUE}."
)


def metadata_filters(query: QueryDict) -> list[tuple[str, str]]:
    """The (name, value) pairs of a query's `metadata.<name>=<value>` parameters, checked:
    a 422 naming the parameter (as a declared one's) for an empty or long name or value."""
    pairs: list[tuple[str, str]] = []
    problems: list[dict[str, Any]] = []
    for parameter, values in query.lists():
        if not parameter.startswith(METADATA_PREFIX):
            continue
        name = parameter.removeprefix(METADATA_PREFIX)
        if not 1 <= len(name) <= MAX_METADATA_NAME:
            problems.append(
                {
                    "type": "string_too_short" if not name else "string_too_long",
                    "loc": ["query", parameter],
                    "msg": f"The name after {METADATA_PREFIX!r} must have 1 to "
                    f"{MAX_METADATA_NAME} characters.",
                }
            )
        for value in values:
            if len(value) > MAX_METADATA_VALUE:
                problems.append(
                    {
                        "type": "string_too_long",
                        "loc": ["query", parameter],
                        "msg": f"String should have at most {MAX_METADATA_VALUE} characters",
                    }
                )
            check_storable({parameter: value}, field="")  # NUL, lone surrogates: 422
            pairs.append((name, value))
    if len(pairs) > MAX_METADATA_FILTERS:
        problems.append(
            {
                "type": "too_long",
                "loc": ["query", METADATA_PREFIX],
                "msg": f"At most {MAX_METADATA_FILTERS} metadata filters.",
            }
        )
    if problems:
        raise ValidationError(problems)
    return pairs


IdempotencyKey = Annotated[str, Field(min_length=1, max_length=200)]


class SliceQuery(InSchema):
    after_seq: int | None = Field(None, ge=0, le=MAX_INT)
    before_seq: int | None = Field(None, ge=1, le=MAX_INT)
    limit: int = Field(100, ge=1, le=1000)
    kind: list[EventKind] | None = None
    tier: Tier | None = None
    order: Literal["asc", "desc"] = "asc"
    key: list[IdempotencyKey] | None = Field(
        None,
        max_length=100,
        description="Only the events with one of these idempotency keys (repeat the parameter: "
        "key=a&key=b, at most 100). With after_seq, before_seq, kind, tier, order and limit as "
        "for any slice; a fork's include its ancestors' events up to the fork point.",
    )
    key_prefix: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Only the events whose idempotency key starts with this (taken literally: "
        "% and _ are no wildcards). Not with `key`.",
    )


# --- Response schemas -----------------------------------------------------------------------
# What the endpoints below send. Most bodies are rendered by hand (session_to_dict, the spliced
# slice) for speed; these describe those bytes exactly, and tests/api check that they do.


class UsageOut(OutSchema):
    tokens: int
    cost: DecimalString


class BudgetOut(OutSchema):
    max_tokens: int | None
    max_cost: DecimalString | None


class AncestorOut(OutSchema):
    session_id: UUID
    upto_seq: int = Field(..., description="this ancestor's events up to here are in the log")


class LineageOut(OutSchema):
    parent_id: UUID | None
    fork_seq: int | None
    ancestry: list[AncestorOut]


class SessionOut(OutSchema):
    id: UUID
    external_id: str | None
    title: str
    agent: str
    status: SessionStatus
    metadata: dict[str, Any]
    head_seq: int
    usage: UsageOut
    budget: BudgetOut
    lineage: LineageOut
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None


class EventOut(OutSchema):
    """One event as the slice and the export send it (storage._EVENT_LINE, key for key)."""

    seq: int
    kind: EventKind
    tier: Tier
    role: str
    tokens: int
    cost: DecimalString
    actor: str
    idempotency_key: str | None
    created_at: datetime
    session_id: UUID = Field(
        ..., description="the session whose log holds it: an ancestor's, in a fork's prefix"
    )
    content: dict[str, Any]


class FactOut(OutSchema):
    value: Any
    seq: int = Field(..., description="the event that set it")


class SessionListItemOut(SessionOut):
    """A session of the list. `state`, `facts` and `state_error` are sent with include=state
    only, `events` and `events_has_more` with include=events only."""

    state: dict[str, Any] | None = Field(
        None,
        description="include=state: the working state at head_seq (as GET "
        "/sessions/{id}/state); null when it cannot be read (see state_error)",
    )
    facts: dict[str, FactOut] | None = Field(
        None, description="include=state: the facts at head_seq; null with state_error"
    )
    state_error: ErrorBody | None = Field(
        None,
        description="include=state: null, or why state and facts are null (code "
        "stored_value_too_deep, GET /sessions/{id}/state's 409); the other sessions are read",
    )
    events: list[EventOut] | None = Field(
        None,
        description="include=events: the last events_limit events of the session's log, "
        "oldest first (a fork's include its parent's prefix; the transient events of a "
        "compacted range are gone, as in GET /sessions/{id}/events, whose `compacted` names "
        "the ranges)",
    )
    events_has_more: bool | None = Field(
        None, description="include=events: older events than these exist"
    )


class SessionPageOut(OutSchema):
    sessions: list[SessionListItemOut]
    next_cursor: str | None = Field(..., description="null on the last page")


class AppendedEventOut(OutSchema):
    seq: int
    kind: EventKind
    tier: Tier
    created_at: datetime
    replayed: bool = Field(..., description="written before, by a request with its idempotency_key")


class AppendOut(OutSchema):
    head_seq: int
    status: SessionStatus
    events: list[AppendedEventOut] = Field(..., description="in request order")


# An export's header line (queries.export_header), documented inline: nothing declares it.
EXPORT_HEADER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["session"],
    "properties": {
        "session": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "id",
                "title",
                "agent",
                "parent_id",
                "fork_seq",
                "status",
                "head_seq",
                "usage",
            ],
            "properties": {
                "id": {"type": "string", "format": "uuid"},
                "title": {"type": "string"},
                "agent": {"type": "string", "description": "the agent's name"},
                "parent_id": {"type": ["string", "null"], "format": "uuid"},
                "fork_seq": {"type": ["integer", "null"]},
                "status": {"type": "string", "enum": [choice.value for choice in SessionStatus]},
                "head_seq": {"type": "integer", "description": "the last event exported"},
                "usage": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["tokens", "cost"],
                    "properties": {
                        "tokens": {"type": "integer"},
                        "cost": {"type": "string", "description": "a decimal"},
                    },
                },
            },
        }
    },
}


class CompactedRangeOut(OutSchema):
    session_id: str = Field(..., description="whose log (the session's, or an ancestor's)")
    after_seq: int
    through_seq: int = Field(..., description="state here is the compaction snapshot")
    compaction_id: str | None
    summary: str


class EventSliceOut(OutSchema):
    head_seq: int
    has_more: bool
    compacted: list[CompactedRangeOut] = Field(
        ...,
        description="Compacted ranges the slice meets: their transient events were removed "
        "(durable ones remain), summarised in `summary`.",
    )
    compaction_mark: int = Field(
        ...,
        description="How many positions of the whole history are compacted: every compaction "
        "that removes events from this history raises it. A reader that keeps events between "
        "reads and reads on with after_seq compares it: a change means some it keeps are gone.",
    )
    events: list[EventOut]


class StateOut(OutSchema):
    seq: int
    state: dict[str, Any]
    facts: dict[str, FactOut]
    summary: str
    content_hash: str


class SnapshotOut(OutSchema):
    seq: int
    content_hash: str
    created_at: datetime


# --- Rendering ------------------------------------------------------------------------------


def session_to_dict(
    session: Session, *, tasks: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    body = {
        "id": str(session.pk),
        "external_id": session.external_id,
        "title": session.title,
        "agent": session.agent.name,
        "status": session.status,
        "metadata": session.metadata,
        "head_seq": session.head_seq,
        "usage": {"tokens": session.tokens_used, "cost": str(session.cost_used)},
        "budget": {
            "max_tokens": session.budget_max_tokens,
            "max_cost": None if session.budget_max_cost is None else str(session.budget_max_cost),
        },
        "lineage": {
            "parent_id": str(session.parent_id) if session.parent_id else None,
            "fork_seq": session.fork_seq,
            "ancestry": [{"session_id": sid, "upto_seq": upto} for sid, upto in session.ancestry],
        },
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
        "closed_at": session.closed_at.isoformat() if session.closed_at else None,
    }
    if tasks is not None:
        body["tasks"] = tasks
    return body


def head_state_fields(folded: FoldedState | StoredValueTooDeep) -> dict[str, Any]:
    """A list item's include=state keys (SessionListItemOut) from services.state.head_states."""
    if isinstance(folded, StoredValueTooDeep):
        error = {"code": folded.code, "message": folded.message, "detail": folded.detail}
        return {"state": None, "facts": None, "state_error": error}
    return {"state": folded.state, "facts": folded.facts, "state_error": None}


def request_session(request: HttpRequest, session_id: UUID) -> Session:
    return get_session_for_key(request_key(request), session_id)


# --- Endpoints ------------------------------------------------------------------------------


@router.post(
    "/sessions/{session_id}/events",
    summary="Append a batch of events",
    response=responses({201: AppendOut, 200: AppendOut}, 404, 409, body=True),
    openapi_extra={
        "responses": {200: {"description": "All were replays (and blobs held): nothing written"}}
    },
)
def append(request: HttpRequest, session_id: UUID, payload: AppendIn) -> HttpResponse:
    if len(payload.events) > settings.SWITCHBOARD_MAX_BATCH_EVENTS:
        raise PayloadTooLarge(
            f"A batch holds at most {settings.SWITCHBOARD_MAX_BATCH_EVENTS} events.",
            detail={"limit": settings.SWITCHBOARD_MAX_BATCH_EVENTS, "size": len(payload.events)},
        )
    api_key = request_key(request)
    drafts = [
        EventDraft(
            kind=e.kind,
            content=e.content,
            tier=e.tier,
            role=e.role,
            tokens=e.tokens,
            cost=e.cost,
            idempotency_key=e.idempotency_key,
        )
        for e in payload.events
    ]
    contents: list[bytes] = []
    if payload.blobs or any(d.idempotency_key is not None for d in drafts):
        # Replays read the session's earlier events, and blobs its ancestors' blobs (held
        # there, they are not stored again): check the session is the key's first.
        session = get_session_for_key(api_key, session_id)
        contents = decoded_blobs(payload.blobs)
    else:
        # The hot path reads nothing first: the append's UPDATE is scoped to the key's project
        # and a session it cannot update is explained (404/409) as before (services.events).
        session = Session(pk=session_id, project_id=api_key.project_id)
    try:
        result = append_events(
            session,
            drafts,
            actor=Actor.for_key(api_key),
            expected_head_seq=payload.expected_head_seq,
            blobs=contents,
        )
    except InvalidInput:
        get_session_for_key(api_key, session_id)  # an unknown session is a 404 first
        raise
    body = {
        "head_seq": result.head_seq,
        "status": session.status,
        "events": [
            {
                "seq": event.seq,
                "kind": event.kind,
                "tier": event.tier,
                "created_at": event.created_at.isoformat(),
                "replayed": position in result.replayed,
            }
            for position, event in enumerate(result.events)
        ],
    }
    unchanged = len(result.replayed) == len(result.events) and not any(
        b.created for b in result.blobs
    )
    return json_response(body, status=200 if unchanged else 201)


@router.get(
    "/sessions/{session_id}/events",
    summary="A slice of the log, by position or by idempotency key",
    description="Events with after_seq < seq < before_seq, oldest first (order=desc: newest "
    "first), at most `limit`; `kind` and `tier` filter them. `key` (repeatable) or "
    "`key_prefix` keeps only the events written with those idempotency keys, in the same "
    "window and order (page with after_seq, as any slice). A fork's log includes its parent's "
    "prefix, and its keys.",
    response=responses({200: EventSliceOut}, 404),
)
def list_events(request: HttpRequest, session_id: UUID, params: Query[SliceQuery]) -> HttpResponse:
    session = get_session_for_key(request_key(request), session_id)  # one fixed statement
    page = slice_events(
        session,
        after_seq=params.after_seq,
        before_seq=params.before_seq,
        limit=params.limit,
        kinds=[str(k) for k in params.kind] if params.kind else None,
        tier=str(params.tier) if params.tier else None,
        newest_first=params.order == "desc",
        as_json=True,  # each event's JSON made by the database, its content as stored
        keys=params.key,
        key_prefix=params.key_prefix,
    )
    events = ",".join(page.lines)
    has_more = json.dumps(page.has_more)
    compacted = json.dumps(page.compacted, ensure_ascii=False, separators=(",", ":"))
    body = (
        f'{{"head_seq":{page.head_seq},"has_more":{has_more},"compacted":{compacted},'
        f'"compaction_mark":{page.compaction_mark},"events":[{events}]}}'
    )
    return HttpResponse(body, content_type="application/json")


@router.get(
    "/sessions/{session_id}/state",
    summary="Working state, facts and summary at a seq",
    # 409 stored_value_too_deep: the fold passes a value stored, before nesting was bounded,
    # deeper than the readers walk (core.text.loads_stored).
    response=responses({200: StateOut}, 404, 409, 410),
)
def read_state(request: HttpRequest, session_id: UUID, at_seq: int | None = None) -> HttpResponse:
    session = request_session(request, session_id)
    return json_response(state_at(session, at_seq).as_dict())


@router.post(
    "/sessions/{session_id}/snapshots",
    summary="Checkpoint the state at head",
    response=responses({201: SnapshotOut}, 404, 409),  # 409: as the state's
)
def create_snapshot(request: HttpRequest, session_id: UUID) -> HttpResponse:
    session = request_session(request, session_id)
    snapshot = take_snapshot(session, session.head_seq, reason="agent")
    return json_response(
        {
            "seq": snapshot.seq,
            "content_hash": snapshot.content_hash,
            "created_at": snapshot.created_at.isoformat(),
        },
        status=201,
    )


@router.post(
    "/sessions/{session_id}/fork",
    summary="Fork (or rewind) at a seq (idempotent by external_id)",
    response=responses({201: SessionOut, 200: SessionOut}, 404, 409, 410, body=True),
    openapi_extra={
        "responses": {
            200: {"description": "The fork made before with this external_id"},
            409: {"description": "external_id_taken: another session holds the external_id"},
        }
    },
)
def fork(request: HttpRequest, session_id: UUID, payload: ForkIn) -> HttpResponse:
    api_key = request_key(request)
    # open_fork reads the parent (locked, scoped to the key's project: 404 otherwise).
    parent = Session(pk=session_id, project_id=api_key.project_id)
    child, created = open_fork(
        parent,
        at_seq=payload.at_seq,
        actor=Actor.for_key(api_key),
        title=payload.title,
        external_id=payload.external_id,
        metadata=payload.metadata,
    )
    if created:
        child.agent = child.parent.agent  # a fork found by external_id has its own loaded
    return json_response(session_to_dict(child), status=201 if created else 200)


def _lifecycle(
    request: HttpRequest,
    session_id: UUID,
    payload: ReasonIn,
    operation: Callable[..., Session],
) -> HttpResponse:
    session = request_session(request, session_id)
    operation(session, actor=Actor.for_key(request_key(request)), reason=payload.reason)
    return json_response(session_to_dict(session))


@router.post(
    "/sessions/{session_id}/pause",
    summary="Pause",
    response=responses({200: SessionOut}, 404, 409, body=True),
)
def pause(request: HttpRequest, session_id: UUID, payload: ReasonIn | None = None) -> HttpResponse:
    return _lifecycle(request, session_id, payload or ReasonIn(), pause_session)


@router.post(
    "/sessions/{session_id}/resume",
    summary="Resume",
    response=responses({200: SessionOut}, 404, 409, body=True),
)
def resume(request: HttpRequest, session_id: UUID, payload: ReasonIn | None = None) -> HttpResponse:
    return _lifecycle(request, session_id, payload or ReasonIn(), resume_session)


@router.post(
    "/sessions/{session_id}/close",
    summary="Close",
    response=responses({200: SessionOut}, 404, 409, body=True),
)
def close(request: HttpRequest, session_id: UUID, payload: ReasonIn | None = None) -> HttpResponse:
    return _lifecycle(request, session_id, payload or ReasonIn(), close_session)


@router.get(
    "/sessions/{session_id}/export",
    summary="The whole log as JSON Lines (streamed)",
    # Streamed from the stored JSON, a header line then one EventOut per line; ninja's own
    # JSONL streaming would decode and re-encode every event, so the 200 is documented here.
    response=responses({}, 404),
    openapi_extra={
        "responses": {
            200: {
                "description": "First a header line describing the session (queries."
                "export_header: an object with the single key `session`), then one event per "
                "line (EventOut), oldest first; forks include their ancestors' prefix.",
                "content": {
                    "application/x-ndjson": {
                        "schema": {
                            "oneOf": [
                                EXPORT_HEADER_SCHEMA,
                                {"$ref": "#/components/schemas/EventOut"},
                            ]
                        }
                    },
                },
            }
        }
    },
)
def export(request: HttpRequest, session_id: UUID) -> StreamingHttpResponse:
    session = request_session(request, session_id)
    return jsonl_export_response(session, actor=Actor.for_key(request_key(request)))
