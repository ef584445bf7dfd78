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


def _datetime(value: Any) -> datetime:
    return datetime.fromisoformat(value)


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


def _dataclass(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    plan = [
        (
            json_name(f),
            f.name,
            decoder_for(hints[f.name]),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    ]

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
