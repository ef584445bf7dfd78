"""Run in spawned processes by test_claim_race.py (module level, importable by children)."""

from django.contrib.auth import get_user_model

from core.errors import DomainError
from handoffs_app.models import Handoff
from handoffs_app.services.handoffs import claim_handoff


def claim(handoff_id: str, user_id: int) -> str:
    handoff = Handoff.objects.get(pk=handoff_id)
    user = get_user_model().objects.get(pk=user_id)
    try:
        claim_handoff(handoff, user=user)
    except DomainError as exc:
        return f"{exc.status}:{exc.code}"
    return "won"
