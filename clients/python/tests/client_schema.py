"""The client held against the OpenAPI document the server serves.

`Drift(schema).check()` goes through every Operation the client makes (operations.OPERATIONS):
its method and path exist; each query parameter it may send is declared with a type that takes
what the client sends; each body field it may send is in the body's schema, with a compatible
type, and each field the schema requires is one the client always sends; every success status
the operation may answer is one the client reads, into a model whose every field the schema has,
with a type that holds every value the schema allows (nullable means Optional), always sent
unless the model gives it a default. It returns the problems found, in words.
"""

import dataclasses
import types
import typing
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from switchboard_client import operations
from switchboard_client._decode import json_name

API = "/api/v1"
# The OpenAPI extension listing an operation's parameter prefixes (core.schemas.QUERY_PREFIXES).
QUERY_PREFIXES = "x-query-parameter-prefixes"


def resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def operation_schema(schema: dict, operation: operations.Operation) -> dict | None:
    return (schema["paths"].get(API + operation.path) or {}).get(operation.method.lower())


def body_schema(schema: dict, served: dict) -> dict:
    """The object schema of an operation's JSON body ({} without one)."""
    content = served.get("requestBody", {}).get("content", {}).get("application/json")
    if content is None:
        return {}
    node = resolve(schema, content["schema"])
    for option in node.get("anyOf", []):
        if option.get("type") != "null":
            return resolve(schema, option)
    return node


def _members(tp: Any) -> tuple[list[Any], bool]:
    """A type's members and whether None is one (`X | None` -> [X], True)."""
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = typing.get_args(tp)
        members: list[Any] = []
        for arg in args:
            if arg is not type(None):
                members.extend(_members(arg)[0])
        return members, type(None) in args
    return [tp], False


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _enum(node: dict) -> set[Any] | None:
    if "enum" in node:
        return set(node["enum"])
    if "const" in node:
        return {node["const"]}
    return None


