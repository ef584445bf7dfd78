"""Run in spawned processes by test_claim_race.py (module level, importable by children)."""

from django.conf import settings
from django.test import Client

from tests.multiproc import barrier


def claim_over_http(handoff_id: str, session_key: str) -> str:
    """One person's browser pressing "Claim": ready first, then all at once (the barrier)."""
    client = Client(raise_request_exception=False)
    client.cookies[settings.SESSION_COOKIE_NAME] = session_key
    url = f"/handoffs/{handoff_id}/claim/"
    barrier().wait()
    response = client.post(url)
    return f"{response.status_code} {response.get('Location', '')}".strip()
