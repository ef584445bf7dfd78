"""Shared builders of the handoff tests: through the services, as the product does."""

from core.actors import Actor
from core.models import Role
from handoffs_app.services.handoffs import request_handoff
from sessions_app.models import Event
from tests.factories import make_member, make_session

AGENT = Actor.system("tests-agent")

APPROVAL = {
    "action_request": {"action": "refund", "args": {"order": "A-1001", "amount": "120.00"}},
    "config": {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": True,
        "allow_ignore": False,
    },
    "description": "Refund a late order.",
}
QUESTION = {"question": "Ship to the old address?", "choices": ["yes", "no"]}


def ask(session, kind="approval", payload=None, **kwargs):
    payload = payload if payload is not None else (APPROVAL if kind == "approval" else QUESTION)
    if kind == "takeover" and payload is QUESTION:
        payload = {}
    return request_handoff(
        session, kind=kind, reason="need a person", payload=payload, actor=AGENT, **kwargs
    ).handoff


def handoff_records(session):
    return list(
        Event.objects.filter(session_id=session.pk, kind="handoff")
        .order_by("seq")
        .values_list("content", flat=True)
    )


def steps(session):
    return [c["step"] for c in handoff_records(session)]


def operator(project, name=None):
    return make_member(project, Role.OPERATOR, name)


__all__ = ["AGENT", "APPROVAL", "QUESTION", "ask", "make_session", "operator", "steps"]