class Drift:
    def __init__(self, schema: dict) -> None:
        self.schema = schema
        self.unread: set[str] = set()  # schema fields no model reads (information)

    # --- schema nodes ---------------------------------------------------------------------

    def alternatives(self, node: dict) -> tuple[list[dict], bool]:
        """The non-null alternatives of a schema node, and whether null is allowed."""
        node = resolve(self.schema, node)
        options = node.get("anyOf") or node.get("oneOf")
        if options:
            found: list[dict] = []
            nullable = False
            for option in options:
                inner, null = self.alternatives(option)
                found.extend(inner)
                nullable = nullable or null
            return found, nullable
        kind = node.get("type")
        if isinstance(kind, list):
            return [{**node, "type": k} for k in kind if k != "null"], "null" in kind
        if kind == "null":
            return [], True
        return [node], False

    # --- what the client reads --------------------------------------------------------------

    def reads(self, tp: Any, node: dict, where: str) -> list[str]:
        if tp is Any:
            return []
        members, optional = _members(tp)
        alternatives, nullable = self.alternatives(node)
        problems = []
        if nullable and not optional:
            problems.append(f"{where}: the server may send null, the client's type is {tp}")
        for alternative in alternatives:
            tried = [self._read_one(member, alternative, where) for member in members]
            if all(tried):
                problems.extend(tried[0])
        return problems

    def _read_one(self, tp: Any, node: dict, where: str) -> list[str]:
        kind, origin, args = node.get("type"), typing.get_origin(tp), typing.get_args(tp)
        mismatch = [f"{where}: the client reads {tp}, the schema sends {_describe(node)}"]
        if tp is Any or not node:
            return [] if tp is Any else mismatch
        if dataclasses.is_dataclass(tp):
            return self.model(tp, node, where) if kind == "object" else mismatch
        if origin is Literal:
            values = _enum(node)
            return [] if values is not None and values <= set(args) else mismatch
        if origin is list:
            return (
                self.reads(args[0], node.get("items", {}), where + "[]")
                if kind == "array"
                else mismatch
            )
        if origin is dict:
            if kind != "object":
                return mismatch
            extra = node.get("additionalProperties", True)
            if args[1] is Any:
                return []
            return self.reads(args[1], extra, where + "{}") if isinstance(extra, dict) else mismatch
        ok = {
            str: kind == "string",
            int: kind == "integer",
            float: kind in ("number", "integer"),
            bool: kind == "boolean",
            Decimal: kind in ("string", "number"),
            datetime: kind == "string" and node.get("format") == "date-time",
        }.get(tp, False)
        return [] if ok else mismatch

    def model(self, cls: type, node: dict, where: str) -> list[str]:
        node = resolve(self.schema, node)
        properties, required = node.get("properties", {}), set(node.get("required", []))
        hints = typing.get_type_hints(cls)
        problems = []
        fields = dataclasses.fields(cls)
        for field in fields:
            key = json_name(field)
            if key not in properties:
                problems.append(f"{where}.{key}: the client reads it; the schema has no such field")
                continue
            problems += self.reads(hints[field.name], properties[key], f"{where}.{key}")
            always = (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            )
            if always and key not in required:
                problems.append(f"{where}.{key}: not always sent; the client requires it")
        read = {json_name(f) for f in fields}
        self.unread.update(f"{where}.{key}" for key in properties if key not in read)
        return problems

    # --- what the client sends --------------------------------------------------------------

    def sends(self, tp: Any, node: dict, where: str) -> list[str]:
        if tp is Any:
            return []
        members, optional = _members(tp)
        alternatives, nullable = self.alternatives(node)
        problems = []
        if optional and not nullable:
            problems.append(f"{where}: the client may send null; the schema does not take it")
        for member in members:
            tried = [self._send_one(member, alternative, where) for alternative in alternatives]
            if not tried:
                problems.append(f"{where}: the schema takes nothing but null")
            elif all(tried):
                problems.extend(tried[0])
        return problems

    def _send_one(self, tp: Any, node: dict, where: str) -> list[str]:
        kind, origin, args = node.get("type"), typing.get_origin(tp), typing.get_args(tp)
        mismatch = [f"{where}: the client sends {tp}, the schema takes {_describe(node)}"]
        if not node:
            return []
        values = _enum(node)
        if _is_typeddict(tp):
            return self.body(tp, node, where) if kind == "object" else mismatch
        if origin is Literal:
            if kind != "string" and values is None:
                return mismatch
            return [] if values is None or set(args) <= values else mismatch
        if origin in (list, Sequence):
            return (
                self.sends(args[0], node.get("items", {}), where + "[]")
                if kind == "array"
                else mismatch
            )
        if origin is dict:
            if kind != "object":
                return mismatch
            extra = node.get("additionalProperties", True)
            if extra is True or args[1] is Any:
                return []
            return self.sends(args[1], extra, where + "{}") if isinstance(extra, dict) else mismatch
        if values is not None and tp is not bool:
            return mismatch  # any str into an enum: the client must name the values (Literal)
        ok = {
            str: kind == "string",
            int: kind in ("integer", "number"),
            float: kind == "number",
            bool: kind == "boolean",
            Decimal: kind in ("string", "number"),
            datetime: kind == "string" and node.get("format") == "date-time",
        }.get(tp, False)
        return [] if ok else mismatch

    def body(self, td: type, node: dict, where: str) -> list[str]:
        node = resolve(self.schema, node)
        properties, required = node.get("properties", {}), set(node.get("required", []))
        problems = []
        for key, tp in typing.get_type_hints(td).items():
            if key not in properties:
                problems.append(f"{where}.{key}: the client sends it; the schema has no such field")
                continue
            problems += self.sends(tp, properties[key], f"{where}.{key}")
        for key in sorted(required - set(td.__required_keys__)):  # type: ignore[attr-defined]
            problems.append(f"{where}.{key}: required by the schema; the client may leave it out")
        return problems

    # --- operations -------------------------------------------------------------------------

    def operation(self, name: str, operation: operations.Operation) -> list[str]:
        where = f"{name} ({operation.method} {operation.path})"
        served = operation_schema(self.schema, operation)
        if served is None:
            return [f"{where}: the schema has no such operation"]

        problems: list[str] = []
        parameters = {(p["in"], p["name"]): p for p in served.get("parameters", [])}
        placeholders = {
            segment[1:-1] for segment in operation.path.split("/") if segment.startswith("{")
        }
        declared = {n for (place, n) in parameters if place == "path"}
        if placeholders != declared:
            problems.append(f"{where}: path parameters {placeholders}, schema {declared}")
        for query, tp in operation.query.items():
            parameter = parameters.get(("query", query))
            if parameter is None:
                problems.append(f"{where}: no query parameter {query!r}")
            else:
                problems += self.sends(tp, parameter["schema"], f"{where} ?{query}")
        for prefix in operation.query_prefixes:
            if prefix not in served.get(QUERY_PREFIXES, []):
                problems.append(f"{where}: no parameters {prefix}<name>")

        body = body_schema(self.schema, served)
        if operation.raw_body:
            # Bytes of any type (an artifact's file): served as a binary string, not JSON.
            content = served.get("requestBody", {}).get("content", {})
            if not content or "application/json" in content:
                problems.append(f"{where}: the client sends bytes; the schema takes {content}")
        elif operation.body is None:
            if served.get("requestBody", {}).get("required"):
                problems.append(f"{where}: the schema requires a body; the client sends none")
        elif not body:
            problems.append(f"{where}: the client sends a body; the schema takes none")
        else:
            problems += self.body(operation.body, body, f"{where} body")

        successes = {int(code) for code in served["responses"] if code.startswith("2")}
        for status in sorted(successes - set(operation.responses)):
            problems.append(f"{where}: may answer {status}, which the client does not read")
        for status, model in operation.responses.items():
            response = served["responses"].get(str(status))
            if response is None:
                problems.append(f"{where}: never answers {status}")
                continue
            content = response.get("content", {})
            if model is None:
                if "application/json" in content:
                    problems.append(f"{where} {status}: JSON, read by the client as a stream")
                continue
            if "application/json" not in content:
                problems.append(f"{where} {status}: not JSON; the client reads {model}")
                continue
            problems += self.reads(
                model, content["application/json"]["schema"], f"{where} {status}"
            )
        return problems

    def check(self) -> list[str]:
        problems: list[str] = []
        for name, operation in operations.OPERATIONS.items():
            problems += self.operation(name, operation)
        return problems

    def coverage(self) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
        """(operations the client calls, operations the schema serves) as (METHOD, path)."""
        served = {
            (method.upper(), path)
            for path, item in self.schema["paths"].items()
            for method in item
            if method in {"get", "post", "put", "patch", "delete"}
        }
        client = {(op.method, API + op.path) for op in operations.OPERATIONS.values()}
        return client & served, served


def _describe(node: dict) -> str:
    described = node.get("type", "any")
    if "format" in node:
        described += f" ({node['format']})"
    if _enum(node) is not None:
        described += f" {sorted(map(str, _enum(node) or []))}"
    return str(described)
