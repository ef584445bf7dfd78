"""Handoff endpoints of the agent API: parse, authorise, call a service or a query, render.

`GET /handoffs/{id}?wait=S` is an async view: it waits on the handoff's channel-layer group
(handoffs_app.waiting) holding no database connection, and reads the row through
`sync_to_async` only before and after the wait. Served through ASGI.
"""

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import HttpRequest, HttpResponse
from ninja import Field, Query, Router
from ninja.security import HttpBearer
from pydantic import BeforeValidator, ConfigDict

from core.actors import Actor
from core.http import json_response
from core.models import ApiKey
from core.schemas import InSchema, OutSchema, json_int, responses
from core.services.projects import authenticate_api_key
from sessions_app.access import get_session_for_key

from .access import get_handoff_for_key
from .models import AGENT_KINDS, HandoffStatus, Priority
from .queries import handoff_to_dict, list_handoffs
from .services.handoffs import cancel_handoff, request_handoff
from .services.validation import MAX_DUE
from .waiting import MAX_WAIT, parse_wait, wait_for_resolution

router = Router(tags=["handoffs"])


def request_key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def _give_back_connection() -> None:
    """Return this thread's connection to the pool: a long-poll must not hold one while it
    waits. (Not inside a transaction: the test client runs requests inside the test's.)"""
    if not connection.in_atomic_block:
        connection.close()


class WaitingKeyAuth(HttpBearer):
    """API-key auth for the long-poll: the look-up's connection goes back to the pool before
    the view starts waiting (ninja awaits an auth whose `is_async` is set)."""

    is_async = True

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        try:
            return authenticate_api_key(token)
        finally:
            _give_back_connection()

    async def __call__(self, request: HttpRequest) -> Any:  # type: ignore[override]
        return await sync_to_async(super().__call__)(request)


# --- Schemas --------------------------------------------------------------------------------


class HandoffIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "kind": "approval",
                    "reason": "Refund above the automatic limit",
                    "priority": "high",
                    "payload": {
                        "action_request": {
                            "action": "refund",
                            "args": {"order": "A-1001", "amount": 120.0, "notify": True},
                            "args_schema": {
                                "type": "object",
                                "properties": {
                                    "order": {"type": "string", "title": "Order"},
                                    "amount": {"type": "number", "minimum": 0},
                                    "notify": {"type": "boolean"},
                                },
                                "required": ["order", "amount"],
                            },
                        },
                        "config": {
                            "allow_accept": True,
                            "allow_edit": True,
                            "allow_respond": True,
                            "allow_ignore": False,
                        },
                        "description": "The customer asks for a refund of a late order.",
                    },
                    "idempotency_key": "refund-A-1001",
                },
                {
                    "kind": "question",
                    "reason": "Unclear address",
                    "payload": {"question": "Ship to the old address?", "choices": ["yes", "no"]},
                },
            ]
        }
    )

    # Checked by the service (after the session is found), so the parser takes any string.
    kind: str = Field(..., json_schema_extra={"enum": sorted(str(k) for k in AGENT_KINDS)})
    reason: str = Field("", max_length=1000)
    payload: dict[str, Any] = Field(default_factory=dict)
    priority: str = Field("normal", json_schema_extra={"enum": [p.label for p in Priority]})
    due_in: json_int(ge=1, le=int(MAX_DUE.total_seconds())) | None = Field(
        None, description="seconds until it is due; default: the project's SLA for the kind"
    )
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)


class CancelIn(InSchema):
    reason: str = Field("", max_length=1000)


class HandoffListQuery(InSchema):
    status: list[HandoffStatus] | None = None
    session_id: UUID | None = None
    cursor: str | None = None
    limit: int = Field(50, ge=1, le=200)


