"""API keys: stored hashed, revocable, and not written on every request."""

from datetime import timedelta

import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.actors import Actor
from core.models import ApiKey, AuditEntry
from core.services.projects import revoke_api_key
from sessions_app.models import Session
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_session


def test_it_stores_only_a_hash_of_the_key(project):
    api_key, raw = make_api_key(project)
    secret = raw.split("_", 2)[2]
    assert len(secret) >= 24
    stored = ApiKey.objects.filter(pk=api_key.pk).values().get()
    for value in stored.values():
        assert secret not in str(value)
    assert len(stored["hashed_secret"]) == 64 and stored["hashed_secret"] != raw
    assert raw.startswith(f"sb_{stored['prefix']}_")
    # Nothing else in the database holds it either (the audit entry names only the prefix).
    with connection.cursor() as cursor:
        cursor.execute("SELECT detail FROM core_auditentry")
        assert all(secret not in str(row) for row in cursor.fetchall())


def test_it_refuses_a_revoked_key_and_writes_nothing(api, api_key, project):
    session = make_session(project)
    assert api.get(f"/sessions/{session.pk}").status_code == 200
    revoke_api_key(api_key[0], actor=Actor.system("admin"))
    api_key[0].refresh_from_db()
    assert api_key[0].revoked_at is not None
    assert AuditEntry.objects.filter(action="api_key.revoke").count() == 1

    response = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert api.post("/sessions", {"agent": "x"}).status_code == 401
    session.refresh_from_db()
    assert session.head_seq == 0
    assert Session.objects.count() == 1
    # Revoking twice records nothing new.
    revoke_api_key(api_key[0], actor=Actor.system("admin"))
    assert AuditEntry.objects.filter(action="api_key.revoke").count() == 1


def test_it_writes_last_used_at_at_most_once_a_minute(project):
    api_key, raw = make_api_key(project)
    api = ApiClient(raw)
    assert api_key.last_used_at is None
    start = timezone.now()

    def key_updates(*requests_at: timedelta) -> int:
        with CaptureQueriesContext(connection) as queries:
            for offset in requests_at:
                with time_machine.travel(start + offset, tick=False):
                    assert api.get("/sessions").status_code == 200
        return sum(1 for q in queries if q["sql"].startswith('UPDATE "core_apikey"'))

    assert key_updates(timedelta(0)) == 1
    api_key.refresh_from_db()
    assert api_key.last_used_at == start

    # Many requests within the minute: no write at all.
    assert key_updates(*(timedelta(seconds=s) for s in (1, 10, 30, 59))) == 0
    api_key.refresh_from_db()
    assert api_key.last_used_at == start

    # After a minute, one write, then quiet again.
    assert key_updates(timedelta(seconds=61), timedelta(seconds=62), timedelta(seconds=90)) == 1
    api_key.refresh_from_db()
    assert api_key.last_used_at == start + timedelta(seconds=61)
