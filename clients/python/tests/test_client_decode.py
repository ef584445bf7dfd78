"""Answers' JSON into the typed models (_decode): every model from JSON made from its own
annotations, unknown keys ignored, defaults for absent optional keys, and the errors of a
missing key or a value that is not an object. No server needed."""

import dataclasses
import types
import typing
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from switchboard_client import models
from switchboard_client._decode import decode, json_name
from switchboard_client.errors import ResponseError

MODELS = sorted(
    (c for c in vars(models).values() if dataclasses.is_dataclass(c) and isinstance(c, type)),
    key=lambda c: c.__name__,
)


def sample(tp: Any, variant: int) -> tuple[Any, Any]:
    """JSON for a value of type `tp` and the value the client should make of it. `variant` 0
    gives every optional value, 1 makes them None and leaves out the keys that have defaults."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        data: dict[str, Any] = {"added_by_a_newer_server": {"x": 1}}
        kwargs = {}
        for f in dataclasses.fields(tp):
            has_default = f.default is not dataclasses.MISSING
            if variant and has_default:
                continue
            data[json_name(f)], kwargs[f.name] = sample(hints[f.name], variant)
        return data, tp(**kwargs)
    if tp is datetime:
        return "2026-11-27T19:40:14.123456+00:00", datetime(2026, 11, 27, 19, 40, 14, 123456, UTC)
    if tp is Decimal:
        return "0.000123", Decimal("0.000123")
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        rest = [a for a in args if a is not type(None)]
        if variant and len(rest) < len(args):
            return None, None
        return sample(rest[0], variant)
    if origin is list:
        one, made = sample(args[0], variant)
        return [one, one], [made, made]
    if origin is dict:
        one, made = sample(args[1], variant)
        return {"a": one}, {"a": made}
    if origin is typing.Literal:
        return args[0], args[0]
    if tp in (int, str, bool, float):
        return tp(1), tp(1)
    return {"any": [1, "two"]}, {"any": [1, "two"]}


@pytest.mark.parametrize("variant", [0, 1], ids=["all-values", "nones-and-defaults"])
@pytest.mark.parametrize("model", MODELS, ids=lambda c: c.__name__)
def test_every_model_decodes_to_what_its_json_says(model, variant):
    data, expected = sample(model, variant)
    decoded = decode(model, data)
    assert decoded == expected
    # Equal is not enough for numbers: Decimal("1") == 1.
    for f in dataclasses.fields(model):
        assert type(getattr(decoded, f.name)) is type(getattr(expected, f.name)), f.name


def test_it_decodes_a_slice_of_events_in_order_with_their_types():
    data, _ = sample(models.Event, 0)
    events = [dict(data, seq=seq, cost=str(seq), idempotency_key=None) for seq in (3, 2, 1)]
    page = decode(
        models.EventSlice, {"head_seq": 3, "has_more": False, "compacted": [], "events": events}
    )
    assert [e.seq for e in page.events] == [3, 2, 1]
    assert [e.cost for e in page.events] == [Decimal(3), Decimal(2), Decimal(1)]
    assert page.events[0].idempotency_key is None
    assert page.events[0].created_at == datetime(2026, 11, 27, 19, 40, 14, 123456, UTC)
    assert page.compacted == []


def test_a_key_named_from_is_read_into_from_():
    model = next(c for c in MODELS if "from_" in {f.name for f in dataclasses.fields(c)})
    data, _ = sample(model, 0)
    data["from"] = "the-sender"
    assert decode(model, data).from_ == "the-sender"


def test_a_missing_required_key_is_a_response_error_naming_the_model_and_key():
    data, _ = sample(models.Event, 0)
    del data["created_at"], data["kind"]
    with pytest.raises(ResponseError) as raised:
        decode(models.Event, data)
    # The first missing one, in the model's field order.
    assert raised.value.message == "Event: the response has no 'kind'"


def test_a_missing_key_in_a_nested_model_names_that_model():
    data, _ = sample(models.Event, 0)
    del data["session_id"]
    answer = {"head_seq": 1, "has_more": False, "compacted": [], "events": [data]}
    with pytest.raises(ResponseError, match=r"^error: Event: the response has no 'session_id'$"):
        decode(models.EventSlice, answer)


def test_a_value_that_is_not_an_object_is_a_response_error():
    # str() of the error is "<code>: <message>", the code "error" as no status came with it.
    with pytest.raises(ResponseError, match=r"^error: expected an object for Event, got list$"):
        decode(models.Event, [])
    answer = {"head_seq": 1, "has_more": False, "compacted": [], "events": ["seq"]}
    with pytest.raises(ResponseError, match=r"^error: expected an object for Event, got str$"):
        decode(models.EventSlice, answer)


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    """A slots dataclass like the models, but with a __post_init__: built by calling it."""

    at: datetime | None
    tags: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.tags == ["refused"]:
            raise ValueError("refused")


def test_a_dataclass_with_a_post_init_is_built_through_it():
    assert decode(_Checked, {"at": None}) == _Checked(at=None, tags=[])
    with pytest.raises(ValueError, match="refused"):
        decode(_Checked, {"at": None, "tags": ["refused"]})
    with pytest.raises(ResponseError, match=r"^error: _Checked: the response has no 'at'$"):
        decode(_Checked, {"tags": []})