class HandoffOut(OutSchema):
    id: UUID
    session_id: UUID
    kind: str
    status: HandoffStatus
    reason: str
    payload: dict[str, Any]
    priority: str
    due_at: datetime
    overdue: bool
    expires_at: datetime
    idempotency_key: str | None
    requested_by: str
    allowed_answers: list[str]
    answer: dict[str, Any] | None = Field(
        ...,
        description='{"type": "respond"|"accept"|"edit"|"reject"|"ignore"|"budget", "text"?, '
        '"choice"?, "action"?, "args"?, "reason"?, "budget"?, "by", "at"}; "ignore" (status '
        '"ignored"): the person dismissed the request, go on without the action',
    )
    holder: str | None
    lease_expires_at: datetime | None
    created_at: datetime
    claimed_at: datetime | None
    answered_at: datetime | None
    resolved_at: datetime | None


class HandoffPageOut(OutSchema):
    handoffs: list[HandoffOut]
    next_cursor: str | None = Field(..., description="null on the last page")


# --- Endpoints ------------------------------------------------------------------------------


@router.post(
    "/sessions/{session_id}/handoffs",
    summary="Ask for a person (pauses the session)",
    response=responses({201: HandoffOut, 200: HandoffOut}, 404, 409, body=True),
    openapi_extra={"responses": {200: {"description": "The idempotency key's original"}}},
)
def create_handoff(request: HttpRequest, session_id: UUID, payload: HandoffIn) -> HttpResponse:
    api_key = request_key(request)
    session = get_session_for_key(api_key, session_id)
    result = request_handoff(
        session,
        kind=payload.kind,
        reason=payload.reason,
        payload=payload.payload,
        priority=payload.priority,
        due_in=payload.due_in,
        idempotency_key=payload.idempotency_key,
        actor=Actor.for_key(api_key),
    )
    return json_response(handoff_to_dict(result.handoff), status=201 if result.created else 200)


@router.get(
    "/handoffs",
    summary="The project's handoffs, newest first",
    response=responses({200: HandoffPageOut}),
)
def list_project_handoffs(request: HttpRequest, params: Query[HandoffListQuery]) -> HttpResponse:
    page, next_cursor = list_handoffs(
        request_key(request).project_id,
        status=[str(s) for s in params.status] if params.status else None,
        session_id=params.session_id,
        cursor=params.cursor,
        limit=params.limit,
    )
    return json_response(
        {"handoffs": [handoff_to_dict(h) for h in page], "next_cursor": next_cursor}
    )


def read_state(api_key: ApiKey, handoff_id: UUID) -> tuple[dict[str, Any], bool]:
    """The handoff's JSON and whether it is resolved; the connection goes back to the pool.
    (Also config/longpoll.py's reading while it waits.)"""
    try:
        handoff = get_handoff_for_key(api_key, handoff_id)
        return handoff_to_dict(handoff), handoff.is_resolved
    finally:
        _give_back_connection()


@router.get(
    "/handoffs/{handoff_id}",
    summary="Read a handoff; with wait=S, long-poll up to S seconds for its outcome",
    response=responses({200: HandoffOut}, 404),
    auth=WaitingKeyAuth(),
)
async def read_handoff(
    request: HttpRequest,
    handoff_id: UUID,
    wait: Annotated[int, BeforeValidator(parse_wait)] = Query(
        0,
        ge=0,
        le=MAX_WAIT,
        description="seconds to wait for an outcome (answered, taken over, handed back, "
        "closed, cancelled, expired); answers at once when there is one",
    ),
) -> HttpResponse:
    api_key = request_key(request)
    read = sync_to_async(read_state)
    body, resolved = await read(api_key, handoff_id)  # a 404 before any waiting
    if wait and not resolved:
        body = await wait_for_resolution(
            handoff_id, timeout=wait, read=lambda: read(api_key, handoff_id)
        )
    return json_response(body)


@router.post(
    "/handoffs/{handoff_id}/cancel",
    summary="Withdraw the request (while nobody has answered)",
    response=responses({200: HandoffOut}, 404, 409, body=True),
)
def cancel(request: HttpRequest, handoff_id: UUID, payload: CancelIn | None = None) -> HttpResponse:
    api_key = request_key(request)
    handoff = get_handoff_for_key(api_key, handoff_id)
    cancel_handoff(handoff, actor=Actor.for_key(api_key), reason=(payload or CancelIn()).reason)
    return json_response(handoff_to_dict(handoff))
