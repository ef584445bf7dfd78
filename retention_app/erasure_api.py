"""Erasure of a data subject for automation: preview, request, read the receipt (summary and
the full download), run again. Admin-scoped API keys only (others answer 403 in the error
shape); everything scoped to the key's project."""

from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import Field, Router
from pydantic import ConfigDict

from core.actors import Actor
from core.http import json_response
from core.models import ApiKey, KeyScope
from core.schemas import InSchema, OutSchema, responses
from core.scopes import ApiKeyAuth

from .erasure_queries import erasure_dict, erasure_in_project, receipt_chunks, recent_erasures
from .services.erasure import preview_erasure, queue_erasure, request_erasure, start_erasure

router = Router(tags=["erasure"], auth=ApiKeyAuth(KeyScope.ADMIN))


class MetadataSelector(InSchema):
    key: str = Field(..., min_length=1, max_length=200)
    value: str = Field(..., min_length=1, max_length=200)


class FactSelector(InSchema):
    key: str = Field(..., min_length=1, max_length=200)
    value: str | int | float | bool = Field(..., description="the fact's JSON value")


class ErasureIn(InSchema):
    """Selectors (all given must match a session; at least one besides `agent`), and
    `preview` to count what would go without erasing anything."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"metadata": {"key": "user", "value": "u-42"}, "preview": True}]
        }
    )
    metadata: MetadataSelector | None = Field(None, description="a top-level metadata value")
    external_id: str | None = Field(None, min_length=1, max_length=200)
    external_id_prefix: str | None = Field(None, min_length=1, max_length=200)
    agent: str | None = Field(None, min_length=1, max_length=200, description="narrows only")
    fact: FactSelector | None = Field(None, description="a fact the session's log set")
    preview: bool = Field(False, description="only count what would be erased")


class ErasurePreviewOut(OutSchema):
    selectors: dict[str, Any]
    counts: dict[str, int] = Field(..., description="per kind: sessions, events, facts, …")
    session_ids: list[str] = Field(..., description="the first 100 sessions that would go")
    holds: list[dict[str, Any]] = Field(..., description="holds that would refuse it (409)")


class ErasureOut(OutSchema):
    id: str = Field(..., description="the receipt's id")
    status: str = Field(..., description="queued, running, held, done")
    selectors: dict[str, Any]
    requested_by: str
    requested_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    counts: dict[str, int]
    holds: list[dict[str, Any]] = Field(..., description="while held: the holds that stop it")
    sessions: int = Field(..., description="sessions erased or to erase")
    objects: int = Field(..., description="removed objects hashed in the receipt so far")


class RemovedObjectOut(OutSchema):
    kind: str = Field(..., description="event, fact, snapshot, handoff, artifact, …")
    ref: str = Field(..., description="which row or file it was")
    sha256: str = Field(..., description="the SHA-256 of what was removed")


class ReceiptOut(ErasureOut):
    session_ids: list[str] = Field(..., description="every session the erasure names")
    removed: list[RemovedObjectOut] = Field(..., description="every removed object, hashed")


class ErasureListOut(OutSchema):
    erasures: list[ErasureOut]


def _key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined,no-any-return]


@router.post(
    "/erasures",
    summary="Erase a data subject (or, with preview, count what would go)",
    description="Matching sessions (every selector given) and their forks are erased by a "
    "job, in batches: events, facts, snapshots, handoffs, artifacts, blobs; audit entries "
    "about them are kept with the subject's values replaced; webhook delivery bodies that "
    "mention them are removed. Erased sessions answer 410 `erased` with the receipt's id. "
    "409 `legal_hold` (detail: `holds`) while a legal hold covers one of them.",
    response=responses({200: ErasurePreviewOut, 202: ErasureOut}, 403, 409, body=True),
)
def create_erasure(request: HttpRequest, payload: ErasureIn) -> HttpResponse:
    api_key = _key(request)
    selectors = payload.model_dump(exclude_none=True, exclude={"preview"})
    if payload.preview:
        return json_response(preview_erasure(api_key.project_id, selectors).as_dict())
    erasure = request_erasure(api_key.project, selectors, actor=Actor.for_key(api_key))
    return json_response(erasure_dict(erasure), status=202)


@router.get(
    "/erasures",
    summary="The project's erasures, newest first (the latest 50)",
    response=responses({200: ErasureListOut}, 403),
)
def list_erasures(request: HttpRequest) -> HttpResponse:
    erasures = recent_erasures(_key(request).project_id)
    return json_response({"erasures": [erasure_dict(e) for e in erasures]})


@router.get(
    "/erasures/{erasure_id}",
    summary="An erasure's receipt (summary)",
    response=responses({200: ErasureOut}, 403, 404),
)
def read_erasure(request: HttpRequest, erasure_id: str) -> HttpResponse:
    return json_response(erasure_dict(erasure_in_project(_key(request).project_id, erasure_id)))


@router.get(
    "/erasures/{erasure_id}/receipt",
    summary="Download an erasure's whole receipt (JSON, streamed)",
    description="The summary, every erased session's id, and under `removed` every removed "
    "or rewritten object's kind, reference and SHA-256 of its stored form.",
    response=responses({200: ReceiptOut}, 403, 404),
)
def download_receipt(request: HttpRequest, erasure_id: str) -> StreamingHttpResponse:
    erasure = erasure_in_project(_key(request).project_id, erasure_id)
    return receipt_response(erasure)


def receipt_response(erasure: Any) -> StreamingHttpResponse:
    response = StreamingHttpResponse(receipt_chunks(erasure), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="erasure-{erasure.pk}.json"'
    return response


@router.post(
    "/erasures/{erasure_id}/run",
    summary="Run an erasure again (after its holds were lifted, or the queue was down)",
    response=responses({202: ErasureOut}, 403, 404),
)
def rerun_erasure(request: HttpRequest, erasure_id: str) -> HttpResponse:
    erasure = erasure_in_project(_key(request).project_id, erasure_id)
    if erasure.status != "done":
        start_erasure(erasure.pk)
        queue_erasure(erasure)
    erasure.refresh_from_db()
    return json_response(erasure_dict(erasure), status=202)
