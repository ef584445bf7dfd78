"""Artifact endpoints of the agent API (services.artifacts): named, versioned files of a session.

The upload's body is the file itself, any Content-Type, read as a stream by the service (this
operation declares no body, so ninja never reads it whole); the API's body limit gives way to
SWITCHBOARD_ARTIFACT_MAX_BYTES on this path (config.middleware). Agent and admin keys alike.
"""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import Field, Path, Query, Router

from core.actors import Actor
from core.errors import InvalidInput
from core.http import json_response
from core.schemas import MAX_INT, OutSchema, responses

from .access import get_session_for_key
from .api import request_key
from .http import artifact_response
from .models import Artifact
from .services.artifacts import (
    delete_artifact,
    export_artifacts,
    find_artifact,
    list_artifacts,
    save_artifact,
)

router = Router(tags=["artifacts"])

NAME = Path(..., description="1-200 of A-Z a-z 0-9 . _ : @ + = , - (not starting with . or -)")


class ArtifactOut(OutSchema):
    name: str
    version: int
    seq: int = Field(..., description="the `artifact` event that recorded this version")
    size: int
    sha256: str
    content_type: str
    created_at: datetime


class ArtifactVersionsOut(OutSchema):
    name: str
    latest: ArtifactOut
    versions: list[ArtifactOut] = Field(..., description="stored versions, oldest first")


class ArtifactsOut(OutSchema):
    artifacts: list[ArtifactVersionsOut]


class DeletedOut(OutSchema):
    name: str
    versions: list[int]


def artifact_dict(artifact: Artifact) -> dict[str, Any]:
    return {
        "name": artifact.name,
        "version": artifact.version,
        "seq": artifact.seq,
        "size": artifact.size,
        "sha256": artifact.sha256,
        "content_type": artifact.content_type,
        "created_at": artifact.created_at.isoformat(),
    }


def _content_length(request: HttpRequest) -> int | None:
    raw = request.META.get("CONTENT_LENGTH")
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput("Content-Length is not a number.") from None


@router.put(
    "/sessions/{session_id}/artifacts/{name}",
    summary="Save a new version of a named file of the session",
    description="The body is the file (any Content-Type; its media type is kept), with a "
    "Content-Length. Each call saves the next version and appends an `artifact` event (name, "
    "version, size, sha256, content_type). 413 past SWITCHBOARD_ARTIFACT_MAX_BYTES, 507 past "
    "the project's quota; nothing is kept of a refused or broken upload.",
    response=responses({201: ArtifactOut}, 404, 409, 411, 507, body=True),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
def put_artifact(request: HttpRequest, session_id: UUID, name: str = NAME) -> HttpResponse:
    api_key = request_key(request)
    session = get_session_for_key(api_key, session_id)
    artifact = save_artifact(
        session,
        name,
        request,  # type: ignore[arg-type]  # read as a file: HttpRequest.read streams the body
        length=_content_length(request),
        content_type=request.META.get("CONTENT_TYPE"),
        actor=Actor.for_key(api_key),
    )
    return json_response(artifact_dict(artifact), status=201)


@router.get(
    "/sessions/{session_id}/artifacts",
    summary="The session's artifacts: names, stored versions, sizes",
    description="A fork lists its ancestors' versions saved up to its fork point too. "
    "`at_seq`: as the session stood at that seq (versions saved up to it and still stored).",
    response=responses({200: ArtifactsOut}, 404),
)
def get_artifacts(
    request: HttpRequest, session_id: UUID, at_seq: int | None = Query(None, ge=0, le=MAX_INT)
) -> HttpResponse:
    session = get_session_for_key(request_key(request), session_id)
    listed = list_artifacts(session, at_seq=at_seq)
    return json_response(
        {
            "artifacts": [
                {
                    "name": entry.name,
                    "latest": artifact_dict(entry.latest),
                    "versions": [artifact_dict(a) for a in entry.versions],
                }
                for entry in listed
            ]
        }
    )


@router.get(
    "/sessions/{session_id}/artifacts/{name}",
    summary="A version's bytes (the latest, or ?version=N), streamed; Range requests",
    description="Sent as an attachment with `X-Content-Type-Options: nosniff`; a media type "
    "other than png, jpeg, gif, webp or text/plain is sent as application/octet-stream. A "
    "single `Range: bytes=…` answers 206 with that part (416 past the end); the ETag is the "
    "SHA-256.",
    response=responses({}, 404, 416),
    openapi_extra={
        "responses": {
            200: {
                "description": "The bytes",
                "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            },
            206: {
                "description": "The part asked for",
                "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            },
        }
    },
)
def get_artifact(
    request: HttpRequest,
    session_id: UUID,
    name: str = NAME,
    version: int | None = Query(None, ge=1, le=MAX_INT),
    at_seq: int | None = Query(None, ge=0, le=MAX_INT),
) -> HttpResponse:
    session = get_session_for_key(request_key(request), session_id)
    artifact = find_artifact(session, name, version=version, at_seq=at_seq)
    return artifact_response(request, artifact)


@router.delete(
    "/sessions/{session_id}/artifacts/{name}",
    summary="Delete a version (?version=N) or every version of a named file",
    description="Appends an `artifact` event (action delete); the bytes go. A version a fork "
    "sees is refused (409 artifact_shared_with_fork); an ancestor's is deleted in its session.",
    response=responses({200: DeletedOut}, 404, 409),
)
def remove_artifact(
    request: HttpRequest,
    session_id: UUID,
    name: str = NAME,
    version: int | None = Query(None, ge=1, le=MAX_INT),
) -> HttpResponse:
    api_key = request_key(request)
    session = get_session_for_key(api_key, session_id)
    deleted = delete_artifact(session, name, version=version, actor=Actor.for_key(api_key))
    return json_response({"name": name, "versions": [a.version for a in deleted]})


@router.get(
    "/sessions/{session_id}/export/artifacts",
    summary="Every stored artifact version of the session as a tar archive, streamed",
    description="Each version's bytes at `<name>/v<version>` (a fork's include its parent's up "
    "to the fork point), then `manifest.json` listing them (name, version, seq, session_id, "
    "size, sha256, content_type, created_at). Audited as a session export. The log itself is "
    "GET /sessions/{id}/export.",
    response=responses({}, 404),
    openapi_extra={
        "responses": {
            200: {
                "description": "A tar archive (POSIX pax)",
                "content": {
                    "application/x-tar": {"schema": {"type": "string", "format": "binary"}}
                },
            }
        }
    },
)
def export_session_artifacts(request: HttpRequest, session_id: UUID) -> StreamingHttpResponse:
    api_key = request_key(request)
    session = get_session_for_key(api_key, session_id)
    response = StreamingHttpResponse(
        export_artifacts(session, actor=Actor.for_key(api_key)), content_type="application/x-tar"
    )
    response["Content-Disposition"] = f'attachment; filename="session-{session.pk}-artifacts.tar"'
    return response
