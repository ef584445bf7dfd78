"""Blob endpoints of the agent API (services.blobs): store bytes once, name them by SHA-256 in
events, read them back by name. Agent and admin keys alike, as for events."""

from typing import Annotated
from uuid import UUID

import orjson
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers
from ninja import Field, Router
from pydantic import ConfigDict, StringConstraints

from core.http import json_response
from core.schemas import InSchema, OutSchema, responses

from .access import get_session_for_key
from .api import BlobIn, decoded_blobs, request_key
from .services.blobs import (
    MAX_BLOBS_PER_CALL,
    MAX_LOOKUP_NAMES,
    blob_records,
    find_blobs,
    read_blob,
    store_blobs,
)

router = Router(tags=["blobs"])

# Bytes of blob data one lookup answers with (before base64); the rest are named in not_sent.
LOOKUP_BYTE_BUDGET = 4 * 1024 * 1024

# A lookup's answer as bytes, when the request accepts it (and asks for data): no JSON and no
# base64 on either side (5,000 blobs of 330 bytes are 3.2 MB of JSON otherwise, which the
# client parses and decodes for 30 ms). The format: _BLOBS_DESCRIPTION.
BLOBS_MEDIA_TYPE = "application/vnd.switchboard.blobs"
_BLOBS_DESCRIPTION = (
    "With `data`: true and `Accept: application/vnd.switchboard.blobs`, the answer is bytes "
    "instead of JSON: for each distinct name, in the order first asked, a 4-byte unsigned "
    "big-endian length then that many bytes of the blob; 0xFFFFFFFF alone for a name the "
    "session does not hold (`missing`), 0xFFFFFFFE alone for one past the answer's "
    f"{LOOKUP_BYTE_BUDGET} bytes (`not_sent`: ask again)."
)

Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class BlobsIn(InSchema):
    model_config = ConfigDict(json_schema_extra={"examples": [{"blobs": [{"data": "aGVsbG8="}]}]})
    blobs: list[BlobIn] = Field(..., min_length=1, max_length=MAX_BLOBS_PER_CALL)


class StoredBlobOut(OutSchema):
    sha256: str
    size: int
    created: bool = Field(..., description="false: the session or an ancestor held these bytes")


class StoredBlobsOut(OutSchema):
    blobs: list[StoredBlobOut]


class BlobLookupIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "sha256": ["2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"],
                    "data": True,
                }
            ]
        }
    )
    sha256: list[Sha256] = Field(..., min_length=1, max_length=MAX_LOOKUP_NAMES)
    data: bool = Field(False, description="true: answer with the bytes too (base64)")


class FoundBlobOut(OutSchema):
    sha256: str
    size: int
    data: str | None = Field(..., description="base64; null when not asked for or in not_sent")


class BlobLookupOut(OutSchema):
    blobs: list[FoundBlobOut]
    missing: list[str] = Field(..., description="held neither by the session nor its ancestors")
    not_sent: list[str] = Field(
        ..., description=f"held, but past this answer's {LOOKUP_BYTE_BUDGET} bytes: ask again"
    )


@router.post(
    "/sessions/{session_id}/blobs",
    summary="Store blobs (content-addressed: each stored once per session)",
    description="Each blob's SHA-256 (of its bytes, hex) is its name; events refer to it by "
    "that name. Bytes the session or one of its ancestors already holds are not stored again "
    "(`created`: false). Blobs live until the session is deleted; compaction keeps them.",
    response=responses({201: StoredBlobsOut, 200: StoredBlobsOut}, 404, 409, body=True),
    openapi_extra={"responses": {200: {"description": "All were held already: nothing stored"}}},
)
def store(request: HttpRequest, session_id: UUID, payload: BlobsIn) -> HttpResponse:
    session = get_session_for_key(request_key(request), session_id)
    stored = store_blobs(session, decoded_blobs(payload.blobs))
    body = {"blobs": [{"sha256": b.sha256, "size": b.size, "created": b.created} for b in stored]}
    return json_response(body, status=201 if any(b.created for b in stored) else 200)


@router.post(
    "/sessions/{session_id}/blobs/lookup",
    summary="Which of these blobs the session holds, with their bytes if asked",
    description=_BLOBS_DESCRIPTION,
    response=responses({200: BlobLookupOut}, 404, body=True),
    openapi_extra={
        "responses": {
            200: {"content": {BLOBS_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}}}
        }
    },
)
def lookup(request: HttpRequest, session_id: UUID, payload: BlobLookupIn) -> HttpResponse:
    session = get_session_for_key(request_key(request), session_id)
    # JSON first: an Accept of */* (or none) gets JSON, as every other answer.
    wanted = request.get_preferred_type(["application/json", BLOBS_MEDIA_TYPE])
    if payload.data and wanted == BLOBS_MEDIA_TYPE:
        records = blob_records(session, payload.sha256, byte_budget=LOOKUP_BYTE_BUDGET)
        response = HttpResponse(records, content_type=BLOBS_MEDIA_TYPE)
    else:
        found = find_blobs(
            session, payload.sha256, with_data=payload.data, byte_budget=LOOKUP_BYTE_BUDGET
        )
        body = {"blobs": found.found, "missing": found.missing, "not_sent": found.not_sent}
        # orjson: an answer of 1,000 small blobs dumps in a tenth of json.dumps's time.
        response = HttpResponse(orjson.dumps(body), content_type="application/json")
    patch_vary_headers(response, ["Accept"])  # one URL, two shapes: no cache mixes them up
    return response


@router.get(
    "/sessions/{session_id}/blobs/{sha256}",
    summary="One blob's bytes",
    response=responses({}, 404),
    openapi_extra={
        "responses": {
            200: {
                "description": "The bytes, as stored",
                "content": {
                    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
                },
            }
        }
    },
)
def read(request: HttpRequest, session_id: UUID, sha256: Sha256) -> HttpResponse:
    session = get_session_for_key(request_key(request), session_id)
    response = HttpResponse(read_blob(session, sha256), content_type="application/octet-stream")
    # Bytes an agent stored: never rendered by a browser as a page of this origin.
    response["Content-Disposition"] = f'attachment; filename="{sha256}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["ETag"] = f'"{sha256}"'
    response["Cache-Control"] = "private, max-age=31536000, immutable"
    return response
