"""HTTP responses shared by the API and the dashboard."""

from collections.abc import AsyncIterator

from django.http import StreamingHttpResponse

from core.actors import Actor
from sessions_app.models import Session
from sessions_app.queries import event_row_to_json

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
