"""API endpoints that compose the session store with the tasks app.

Opening a session may link it to tasks (`task_ids`), and reading one shows its linked tasks:
both need both apps, so they live here, the only app that imports both. The sessions list
shares its path (/sessions) with opening, and ninja routes one path through one router, so it
is here too. The rest of the session API is sessions_app.api.
"""

from uuid import UUID

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router

from core.actors import Actor
from core.http import json_response
from core.schemas import responses
from sessions_app.api import (
    BudgetIn,
    SessionIn,
    SessionListQuery,
    SessionOut,
    SessionPageOut,
    request_key,
    request_session,
    session_to_dict,
)
from sessions_app.queries import SessionFilters, filter_sessions, page_sessions
from tasks_app.api import LinkedTaskOut
from tasks_app.queries import linked_tasks_summary
from tasks_app.services.links import open_session_for_tasks

router = Router(tags=["sessions"])


class SessionWithTasksOut(SessionOut):
    tasks: list[LinkedTaskOut]


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
    return json_response(
        session_to_dict(session, tasks=linked_tasks_summary(session)),
        status=201 if created else 200,
    )


@router.get(
    "/sessions",
    summary="List sessions (filters, cursor pagination)",
    response=responses({200: SessionPageOut}),
)
def list_sessions(request: HttpRequest, filters: Query[SessionListQuery]) -> HttpResponse:
    qs = filter_sessions(
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
        ),
    )
    page, next_cursor = page_sessions(qs, cursor=filters.cursor, limit=filters.limit)
    return json_response(
        {"sessions": [session_to_dict(s) for s in page], "next_cursor": next_cursor}
    )


@router.get(
    "/sessions/{session_id}",
    summary="Read one session",
    response=responses({200: SessionWithTasksOut}, 404),
)
def read_session(request: HttpRequest, session_id: UUID) -> HttpResponse:
    session = request_session(request, session_id)
    return json_response(session_to_dict(session, tasks=linked_tasks_summary(session)))
