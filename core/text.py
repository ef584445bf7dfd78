"""Text PostgreSQL can store: the one check every edge and service uses for client strings.

PostgreSQL's text and jsonb refuse a NUL character (U+0000), and psycopg cannot encode a lone
surrogate (U+D800..U+DFFF, which JSON's "\\ud800" escape produces) as UTF-8. Either one, left
to reach the database, turns into a DataError quoting SQL, or a UnicodeEncodeError that is no
database error at all (a 500). Checked at the edge, it is a 422 that names the field.

jsonb refuses a number that is not finite too (NaN, Infinity: Python's json reads both, and
"1e400" as infinity), and a JSON encoder other than Python's (orjson, which the append's storage
uses) would write it as null: found here as well, it is refused naming the field, and never
reaches an encoder that would change it.

Nesting and integers are bounded too. A value nested about a thousand levels deep is accepted by
jsonb and by json.loads, but every reader that walks it (the state fold, a snapshot's hash, the
pages' pretty-printing) then hits Python's recursion limit, for good: a stored denial of
service. An integer of more than 4,300 digits is refused by Python's int-to-text conversion (a
ValueError, not a JSONDecodeError), and long ones cost quadratic time to convert. So no stored
JSON value may nest deeper than MAX_JSON_DEPTH levels or hold an integer of more than
MAX_INTEGER_DIGITS digits; readers of values stored before the bound refuse the few they
cannot walk (loads_stored) instead of failing.
"""

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from core.errors import InvalidInput, StoredValueTooDeep

Path = tuple[str | int, ...]

NUL_CHARACTER = "a NUL character (\\u0000)"
LONE_SURROGATE = "a lone surrogate (\\ud800-\\udfff), which is not valid Unicode"
NOT_FINITE = "a number that is not finite (NaN or infinity), which JSON cannot hold"

# Levels of objects and arrays in one stored value ({"a": 1} is one level): far more than any
# agent's content needs, and far from the depth at which the readers' recursion fails.
MAX_JSON_DEPTH = 64
# Digits of an integer: a 128-bit id has 39; Python refuses to convert more than 4,300.
MAX_INTEGER_DIGITS = 100
# A request body's own levels above its deepest free JSON value (`events[0].content`): the
# check of a whole body allows these on top of MAX_JSON_DEPTH, the services' check of each
# value then holds it to MAX_JSON_DEPTH exactly.
BODY_LEVELS = 3
# What the readers walk safely (a fold or a pretty-print takes about one frame per level, under
# Python's limit of 1,000 with a request's own couple of hundred): values the system wraps
# around a client's (a fact in a snapshot) and values stored before the bound are read up to
# this depth; a deeper one is refused as StoredValueTooDeep.
MAX_READABLE_DEPTH = 200

