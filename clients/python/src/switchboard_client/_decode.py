"""JSON to the typed models (frozen dataclasses), from their annotations.

One decoder is built per type, once, and reused: a response decodes in a pass over its JSON with
no per-call introspection. Unknown keys are ignored (a server newer than the client adds fields
freely); a missing required one raises ResponseError. Decimal and datetime fields are parsed
from the API's strings; everything else is taken as the JSON gives it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any

from .errors import ResponseError

Decoder = Callable[[Any], Any]


def json_name(field: dataclasses.Field[Any]) -> str:
    """The field's key in the API's JSON (`from` for a field named `from_`)."""
    name: str = field.metadata.get("json", field.name)
    return name


def _identity(value: Any) -> Any:
    return value


# Not wrapped: one call less per datetime.
_datetime = datetime.fromisoformat


def _decimal(value: Any) -> Decimal:
    return Decimal(str(value))


def _optional(inner: Decoder) -> Decoder:
    if inner is _identity:
        return _identity
    return lambda value: None if value is None else inner(value)


def _list(inner: Decoder) -> Decoder:
    if inner is _identity:
        return _identity
    return lambda value: [inner(item) for item in value]


def _dict(inner: Decoder) -> Decoder:
    if inner is _identity:
        return _identity
    return lambda value: {key: inner(item) for key, item in value.items()}


def _checked(cls: type, plan: list[tuple[str, str, Decoder, bool]]) -> Decoder:
    """The field-by-field decoder: the reference for what a dataclass's decoder does, and what
    the generated one falls back to on a missing key, so that its error is this one's."""

    def decode(value: Any) -> Any:
        if not isinstance(value, dict):
            got = type(value).__name__
            raise ResponseError(f"expected an object for {cls.__name__}, got {got}")
        kwargs = {}
        for key, name, decoder, required in plan:
            if key in value:
                kwargs[name] = decoder(value[key])
            elif required:
                raise ResponseError(f"{cls.__name__}: the response has no {key!r}")
        return cls(**kwargs)

    return decode


def _slot(cls: type, name: str) -> Any:
    """The slot of `name` that setting it on a `cls` instance sets (the first class in the MRO
    to have the name: a subclass's inherited fields are its base's slots), or None."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            found = klass.__dict__[name]
            return found if isinstance(found, types.MemberDescriptorType) else None
    return None


def _fills_slots_directly(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> bool:
    """Whether setting each field's slot on a bare instance makes what `cls(**fields)` makes:
    a slots dataclass whose __init__ does nothing but set its fields."""
    return not hasattr(cls, "__post_init__") and all(
        f.init and _slot(cls, f.name) is not None for f in fields
    )


def _dataclass(cls: type) -> Decoder:
    """A function made for `cls` alone (source generated once, as dataclasses makes __init__):
    the fields' keys are looked up in order, as the plan-walk of _checked does, with no call for
    a field taken as the JSON gives it. It is most of a client call's CPU: a slice of 58 events
    decoded about three times faster than by _checked.

    A missing required key shows as a KeyError; _checked then decodes the value again and
    raises its ResponseError. The models (frozen, slots, no __post_init__) are built by setting
    their slots on a bare instance, what their __init__ does at twice the cost; another
    dataclass is called with its fields as keywords."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    plan = [
        (
            json_name(f),
            f.name,
            decoder_for(hints[f.name]),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in fields
    ]
    direct = _fills_slots_directly(cls, fields)
    scope: dict[str, Any] = {
        "cls": cls,
        "new": object.__new__,
        "ResponseError": ResponseError,
        "checked": _checked(cls, plan),
    }
    lines = []
    for i, (f, (key, name, decoder, required)) in enumerate(zip(fields, plan, strict=True)):
        got = f"value[{key!r}]"
        if decoder is not _identity:
            scope[f"decode_{i}"] = decoder
            got = f"decode_{i}({got})"
        if direct:
            scope[f"set_{i}"] = _slot(cls, name).__set__
            line = f"set_{i}(obj, {got})"
            if required:
                lines.append(line)
                continue
            if f.default_factory is not dataclasses.MISSING:
                scope[f"default_{i}"] = f.default_factory
                absent = f"set_{i}(obj, default_{i}())"
            else:
                scope[f"default_{i}"] = f.default
                absent = f"set_{i}(obj, default_{i})"
            lines += [f"if {key!r} in value:", f"    {line}", "else:", f"    {absent}"]
        elif required:
            lines.append(f"kwargs[{name!r}] = {got}")
        else:
            lines += [f"if {key!r} in value:", f"    kwargs[{name!r}] = {got}"]
    if direct:
        lines = ["obj = new(cls)", *lines, "return obj"]
    else:
        lines = ["kwargs = {}", *lines, "return cls(**kwargs)"]
    body = "\n".join("        " + line for line in lines)
    source = (
        "def decode(value):\n"
        "    if not isinstance(value, dict):\n"
        "        got = type(value).__name__\n"
        f"        raise ResponseError(f'expected an object for {{cls.__name__}}, got {{got}}')\n"
        "    try:\n"
        f"{body}\n"
        "    except KeyError:\n"
        "        return checked(value)\n"
    )
    # The source is made above from the class's own fields, nothing from a response.
    exec(source, scope)
    decode: Decoder = scope["decode"]
    return decode


@cache
def decoder_for(tp: Any) -> Decoder:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp)
    if tp is datetime:
        return _datetime
    if tp is Decimal:
        return _decimal
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _optional(decoder_for(rest[0]))
        return _identity
    if origin is list:
        return _list(decoder_for(args[0]))
    if origin is dict:
        return _dict(decoder_for(args[1]))
    return _identity


def decode[T](cls: type[T], value: Any) -> T:
    tp: Any = cls
    result: T = decoder_for(tp)(value)
    return result
