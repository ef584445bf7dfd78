"""HTTP responses shared by the API and the dashboard."""

import re
from collections.abc import Iterator
from typing import IO

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from core.actors import Actor
from core.http import error_response
from sessions_app.models import Artifact, Session

from .services.artifacts import open_artifact
from .services.sessions import export_session


def jsonl_export_response(session: Session, *, actor: Actor) -> StreamingHttpResponse:
    """The session's visible log as a JSON Lines download, streamed from its own connection.

    An async iterator: under ASGI, Django reads a sync iterator whole before sending it, and
    memory must stay flat for a million-event session; and while it streams no thread is held.
    Raises ExportBusy (429) when the project's export slots are all taken.
    """
    response = StreamingHttpResponse(
        export_session(session, actor=actor), content_type="application/x-ndjson"
    )
    response["Content-Disposition"] = f'attachment; filename="session-{session.pk}.jsonl"'
    return response


# Types a browser may show inline from this origin: images it decodes as images (never SVG,
# which runs scripts) and plain text. Anything else is sent as application/octet-stream.
INLINE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
SAFE_TYPES = INLINE_IMAGE_TYPES | {"text/plain"}
RANGE = re.compile(r"bytes=(\d*)-(\d*)")


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """(first, last) of a single `bytes=` range within `size`, or None when the header asks
    for nothing this answers with a part (absent, several ranges, another unit): the whole
    file then, as RFC 9110 allows. Raises RangeNotSatisfiable."""
    match = RANGE.fullmatch(header.strip())
    if match is None:
        return None
    start, end = match.groups()
    if not start and not end:
        return None
    if not start:  # the last `end` bytes
        length = int(end)
        if length == 0 or size == 0:
            raise RangeNotSatisfiable(size)
        return max(0, size - length), size - 1
    first = int(start)
    last = size - 1 if not end else min(int(end), size - 1)
    if first >= size or (end and int(end) < first):
        raise RangeNotSatisfiable(size)
    return first, last


class RangeNotSatisfiable(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _chunks(handle: IO[bytes], left: int) -> Iterator[bytes]:
    try:
        while left > 0:
            data = handle.read(min(left, 64 * 1024))
            if not data:
                break
            left -= len(data)
            yield data
    finally:
        handle.close()


def artifact_response(
    request: HttpRequest, artifact: Artifact, *, inline: bool = False
) -> HttpResponse:
    """The version's bytes, streamed: all of them (200) or one Range (206; 416 past the end).

    Never a page of this origin: a type outside SAFE_TYPES is sent as application/octet-stream,
    with nosniff and a sandboxing CSP; `inline` (the dashboard's image previews) only for
    INLINE_IMAGE_TYPES, an attachment otherwise."""
    etag = f'"{artifact.sha256}"'
    try:
        wanted = _byte_range(request.headers.get("Range", ""), artifact.size)
    except RangeNotSatisfiable as exc:
        response = error_response(
            416,
            "range_not_satisfiable",
            f"The artifact has {exc.size} bytes.",
            {"size": exc.size},
        )
        response["Content-Range"] = f"bytes */{exc.size}"
        return response
    if_range = request.headers.get("If-Range")
    if wanted is not None and if_range is not None and if_range != etag:
        wanted = None  # the client's copy is of other bytes: send the whole file
    handle = open_artifact(artifact)
    if wanted is None:
        first, last, status = 0, artifact.size - 1, 200
    else:
        (first, last), status = wanted, 206
        handle.seek(first)
    safe = artifact.content_type in SAFE_TYPES
    content_type = artifact.content_type if safe else "application/octet-stream"
    response = StreamingHttpResponse(
        _chunks(handle, last - first + 1), status=status, content_type=content_type
    )
    response["Content-Length"] = str(last - first + 1)
    if status == 206:
        response["Content-Range"] = f"bytes {first}-{last}/{artifact.size}"
    response["Accept-Ranges"] = "bytes"
    response["ETag"] = etag
    disposition = (
        "inline" if inline and artifact.content_type in INLINE_IMAGE_TYPES else "attachment"
    )
    # The name's characters need no quoting (services.artifacts.NAME_PATTERN).
    response["Content-Disposition"] = f'{disposition}; filename="{artifact.name}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, no-cache"
    return response
