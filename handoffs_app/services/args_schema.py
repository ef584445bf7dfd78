"""An approval's optional JSON Schema for its action's arguments (`action_request.args_schema`).

The agent may describe the arguments it proposes; the dashboard then edits the schema's simple
top-level properties as form fields, and every edited set of arguments (from those fields or
as raw JSON) is validated against it before the handoff is answered. Checked when the handoff
is asked for: a JSON object of bounded size and depth that is itself a valid schema (of the
draft its `$schema` names, 2020-12 by default), whose `$ref`s stay inside it (nothing is ever
fetched), and that the proposed arguments satisfy. Pure checks, no database.

Its regular expressions ("pattern", "patternProperties") run on what operators type, so they
run on RE2 (google-re2), which matches in time linear in the text: an agent's pattern such as
"^(a+)+$" cannot make a request backtrack for minutes as Python's re would. A pattern RE2 does
not take (backreferences, lookaround) is refused when the handoff is asked for.
"""

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import SchemaError
from jsonschema.validators import extend, validator_for
from referencing import Registry

from core.errors import InvalidInput

# A schema describes one action's arguments: a few kilobytes, a handful of levels.
MAX_SCHEMA_CHARS = 20_000
MAX_SCHEMA_DEPTH = 12
# Keywords whose string values name another schema (only local ones, "#…", are allowed).
REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
FIELD = "payload.action_request.args_schema"


def _bad_schema(message: str, **detail: Any) -> InvalidInput:
    return InvalidInput(message, detail={"field": FIELD, **detail})


def _depth(value: Any) -> int:
    """How deep `value` nests (a scalar: 0); stops counting past the bound."""
    stack = [(value, 0)]
    deepest = 0
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level + 1)
            if deepest > MAX_SCHEMA_DEPTH:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, level + 1) for child in children)
    return deepest


