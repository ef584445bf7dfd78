"""What a handoff request and an answer may hold (pure checks, no database).

Approval payloads follow the shape LangGraph's Agent Inbox made common:
`{"action_request": {"action": str, "args": {...}, "args_schema"?: {...}}, "config":
{"allow_accept": bool, "allow_edit": bool, "allow_respond": bool, "allow_ignore": bool},
"description": str}`; `args_schema`, Switchboard's addition, is a JSON Schema of `args`
(services.args_schema). Answer types map onto its response types: `accept`, `edit`
(edit-and-accept), `respond` (Agent Inbox's "response") and `ignore` (its "ignore": the person
dismisses the request, the handoff ends `ignored` and the agent goes on without the action).
`reject` is Switchboard's own: the person refuses the action, saying why; allowed where
ignoring is (allow_ignore), since either way the action is not taken.
"""

from datetime import timedelta
from typing import Any

from core.errors import InvalidInput
from core.text import check_storable

from ..errors import AnswerNotAllowed
from ..models import AGENT_KINDS, HandoffKind, Priority
from .args_schema import check_args_schema

CONFIG_FLAGS = ("allow_accept", "allow_edit", "allow_respond", "allow_ignore")
# Which config flag each answer type of an approval needs.
APPROVAL_ANSWERS = {
    "accept": "allow_accept",
    "edit": "allow_edit",
    "respond": "allow_respond",
    "reject": "allow_ignore",
    "ignore": "allow_ignore",
}
# Answer types per kind (approvals further limited by their config).
ANSWERS_BY_KIND: dict[str, frozenset[str]] = {
    HandoffKind.QUESTION: frozenset({"respond"}),
    HandoffKind.APPROVAL: frozenset(APPROVAL_ANSWERS),
    HandoffKind.TAKEOVER: frozenset(),
    HandoffKind.BUDGET: frozenset({"budget"}),
}
MAX_DUE = timedelta(days=30)
MAX_CHOICES = 50


def validate_kind(kind: str, *, system: bool = False) -> HandoffKind:
    allowed = list(HandoffKind) if system else list(AGENT_KINDS)
    if kind not in allowed:
        raise InvalidInput(
            f"Unknown handoff kind {kind!r}.",
            detail={"field": "kind", "kind": kind, "allowed": sorted(str(k) for k in allowed)},
        )
    return HandoffKind(kind)


def validate_priority(priority: str) -> Priority:
    try:
        return Priority.from_name(priority)
    except ValueError:
        raise InvalidInput(
            f"Unknown priority {priority!r}.",
            detail={"field": "priority", "allowed": [p.label for p in Priority]},
        ) from None


def validate_due_in(due_in: int | None) -> timedelta | None:
    if due_in is None:
        return None
    if not 0 < due_in <= MAX_DUE.total_seconds():
        raise InvalidInput(
            "due_in is a number of seconds between 1 and 30 days.",
            detail={"field": "due_in", "max": int(MAX_DUE.total_seconds())},
        )
    return timedelta(seconds=due_in)


def _bad_payload(message: str, **detail: Any) -> InvalidInput:
    return InvalidInput(message, detail={"field": "payload", **detail})


def validate_payload(kind: str, payload: Any) -> dict[str, Any]:
    """The payload, checked for its kind; InvalidInput (422) naming what is wrong."""
    if not isinstance(payload, dict):
        raise _bad_payload("A handoff payload is a JSON object.")
    check_storable(payload, field="payload")
    if kind == HandoffKind.QUESTION:
        question = payload.get("question")
        if not isinstance(question, str) or not question.strip():
            raise _bad_payload('A question needs a non-empty "question" string.')
        choices = payload.get("choices")
        if choices is not None and (
            not isinstance(choices, list)
            or not 0 < len(choices) <= MAX_CHOICES
            or not all(isinstance(c, str) and c for c in choices)
            or len(set(choices)) != len(choices)
        ):
            raise _bad_payload(
                f'"choices" is a list of 1 to {MAX_CHOICES} distinct non-empty strings.'
            )
    elif kind == HandoffKind.APPROVAL:
        request = payload.get("action_request")
        if not isinstance(request, dict):
            raise _bad_payload(
                'An approval needs "action_request": {"action": str, "args": {...}}.'
            )
        if not isinstance(request.get("action"), str) or not request["action"]:
            raise _bad_payload('"action_request.action" must be a non-empty string.')
        if not isinstance(request.get("args"), dict):
            raise _bad_payload('"action_request.args" must be a JSON object.')
        if "args_schema" in request:
            check_args_schema(request["args_schema"], request["args"])
        config = payload.get("config")
        if not isinstance(config, dict):
            raise _bad_payload(
                'An approval needs "config" with the booleans ' + ", ".join(CONFIG_FLAGS) + "."
            )
        unknown = sorted(set(config) - set(CONFIG_FLAGS))
        wrong = [f for f in CONFIG_FLAGS if not isinstance(config.get(f), bool)]
        if unknown or wrong:
            raise _bad_payload(
                '"config" holds exactly the booleans ' + ", ".join(CONFIG_FLAGS) + ".",
                unknown=unknown,
                not_boolean=wrong,
            )
        if not any(config[f] for f in CONFIG_FLAGS):
            raise _bad_payload('"config" allows no answer at all.')
        description = payload.get("description", "")
        if not isinstance(description, str):
            raise _bad_payload('"description" must be a string.')
    return payload


def allowed_answers(kind: str, payload: dict[str, Any]) -> list[str]:
    """The answer types a handoff of `kind` with `payload` accepts."""
    types = ANSWERS_BY_KIND[kind]
    if kind == HandoffKind.APPROVAL:
        config = payload.get("config", {})
        types = frozenset(t for t in types if config.get(APPROVAL_ANSWERS[t]))
    return sorted(types)


def check_answer_allowed(kind: str, payload: dict[str, Any], answer_type: str) -> None:
    allowed = allowed_answers(kind, payload)
    if answer_type not in allowed:
        accepts = ", ".join(allowed) if allowed else "no answer"
        raise AnswerNotAllowed(
            f"This {kind} handoff does not accept the answer {answer_type!r}; it accepts: "
            f"{accepts}.",
            detail={"answer": answer_type, "allowed": allowed},
        )
