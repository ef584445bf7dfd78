import json

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from core.actors import Actor
from core.models import AuditEntry
from sessions_app.services.sessions import fork_session

# The export reads through a database connection of its own (the rows must be committed).
pytestmark = pytest.mark.django_db(transaction=True)


def read_stream(response) -> bytes:
    async def collect():
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()


def test_it_streams_the_log_as_json_lines_to_viewers(team, session):
    response = team.client("viewer").get(reverse("dashboard:session_export", args=[session.pk]))
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/x-ndjson"
    assert f"session-{session.pk}.jsonl" in response["Content-Disposition"]
    header, *lines = [json.loads(line) for line in read_stream(response).decode().splitlines()]
    assert header["session"]["id"] == str(session.pk)
    assert [e["seq"] for e in lines] == [1, 2, 3, 4, 5, 6]
    assert lines[0]["content"] == {"text": "Where is my refund?"}
    assert AuditEntry.objects.get(action="session.export").user == team.viewer


def test_it_exports_a_forks_history_through_its_lineage(team, session):
    fork = fork_session(session, at_seq=2, actor=Actor.system("t"))
    response = team.client("viewer").get(reverse("dashboard:session_export", args=[fork.pk]))
    header, *lines = [json.loads(line) for line in read_stream(response).decode().splitlines()]
    assert (header["session"]["parent_id"], header["session"]["fork_seq"]) == (str(session.pk), 2)
    assert [(e["seq"], e["session_id"]) for e in lines] == [
        (1, str(session.pk)),
        (2, str(session.pk)),
    ]


def test_it_hides_the_export_from_other_projects(team, session):
    response = team.client("outsider").get(reverse("dashboard:session_export", args=[session.pk]))
    assert response.status_code == 404
    assert not AuditEntry.objects.filter(action="session.export").exists()