def _remote_ref(value: Any) -> str | None:
    """The first `$ref`-like value in `value` that points outside the schema, if any."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, item in node.items():
                if key in REF_KEYWORDS and isinstance(item, str) and not item.startswith("#"):
                    return item
                stack.append(item)
        elif isinstance(node, list):
            stack.extend(node)
    return None


@functools.lru_cache(maxsize=256)
def _re2(pattern: str) -> Any:
    """`pattern` compiled by RE2 (re2.error when RE2 does not take it); quietly: a refused
    pattern is the agent's mistake, said in the 422, not a log line."""
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def _patterns(value: Any) -> Iterator[str]:
    """Every regular expression in `value`: "pattern" strings and "patternProperties" keys."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                yield node["pattern"]
            if isinstance(node.get("patternProperties"), dict):
                yield from node["patternProperties"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _has_keyword(value: Any, keyword: str) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if keyword in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


# jsonschema's own "pattern", "patternProperties" and "additionalProperties" (which skips the
# names patternProperties match) search with Python's re; these search with RE2.
def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Any:
    if validator.is_type(instance, "string") and not _re2(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Any:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _re2(pattern).search(name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: dict[str, Any]
) -> Any:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = [_re2(p) for p in schema.get("patternProperties", {})]
    extras = sorted(
        name for name in instance if name not in named and not any(p.search(name) for p in patterns)
    )
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError(
            f"Additional properties are not allowed ({', '.join(repr(e) for e in extras)} "
            f"{'was' if len(extras) == 1 else 'were'} unexpected)"
        )


@functools.lru_cache(maxsize=8)
def _linear_time(cls: Any) -> Any:
    return extend(
        cls,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )


def validator_of(schema: dict[str, Any]) -> Any:
    """A validator of `schema` (already checked) that resolves only references inside it (an
    empty registry: no remote retrieval), asserts the formats it knows and matches its
    patterns with RE2."""
    cls = _linear_time(validator_for(schema, default=Draft202012Validator))
    return cls(schema, registry=Registry(), format_checker=cls.FORMAT_CHECKER)


def check_args_schema(schema: Any, args: dict[str, Any]) -> None:
    """`schema` as an approval's args_schema: InvalidInput (422, field
    payload.action_request.args_schema) naming what is wrong, or the proposed `args` that do
    not satisfy it."""
    if not isinstance(schema, dict):
        raise _bad_schema('"action_request.args_schema" must be a JSON Schema (a JSON object).')
    if len(json.dumps(schema, ensure_ascii=False)) > MAX_SCHEMA_CHARS:
        raise _bad_schema(
            f'"action_request.args_schema" holds at most {MAX_SCHEMA_CHARS} characters of JSON.',
            max_chars=MAX_SCHEMA_CHARS,
        )
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise _bad_schema(
            f'"action_request.args_schema" nests at most {MAX_SCHEMA_DEPTH} levels deep.',
            max_depth=MAX_SCHEMA_DEPTH,
        )
    if "type" in schema and schema["type"] != "object":
        raise _bad_schema(
            '"action_request.args_schema" describes the arguments object: its "type" must be '
            '"object".'
        )
    if "$schema" in schema and (
        not isinstance(schema["$schema"], str) or validator_for(schema, default=None) is None
    ):
        raise _bad_schema(
            f'"action_request.args_schema" names a $schema this server does not know '
            f"({str(schema['$schema'])[:200]!r}); leave it out for draft 2020-12."
        )
    remote = _remote_ref(schema)
    if remote is not None:
        raise _bad_schema(
            f'"action_request.args_schema" may refer only to its own parts ("#/…"), not '
            f"{remote[:200]!r}: nothing is fetched.",
        )
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as error:
        where = ".".join(str(p) for p in error.absolute_path)
        raise _bad_schema(
            f'"action_request.args_schema" is not a valid JSON Schema'
            f"{f' (at {where})' if where else ''}: {error.message[:300]}",
        ) from None
    for pattern in _patterns(schema):
        try:
            _re2(pattern)
        except re2.error as error:
            said = error.args[0] if error.args else ""
            said = said.decode(errors="replace") if isinstance(said, bytes) else str(said)
            raise _bad_schema(
                f'"action_request.args_schema" has a pattern this server does not run '
                f"({pattern[:200]!r}: {said[:200]}); patterns are matched by RE2, which "
                "has no backreferences or lookaround.",
            ) from None
    if _has_keyword(schema, "patternProperties") and _has_keyword(schema, "unevaluatedProperties"):
        # jsonschema's unevaluatedProperties would match patternProperties with Python's re.
        raise _bad_schema(
            '"action_request.args_schema" may not use "patternProperties" together with '
            '"unevaluatedProperties"; use "additionalProperties".'
        )
    problems = args_problems(schema, args)
    if problems:
        first = problems[0]
        raise InvalidInput(
            f'The proposed "action_request.args" do not satisfy args_schema: {first.sentence}',
            detail={"field": "payload.action_request.args", "problems": _listed(problems)},
        )


@dataclass(frozen=True)
class ArgsProblem:
    """One way a set of arguments fails the schema: `name` the top-level argument it concerns
    ("" when it is about the whole object), `path` where inside it, `message` what."""

    name: str
    path: str
    message: str

    @property
    def sentence(self) -> str:
        where = self.path or self.name
        return f"{where}: {self.message}" if where else self.message


TYPE_WORDS = {
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "a JSON object",
    "array": "a list",
    "null": "null",
}


def _words(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:100]


def _message(error: ValidationError) -> str:
    """What is wrong, in words a person reads (jsonschema's own message for the rest)."""
    keyword, limit = error.validator, error.validator_value
    said = {
        "minimum": lambda: f"must be at least {_words(limit)}.",
        "exclusiveMinimum": lambda: f"must be more than {_words(limit)}.",
        "maximum": lambda: f"must be at most {_words(limit)}.",
        "exclusiveMaximum": lambda: f"must be less than {_words(limit)}.",
        "minLength": lambda: f"must be at least {_words(limit)} characters long.",
        "maxLength": lambda: f"must be at most {_words(limit)} characters long.",
        "pattern": lambda: f"does not have the expected form ({_words(limit)}).",
        "enum": lambda: "must be one of " + ", ".join(_words(v) for v in limit[:20]) + ".",
        "const": lambda: f"must be {_words(limit)}.",
        "format": lambda: f"must be a valid {_words(limit)}.",
        "multipleOf": lambda: f"must be a multiple of {_words(limit)}.",
        "type": lambda: (
            "must be "
            + " or ".join(
                TYPE_WORDS.get(str(t), str(t))
                for t in (limit if isinstance(limit, list) else [limit])
            )
            + "."
        ),
    }.get(str(keyword))
    message = said() if said is not None else error.message
    return message if len(message) <= 300 else message[:300] + "…"


def _problem(error: ValidationError) -> ArgsProblem:
    path = [str(p) for p in error.absolute_path]
    if error.validator == "required" and not path:
        # "'amount' is a required property": the missing argument is the one to name.
        missing = [
            name
            for name in error.validator_value
            if isinstance(error.instance, dict) and name not in error.instance
        ]
        name = str(missing[0]) if missing else ""
        return ArgsProblem(name=name, path=name, message="is required.")
    return ArgsProblem(name=path[0] if path else "", path=".".join(path), message=_message(error))


def args_problems(schema: dict[str, Any], args: Any) -> list[ArgsProblem]:
    """Every way `args` fails `schema` (a checked schema), most shallow first; [] when valid."""
    errors = sorted(
        validator_of(schema).iter_errors(args),
        key=lambda e: (len(e.absolute_path), [str(p) for p in e.absolute_path], e.message),
    )
    return [_problem(error) for error in errors[:20]]


def _listed(problems: list[ArgsProblem]) -> list[dict[str, str]]:
    return [{"argument": p.name, "at": p.path, "message": p.message} for p in problems]


def check_args(schema: dict[str, Any], args: dict[str, Any]) -> None:
    """Edited `args` against the handoff's schema: InvalidInput (422, field `args`) naming the
    first argument that fails it, every problem in the detail."""
    problems = args_problems(schema, args)
    if problems:
        raise InvalidInput(
            f"The arguments do not satisfy the action's schema: {problems[0].sentence}",
            detail={"field": "args", "problems": _listed(problems)},
        )


def schema_of(payload: Any) -> dict[str, Any] | None:
    """The approval payload's args_schema, or None when it has none."""
    if not isinstance(payload, dict):
        return None
    request = payload.get("action_request")
    schema = request.get("args_schema") if isinstance(request, dict) else None
    return schema if isinstance(schema, dict) else None
