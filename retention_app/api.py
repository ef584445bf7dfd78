"""Retention for automation: the policy (read, replace, reset to the defaults), its preview,
the run history and starting a run, legal holds (listed, and placed on or lifted from a
session). Admin-scoped API keys only (an agent key answers 403 in the error shape)."""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Field, Query, Router
from pydantic import ConfigDict

from core.actors import Actor
from core.http import json_response
from core.models import ApiKey, KeyScope
from core.schemas import InSchema, OutSchema, json_int, responses
from core.scopes import ApiKeyAuth
from sessions_app.access import get_session_for_key

from .queries import hold_dict, page_holds, page_runs, run_dict
from .services.holds import lift_session_hold, place_hold
from .services.jobs import request_runs
from .services.policies import policy_document, project_policies, reset_policy, save_policy
from .services.preview import preview

router = Router(tags=["retention"], auth=ApiKeyAuth(KeyScope.ADMIN))

SECONDS = "seconds, or null for never"
Seconds = json_int()
ARTIFACT_AGE = (
    "seconds: artifact versions saved longer ago are deleted (the log and the session stay); "
    "null or left out: kept as long as their session"
)


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
    artifact_max_age: Seconds | None = Field(None, description=ARTIFACT_AGE)
    keep_outcomes: list[str] | None = Field(None, description="error, handoff, over_budget")
    keep_tags: list[str] | None = Field(None, description="tags in the session's metadata.tags")


class PolicyIn(InSchema):
    """The whole policy: every field of the project's is required (null for never), as the
    service refuses any omission (services.policies.parse_policy), but artifact_max_age (left
    out: null); `agents` name only the fields they override."""

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
                    "artifact_max_age": 2592000,
                    "keep_outcomes": ["error", "handoff"],
                    "keep_tags": ["legal"],
                    "agents": {},
                }
            ]
        }
    )
    close_idle_after: Seconds | None = Field(..., description=SECONDS)
    close_paused_after: Seconds | None = Field(..., description=SECONDS)
    archive_closed_after: Seconds | None = Field(..., description=SECONDS)
    compact_after: Seconds | None = Field(..., description=SECONDS)
    delete_after: Seconds | None = Field(..., description=SECONDS)
    outcome_compact_after: Seconds | None = Field(..., description=SECONDS)
    outcome_delete_after: Seconds | None = Field(..., description=SECONDS)
    artifact_max_age: Seconds | None = Field(None, description=ARTIFACT_AGE)
    keep_outcomes: list[str] = Field(..., description="error, handoff, over_budget")
    keep_tags: list[str] = Field(..., description="tags in the session's metadata.tags")
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
    artifact_max_age: int | None
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
    artifacts_deleted: int
    artifact_bytes_freed: int
    errors: list[dict[str, Any]]


class RunsOut(OutSchema):
    runs: list[RunOut]
    next_cursor: str | None = Field(..., description="null on the last page")


class QueuedRunsOut(OutSchema):
    runs: list[RunOut] = Field(..., description="the runs queued: one per job, status queued")


class PageQuery(InSchema):
    cursor: str | None = Field(None, description="next_cursor of the previous page")
    limit: int = Field(50, ge=1, le=200)


class HoldListQuery(PageQuery):
    include_released: bool = Field(False, description="also the lifted holds (the history)")


class HoldIn(InSchema):
    model_config = ConfigDict(json_schema_extra={"examples": [{"reason": "litigation 2026-17"}]})
    reason: str = Field(..., min_length=1, max_length=1000)


class HoldOut(OutSchema):
    """A legal hold: while it stands (released_at null) nothing it covers is compacted or
    deleted."""

    id: int
    scope: str = Field(..., description="session, agent or project: what it covers")
    session_id: str | None
    agent: str | None = Field(..., description="the agent's name, for an agent's hold")
    reason: str
    created_by: str
    created_at: datetime
    released_at: datetime | None
    released_by: str


class HoldPageOut(OutSchema):
    holds: list[HoldOut]
    next_cursor: str | None = Field(..., description="null on the last page")


def _key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined,no-any-return]


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


@router.delete(
    "/retention/policy",
    summary="Reset the retention policy to the deployment's defaults",
    description="Removes the project's policy and its agent overrides (audited as a policy "
    "change); the answer is the defaults' document (`defaults: true`). Resetting again "
    "changes nothing.",
    response=responses({200: PolicyOut}, 403),
)
def reset_to_defaults(request: HttpRequest) -> HttpResponse:
    api_key = _key(request)
    return json_response(
        policy_document(reset_policy(api_key.project, actor=Actor.for_key(api_key)))
    )


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
    summary="The project's retention runs, newest first (cursor pagination)",
    response=responses({200: RunsOut}, 403),
)
def list_runs(request: HttpRequest, params: Query[PageQuery]) -> HttpResponse:
    runs, next_cursor = page_runs(
        _key(request).project_id, cursor=params.cursor, limit=params.limit
    )
    return json_response({"runs": [run_dict(r) for r in runs], "next_cursor": next_cursor})


@router.post(
    "/retention/runs",
    summary="Run retention now: queue both jobs over this project",
    description="As the retention page's Run now: a run per job (enforce_retention, "
    "compact_sessions) is recorded `queued` and sent to the workers, which take it up "
    "(running, then succeeded or failed; GET /retention/runs). With the job queue down the "
    "runs are marked failed and the answer is 503 `jobs_unavailable`.",
    response=responses({202: QueuedRunsOut}, 403),
)
def start_runs(request: HttpRequest) -> HttpResponse:
    api_key = _key(request)
    runs = request_runs(api_key.project_id, trigger=Actor.for_key(api_key).label)
    return json_response({"runs": [run_dict(r) for r in runs]}, status=202)


@router.get(
    "/holds",
    summary="The project's legal holds, newest first (cursor pagination)",
    description="The standing holds (on a session, an agent or the whole project); with "
    "`include_released=true` the lifted ones too.",
    response=responses({200: HoldPageOut}, 403),
)
def list_holds(request: HttpRequest, params: Query[HoldListQuery]) -> HttpResponse:
    holds, next_cursor = page_holds(
        _key(request).project_id,
        include_released=params.include_released,
        cursor=params.cursor,
        limit=params.limit,
    )
    return json_response({"holds": [hold_dict(h) for h in holds], "next_cursor": next_cursor})


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
    return json_response(hold_dict(hold), status=201 if created else 200)


@router.delete(
    "/sessions/{session_id}/hold",
    summary="Lift the session's legal hold",
    response=responses({200: HoldOut}, 403, 404),
)
def release_session(request: HttpRequest, session_id: UUID) -> HttpResponse:
    api_key = _key(request)
    session = get_session_for_key(api_key, session_id)
    hold = lift_session_hold(session, actor=Actor.for_key(api_key))
    return json_response(hold_dict(hold))
