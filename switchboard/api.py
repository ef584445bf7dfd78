"""API endpoints that compose the session store with the tasks app.

Opening a session may link it to tasks (`task_ids`), and reading one shows its linked tasks:
both need both apps, so they live here, the only app that imports both. The sessions list
shares its path (/sessions) with opening, and ninja routes one path through one router, so it
is here too, and so is deleting a session (/sessions/{id}, read here): its service is
retention's (legal holds and tombstones decide and record it), which sessions_app cannot
import. For the same reason the session bodies served here carry `holds`, the standing legal
holds that cover the session (retention's). The rest of the session API is sessions_app.api.
"""

import json
from typing import Any
from uuid import UUID

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from ninja import Field, Query, Router

from core.actors import Actor
from core.http import json_response
from core.schemas import OutSchema, query_prefixes, responses
from retention_app.api import HoldOut
from retention_app.queries import hold_dict, holds_covering
from retention_app.services.deletion import delete_session as delete_whole_session
from sessions_app.api import (
    METADATA_FILTERS_DOC,
    METADATA_PREFIX,
    BudgetIn,
    SessionIn,
    SessionListItemOut,
    SessionListQuery,
    SessionOut,
    head_state_fields,
    metadata_filters,
    request_key,
    request_session,
    session_to_dict,
)
from sessions_app.models import Session
from sessions_app.queries import SessionFilters, last_events, list_sessions_page
from sessions_app.services.state import head_states
from switchboard.sessions.queries import pending_handoff_expression
from tasks_app.api import LinkedTaskOut
from tasks_app.queries import linked_tasks_summary
from tasks_app.services.links import open_session_for_tasks

router = Router(tags=["sessions"])


HOLDS_DOC = (
    "the standing legal holds covering the session: its own, its agent's, the project's "
    "(while one stands, nothing of it is compacted or deleted)"
)


class SessionWithTasksOut(SessionOut):
    tasks: list[LinkedTaskOut]
    holds: list[HoldOut] = Field(..., description=HOLDS_DOC)


class ListedSessionOut(SessionListItemOut):
    holds: list[HoldOut] = Field(..., description=HOLDS_DOC)


class SessionListOut(OutSchema):
    sessions: list[ListedSessionOut]
    next_cursor: str | None = Field(..., description="null on the last page")


class SessionDeletedOut(OutSchema):
    id: UUID
    deleted: list[UUID] = Field(
        ..., description="every session deleted: this one, then (with_forks) its forks"
    )
    events_deleted: int


def sessions_with_holds(
    sessions: list[Session], *, tasks: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The session bodies served here: sessions_app's, with the holds covering each."""
    if not sessions:
        return []
    covering = holds_covering(sessions[0].project_id, sessions)
    return [
        {
            **session_to_dict(session, tasks=tasks),
            "holds": [hold_dict(h) for h in covering[str(session.pk)]],
        }
        for session in sessions
    ]


@router.post(
    "/sessions",
    summary="Open a session (idempotent by external_id)",
    response=responses({201: SessionWithTasksOut, 200: SessionWithTasksOut}, 404, body=True),
    openapi_extra={"responses": {200: {"description": "The session with this external_id"}}},
)
def create_session(request: HttpRequest, payload: SessionIn) -> HttpResponse:
    api_key = request_key(request)
    budget = payload.budget or BudgetIn()
    session, created = open_session_for_tasks(
        api_key.project,
        task_ids=payload.task_ids,
        actor=Actor.for_key(api_key),
        agent_name=payload.agent,
        external_id=payload.external_id,
        title=payload.title,
        metadata=payload.metadata,
        budget_max_tokens=budget.max_tokens,
        budget_max_cost=budget.max_cost,
    )
    (body,) = sessions_with_holds([session], tasks=linked_tasks_summary(session))
    return json_response(body, status=201 if created else 200)


@router.get(
    "/sessions",
    summary="List sessions (filters, cursor pagination)",
    description="Newest first, a page at a time (`next_cursor`). Filters AND together. "
    + METADATA_FILTERS_DOC,
    response=responses({200: SessionListOut}),
    openapi_extra=query_prefixes(METADATA_PREFIX),
)
def list_sessions(request: HttpRequest, filters: Query[SessionListQuery]) -> HttpResponse:
    # Handoffs are a floor above the session store, so that filter is composed here.
    pending = None
    if filters.has_pending_handoff is not None:
        pending = Q(pending_handoff_expression())
        if not filters.has_pending_handoff:
            pending = ~pending
    page, next_cursor = list_sessions_page(
        request_key(request).project,
        SessionFilters(
            status=[str(s) for s in filters.status] if filters.status else None,
            agent=filters.agent,
            q=filters.q,
            metadata_key=filters.metadata_key,
            created_after=filters.created_after,
            created_before=filters.created_before,
            updated_after=filters.updated_after,
            updated_before=filters.updated_before,
            external_ids=filters.external_id,
            metadata_equals=metadata_filters(request.GET),
        ),
        cursor=filters.cursor,
        limit=filters.limit,
        narrowed=pending,
    )
    sessions = sessions_with_holds(page)
    include = filters.include or []
    if "state" in include:
        for body, folded in zip(sessions, head_states(page), strict=True):
            body.update(head_state_fields(folded))
    if "events" not in include:
        return json_response({"sessions": sessions, "next_cursor": next_cursor})
    # Each session's last events spliced in as the database wrote their JSON (as the events
    # endpoint sends them): no decoding and encoding of their content here.
    items = []
    tails = last_events(page, filters.events_limit)
    for body, (lines, has_more) in zip(sessions, tails, strict=True):
        encoded = json.dumps(body, default=str, separators=(",", ":"))
        items.append(
            f'{encoded[:-1]},"events":[{",".join(lines)}],'
            f'"events_has_more":{json.dumps(has_more)}}}'
        )
    cursor = json.dumps(next_cursor)
    return HttpResponse(
        f'{{"sessions":[{",".join(items)}],"next_cursor":{cursor}}}',
        content_type="application/json",
    )


@router.get(
    "/sessions/{session_id}",
    summary="Read one session",
    response=responses({200: SessionWithTasksOut}, 404),
)
def read_session(request: HttpRequest, session_id: UUID) -> HttpResponse:
    session = request_session(request, session_id)
    (body,) = sessions_with_holds([session], tasks=linked_tasks_summary(session))
    return json_response(body)


@router.delete(
    "/sessions/{session_id}",
    summary="Delete a session whole (its external_id is free again)",
    description="Deletes the session's events, snapshots, handoffs and task links in one "
    "transaction; a tombstone and an audit entry remain, and `session.deleted` goes to live "
    "pages and webhooks. Refused with 409 `session_has_forks` (detail: `fork_ids`) while it "
    "has forks, unless `with_forks=true` (then they go too, their forks with them), and with "
    "409 `legal_hold` while a legal hold covers it or one of those forks.",
    response=responses({200: SessionDeletedOut}, 404, 409),
)
def delete_session(
    request: HttpRequest,
    session_id: UUID,
    with_forks: bool = Query(False, description="also delete its forks (recursively)"),
) -> HttpResponse:
    api_key = request_key(request)
    deleted = delete_whole_session(
        api_key.project_id, session_id, actor=Actor.for_key(api_key), with_forks=with_forks
    )
    return json_response(
        {
            "id": str(session_id),
            "deleted": [str(pk) for pk in deleted.session_ids],
            "events_deleted": deleted.events_deleted,
        }
    )
