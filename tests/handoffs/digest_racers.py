"""Run in spawned processes by test_digest.py (module level, importable by children)."""

from handoffs_app.services.digest import send_due_digests


def send_digests() -> int:
    return send_due_digests().sent
