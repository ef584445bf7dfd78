"""Retention for automation: the policy, its preview, the run history, legal holds on sessions.
Admin-scoped API keys only (an agent key answers 403 in the error shape)."""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Field, Router
from pydantic import ConfigDict

from core.actors import Actor
from core.http import json_response
from core.models import ApiKey, KeyScope
from core.schemas import InSchema, OutSchema, json_int, responses
from core.scopes import ApiKeyAuth
from sessions_app.access import get_session_for_key

from .queries import recent_runs, run_dict
from .services.holds import lift_session_hold, place_hold
from .services.policies import policy_document, project_policies, save_policy
from .services.preview import preview

router = Router(tags=["retention"], auth=ApiKeyAuth(KeyScope.ADMIN))

SECONDS = "seconds, or null for never"
Seconds = json_int()


class PolicyFieldsIn(InSchema):
    # Whole JSON numbers only: lax parsing read `true` as 1 second and "60" as 60. The service
    # (services.policies) checks the range and names the field: positive, at most 100 years.
    close_idle_after: Seconds | None = Field(None, description=SECONDS)
    close_paused_after: Seconds | None = Field(None, description=SECONDS)
    archive_closed_after: Seconds | None = Field(None, description=SECONDS)
    compact_after: Seconds | None = Field(None, description=SECONDS)
    delete_after: Seconds | None = Field(None, description=SECONDS)
    outcome_compact_after: Seconds | None = Field(None, description=SECONDS)
    outcome_delete_after: Seconds | None = Field(None, description=SECONDS)
    keep_outcomes: list[str] | None = Field(None, description="error, handoff, over_budget")
    keep_tags: list[str] | None = Field(None, description="tags in the session's metadata.tags")


class PolicyIn(PolicyFieldsIn):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "close_idle_after": 86400,
                    "close_paused_after": 604800,
                    "archive_closed_after": 604800,
                    "compact_after": 2592000,
                    "delete_after": None,
                    "outcome_compact_after": 7776000,
                    "outcome_delete_after": None,
                    "keep_outcomes": ["error", "handoff"],
                    "keep_tags": ["legal"],
                    "agents": {},
                }
            ]
        }
    )
    agents: dict[str, PolicyFieldsIn] = Field(
        default_factory=dict, description="agent name -> only the fields it overrides"
    )
    defaults: bool | None = Field(
        None, description="ignored (what GET answers), so that its document can be sent back"
    )


class PolicyOut(OutSchema):
    close_idle_after: int | None
    close_paused_after: int | None
    archive_closed_after: int | None
    compact_after: int | None
    delete_after: int | None
    outcome_compact_after: int | None
    outcome_delete_after: int | None
    keep_outcomes: list[str]
    keep_tags: list[str]
    defaults: bool = Field(..., description="true: the deployment's defaults (none saved yet)")
    agents: dict[str, dict[str, Any]]


class PreviewOut(OutSchema):
    would: dict[str, dict[str, Any]]
    notes: str
    now: datetime


class RunOut(OutSchema):
    id: int
    job: str
    status: str
    trigger: str
    started_at: datetime
    finished_at: datetime | None
    examined: int
    closed: int
    archived: int
    compacted: int
    deleted: int
    events_freed: int
    bytes_freed: int
    errors: list[dict[str, Any]]


class RunsOut(OutSchema):
    runs: list[RunOut]


class HoldIn(InSchema):
    model_config = ConfigDict(json_schema_extra={"examples": [{"reason": "litigation 2026-17"}]})
    reason: str = Field(..., min_length=1, max_length=1000)


class HoldOut(OutSchema):
    id: int
    scope: str
    session_id: str | None
    reason: str
    created_by: str
    created_at: datetime
    released_at: datetime | None
    released_by: str


def _key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def _hold_dict(hold: Any) -> dict[str, Any]:
    return {
        "id": hold.pk,
        "scope": hold.scope,
        "session_id": str(hold.session_id) if hold.session_id else None,
        "reason": hold.reason,
        "created_by": hold.created_by,
        "created_at": hold.created_at.isoformat(),
        "released_at": hold.released_at.isoformat() if hold.released_at else None,
        "released_by": hold.released_by,
    }


def _document(payload: PolicyIn) -> dict[str, Any]:
    body = payload.model_dump(exclude_unset=True, exclude={"defaults"})
    body["agents"] = {
        name: fields.model_dump(exclude_unset=True) for name, fields in payload.agents.items()
    }
    return body


@router.get(
    "/retention/policy",
    summary="The project's retention policy",
    response=responses({200: PolicyOut}, 403),
)
def read_policy(request: HttpRequest) -> HttpResponse:
    return json_response(policy_document(project_policies(_key(request).project_id)))


@router.put(
    "/retention/policy",
    summary="Replace the retention policy (every field; agents: their overrides)",
    response=responses({200: PolicyOut}, 403, body=True),
)
def update_policy(request: HttpRequest, payload: PolicyIn) -> HttpResponse:
    api_key = _key(request)
    saved = save_policy(api_key.project, _document(payload), actor=Actor.for_key(api_key))
    return json_response(policy_document(saved))


@router.get(
    "/retention/preview",
    summary="What a run would do now under the saved policy",
    response=responses({200: PreviewOut}, 403),
)
def read_preview(request: HttpRequest) -> HttpResponse:
    api_key = _key(request)
    now = timezone.now()
    result = preview(api_key.project, project_policies(api_key.project_id), now=now)
    return json_response({**result.as_dict(), "now": now.isoformat()})


@router.get(
    "/retention/runs",
    summary="The project's retention runs, newest first",
    response=responses({200: RunsOut}, 403),
)
def list_runs(request: HttpRequest, limit: int = 50) -> HttpResponse:
    runs = recent_runs(_key(request).project_id, limit=max(1, min(limit, 200)))
    return json_response({"runs": [run_dict(r) for r in runs]})


@router.post(
    "/sessions/{session_id}/hold",
    summary="Place a legal hold on a session (no compaction, no deletion)",
    response=responses({201: HoldOut, 200: HoldOut}, 403, 404, body=True),
)
def hold_session(request: HttpRequest, session_id: UUID, payload: HoldIn) -> HttpResponse:
    api_key = _key(request)
    session = get_session_for_key(api_key, session_id)
    hold, created = place_hold(
        api_key.project, session=session, reason=payload.reason, actor=Actor.for_key(api_key)
    )
    return json_response(_hold_dict(hold), status=201 if created else 200)


@router.delete(
    "/sessions/{session_id}/hold",
    summary="Lift the session's legal hold",
    response=responses({200: HoldOut}, 403, 404),
)
def release_session(request: HttpRequest, session_id: UUID) -> HttpResponse:
    api_key = _key(request)
    session = get_session_for_key(api_key, session_id)
    hold = lift_session_hold(session, actor=Actor.for_key(api_key))
    return json_response(_hold_dict(hold))
