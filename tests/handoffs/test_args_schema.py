"""An approval's `action_request.args_schema`: checked when the handoff is asked for (a bounded
JSON Schema object, local references only, the proposed args satisfying it; 422 otherwise,
nothing written), and every edited set of arguments checked against it."""

import copy

import pytest

from core.errors import InvalidInput
from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from handoffs_app.services.args_schema import MAX_SCHEMA_CHARS, MAX_SCHEMA_DEPTH

from .helpers import APPROVAL, ask, make_session, operator

SCHEMA = {
    "type": "object",
    "properties": {
        "order": {"type": "string", "title": "Order", "minLength": 3},
        "amount": {"type": "number", "minimum": 0, "title": "Amount"},
        "count": {"type": "integer"},
        "notify": {"type": "boolean"},
        "channel": {"type": "string", "enum": ["email", "sms"]},
    },
    "required": ["order", "amount"],
    "additionalProperties": False,
}
ARGS = {"order": "A-1001", "amount": 120.5, "count": 2, "notify": True, "channel": "email"}


def with_schema(schema, args=ARGS):
    payload = copy.deepcopy(APPROVAL)
    payload["action_request"] = {"action": "refund", "args": args, "args_schema": schema}
    return payload


def deep_schema(levels):
    """A schema nesting 2 * levels + 1 JSON levels deep."""
    schema = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


@pytest.fixture
def session(project):
    return make_session(project)


def test_a_valid_schema_is_kept_with_the_request(session):
    handoff = ask(session, payload=with_schema(SCHEMA))
    assert Handoff.objects.get(pk=handoff.pk).payload["action_request"]["args_schema"] == SCHEMA


@pytest.mark.parametrize(
    ("schema", "args", "says"),
    [
        ("not a schema", ARGS, "must be a JSON Schema"),
        ({"type": "array"}, ARGS, '"type" must be "object"'),
        (
            {"type": "object", "properties": {"a": {"type": "strin"}}},
            ARGS,
            "not a valid JSON Schema",
        ),
        ({"$ref": "https://example.com/schema.json"}, ARGS, "refer only to its own parts"),
        ({"$schema": "https://example.com/mine"}, ARGS, "does not know"),
        ({"$schema": ["x"]}, ARGS, "does not know"),
        ({"properties": {f"p{i}": {"type": "string"} for i in range(2000)}}, ARGS, "at most"),
        (deep_schema(MAX_SCHEMA_DEPTH // 2), ARGS, "levels deep"),
        (SCHEMA, {**ARGS, "amount": -1}, "amount: must be at least 0."),
        (SCHEMA, {"amount": 1}, "order: is required."),
    ],
)
def test_a_bad_schema_or_args_that_fail_it_are_422_and_nothing_is_written(
    session, schema, args, says
):
    with pytest.raises(InvalidInput) as refused:
        ask(session, payload=with_schema(schema, args))
    assert refused.value.status == 422
    assert says in refused.value.message, refused.value.message
    assert refused.value.detail["field"].startswith("payload.action_request.args")
    session.refresh_from_db()
    assert (Handoff.objects.count(), session.status, session.head_seq) == (0, "open", 0)


def test_a_schema_just_inside_the_bounds_is_taken(session):
    assert ask(session, payload=with_schema(deep_schema(MAX_SCHEMA_DEPTH // 2 - 1), {}))
    wide = {"properties": {f"p{i}": {} for i in range(MAX_SCHEMA_CHARS // 14)}}
    assert ask(make_session(session.project), payload=with_schema(wide, {}))


def test_edited_args_must_satisfy_the_schema(project, session):
    user = operator(project)
    handoff = ask(session, payload=with_schema(SCHEMA))
    svc.claim_handoff(handoff, user=user)
    with pytest.raises(InvalidInput) as refused:
        svc.edit_and_accept(handoff, user=user, args={**ARGS, "count": "two"})
    assert refused.value.message.endswith("count: must be a whole number.")
    assert refused.value.detail["problems"][0]["argument"] == "count"
    with pytest.raises(InvalidInput):
        svc.edit_and_accept(handoff, user=user, args={**ARGS, "extra": 1})
    handoff.refresh_from_db()
    assert (handoff.status, handoff.answer) == ("claimed", None)
    svc.edit_and_accept(handoff, user=user, args={**ARGS, "amount": 99})
    assert handoff.answer["args"]["amount"] == 99


def test_without_a_schema_edits_are_as_before(project, session):
    user = operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=user)
    svc.edit_and_accept(handoff, user=user, args={"anything": ["goes", 1]})
    assert handoff.answer["args"] == {"anything": ["goes", 1]}


EVIL = "^(a+)+$"  # nested quantifiers: Python's re backtracks 2**40 ways on "a" * 40 + "b"
EVIL_TEXT = "a" * 40 + "b"


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"properties": {"order": {"type": "string", "pattern": r"(A)-\1"}}}, "does not run"),
        ({"properties": {"order": {"type": "string", "pattern": "^(?!B)"}}}, "does not run"),
        ({"patternProperties": {r"(?<=x)y": {}}}, "does not run"),
        (
            {"patternProperties": {"^x": {}}, "unevaluatedProperties": False},
            '"patternProperties" together with "unevaluatedProperties"',
        ),
    ],
)
def test_patterns_re2_does_not_run_are_422_when_asked(session, schema, says):
    with pytest.raises(InvalidInput) as refused:
        ask(session, payload=with_schema(schema, {"order": "A-1"}))
    assert says in refused.value.message, refused.value.message
    assert Handoff.objects.count() == 0


def test_an_agents_patterns_match_operator_values_in_linear_time(project, session):
    """The patterns run on RE2: a catastrophic-backtracking pattern refuses a value that would
    stall Python's re (the call returns), and "$" ends the text as in JSON Schema's ECMA-262,
    where Python's re would also take a trailing newline."""
    schema = {
        "type": "object",
        "properties": {
            "order": {"type": "string", "pattern": "^A-[0-9]+$"},
            "code": {"type": "string", "pattern": EVIL},
            "tags": {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}},
            "only": {
                "type": "object",
                "patternProperties": {EVIL: {}},
                "additionalProperties": False,
            },
        },
    }
    args = {"order": "A-1", "code": "aaa", "tags": {"aaa": 1}, "only": {"aa": None}}
    user = operator(project)
    handoff = ask(session, payload=with_schema(schema, args))
    svc.claim_handoff(handoff, user=user)
    for edited, says in [
        ({**args, "order": "A-1\n"}, "order: does not have the expected form"),
        ({**args, "code": EVIL_TEXT}, "code: does not have the expected form"),
        ({**args, "tags": {EVIL_TEXT: 1, "aaa": "one"}}, "tags.aaa: must be a whole number"),
        ({**args, "only": {EVIL_TEXT: None}}, "only: Additional properties are not allowed"),
    ]:
        with pytest.raises(InvalidInput) as refused:
            svc.edit_and_accept(handoff, user=user, args=edited)
        assert says in refused.value.message, refused.value.message
        assert len(refused.value.detail["problems"]) == 1, refused.value.detail
    handoff.refresh_from_db()
    assert (handoff.status, handoff.answer) == ("claimed", None)
    svc.edit_and_accept(handoff, user=user, args={**args, "tags": {"a" * 40: 2, "b": "any"}})
    assert handoff.answer["args"]["tags"] == {"a" * 40: 2, "b": "any"}
