"""HTTP responses shared by the API and the dashboard."""

from django.http import StreamingHttpResponse

from core.actors import Actor
from sessions_app.models import Session

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
