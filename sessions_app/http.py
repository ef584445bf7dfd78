"""HTTP responses shared by the API and the dashboard."""

import json
from collections.abc import AsyncIterator
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse

from .actors import Actor
from .models import Session
from .queries import event_row_to_json
from .services.sessions import export_session


def jsonl_export_response(session: Session, *, actor: Actor) -> StreamingHttpResponse:
    """The session's visible log as a JSON Lines download, streamed in keyset chunks.

    An async iterator: under ASGI, Django reads a sync iterator whole before sending it, and
    memory must stay flat for a million-event session.
    """
    rows = export_session(session, actor=actor)

    async def lines() -> AsyncIterator[str]:
        async for row in rows:
            yield event_row_to_json(row) + "\n"

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="session-{session.pk}.jsonl"'
    return response


def json_response(payload: Any, status: int = 200) -> HttpResponse:
    """Compact JSON; Decimals, UUIDs and datetimes already arrive as strings or go through str."""
    return HttpResponse(
        json.dumps(payload, default=str, separators=(",", ":")),
        status=status,
        content_type="application/json",
    )