TOO_DEEP = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
TOO_LONG_INTEGER = f"an integer of more than {MAX_INTEGER_DIGITS} digits"
_LARGEST_INTEGER = 10**MAX_INTEGER_DIGITS - 1
# A path named in an error: its first parts, so a key of any length is not echoed 64 times.
_PATH_PARTS_SHOWN = 8


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored, or None."""
    if "\x00" in text:
        return NUL_CHARACTER
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return LONE_SURROGATE
    return None


def find_unstorable(
    value: Any, path: Path = (), *, max_depth: int = MAX_JSON_DEPTH
) -> tuple[Path, str] | None:
    """The path to the first string in `value` (a JSON-like tree: dicts, lists, strings,
    including dict keys) or number that cannot be stored, or to the first object or array
    nested deeper than `max_depth` levels, and why; None when all can be."""
    if isinstance(value, Mapping | list | tuple) and _clean(value, max_depth):
        return None
    return _find(value, path, max_depth)


def _clean(value: Any, max_depth: int) -> bool:
    """True when no string or number in `value` can be unstorable and it nests at most
    `max_depth` levels: one pass in C (json's encoder writes a NUL as the escape \\u0000,
    leaves a lone surrogate as it is, which UTF-8 refuses, and raises on a number that is not
    finite), several times faster than walking the tree in Python, which only a suspect value
    needs."""
    try:
        dumped = json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
    except (ValueError, RecursionError):
        return False  # a number that is not finite or too long to write, or nesting too deep
    if "\\u0000" in dumped:
        return False  # or a text holding a backslash and "u0000": the walk tells them apart
    try:
        dumped.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return within_bounds(value, max_depth)


# A JSON string, escapes included (unrolled: no backtracking over long texts).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
# An object or array with no object or array inside it.
_INNERMOST = re.compile(r"[\[{][^\[\]{}]*[\]}]")


def json_text_nests_deeper(dumped: str, max_depth: int) -> bool:
    """True when JSON text nests deeper than `max_depth` levels, told by C-speed scans: it has
    no more brackets than levels allowed (most content), or, its strings removed, `max_depth`
    rounds of removing the innermost brackets leave none."""
    if dumped.count("{") + dumped.count("[") <= max_depth:
        return False
    skeleton = _JSON_STRING.sub("", dumped)
    for _ in range(max_depth):
        skeleton, removed = _INNERMOST.subn("", skeleton)
        if not removed:
            return False
    return "{" in skeleton or "[" in skeleton


def within_bounds(value: Any, max_depth: int) -> bool:
    """True when `value` nests at most `max_depth` levels and holds no integer longer than
    MAX_INTEGER_DIGITS: one pass, level by level, in which only objects and arrays are gone
    into (about a twentieth of a millisecond for a batch of 100 events; the regular
    expressions that read the same from JSON text took twenty times that)."""
    level = [value] if type(value) in _CONTAINERS else []
    for _ in range(max_depth):
        if not level:
            return True
        deeper = []
        for container in level:
            for item in container.values() if type(container) is dict else container:
                kind = type(item)
                if kind in _CONTAINERS:
                    deeper.append(item)
                elif kind is int and not -_LARGEST_INTEGER <= item <= _LARGEST_INTEGER:
                    return False
        level = deeper
    return not level


_CONTAINERS = frozenset({dict, list, tuple})


def _find(value: Any, path: Path, levels_left: int) -> tuple[Path, str] | None:
    if isinstance(value, str):
        problem = text_problem(value)
        return (path, problem) if problem else None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, NOT_FINITE)
    if isinstance(value, int) and not isinstance(value, bool):
        return None if -_LARGEST_INTEGER <= value <= _LARGEST_INTEGER else (path, TOO_LONG_INTEGER)
    if isinstance(value, Mapping | list | tuple) and levels_left <= 0:
        return path, TOO_DEEP  # and the walk goes no deeper: its recursion stays bounded
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and (problem := text_problem(key)):
                return (*path, key), problem
            if found := _find(item, (*path, key), levels_left - 1):
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if found := _find(item, (*path, index), levels_left - 1):
                return found
    return None


def dotted(path: Path) -> str:
    """`("content", "items", 0)` as "content.items[0]"; a path of more than a few parts (one
    too deep) shortened to its first ones and "…"."""
    out = ""
    for part in path[:_PATH_PARTS_SHOWN]:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out + "…" if len(path) > _PATH_PARTS_SHOWN else out


def check_storable(value: Any, *, field: str, body: bool = False, **detail: Any) -> None:
    """Raise InvalidInput naming the field (and any `detail`, such as the event's index) when
    a string in `value` cannot be stored, a number is not finite or too long, or it nests too
    deep. With `field` empty, the path inside `value` is the field's name. `body`: `value` is a
    whole request body, whose own levels (BODY_LEVELS) are allowed on top of the bound."""
    if type(value) is str and text_problem(value) is None:
        return  # most calls (an event's role, its key: two per event of a batch), told at once
    max_depth = MAX_JSON_DEPTH + (BODY_LEVELS if body else 0)
    found = find_unstorable(value, max_depth=max_depth)
    if found is None:
        return
    path, problem = found
    where = dotted((field, *path) if field else path)
    raise InvalidInput(
        f"{where} holds {problem}; it cannot be stored.",
        detail={**detail, "field": where, "problem": problem},
    )


def check_storable_values(**values: Any) -> None:
    """check_storable for each named value a service stores (None: not given)."""
    for field, value in values.items():
        if value is not None:
            check_storable(value, field=field)


def loads_client_json(text: str | bytes, *, field: str) -> Any:
    """json.loads of JSON a client sent, where what Python's parser cannot take is InvalidInput
    naming `field`: nesting past its recursion limit (a RecursionError) or an integer past its
    4,300 digits (a ValueError). Malformed JSON still raises json.JSONDecodeError. The value
    parsed is not checked: check_storable does that, naming the place inside it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        problem = TOO_DEEP
    except ValueError:
        problem = TOO_LONG_INTEGER
    raise InvalidInput(
        f"{field} holds {problem}; it cannot be stored.",
        detail={"field": field, "problem": problem},
    )


def loads_stored(text: str, *, what: str) -> Any:
    """json.loads of a value the database holds, refused as StoredValueTooDeep (naming `what`)
    when it nests deeper than the readers can walk: only a value stored before nesting was
    bounded can. The usual value (few brackets) is told apart by one count."""
    if json_text_nests_deeper(text, MAX_READABLE_DEPTH):
        raise StoredValueTooDeep(
            f"{what} holds JSON nested deeper than {MAX_READABLE_DEPTH} levels, stored before "
            f"nesting was bounded to {MAX_JSON_DEPTH}; it cannot be read here.",
            detail={"what": what, "limit": MAX_READABLE_DEPTH},
        )
    return json.loads(text)
