"""Text PostgreSQL can store: the one check every edge and service uses for client strings.

PostgreSQL's text and jsonb refuse a NUL character (U+0000), and psycopg cannot encode a lone
surrogate (U+D800..U+DFFF, which JSON's "\\ud800" escape produces) as UTF-8. Either one, left
to reach the database, turns into a DataError quoting SQL, or a UnicodeEncodeError that is no
database error at all (a 500). Checked at the edge, it is a 422 that names the field.

jsonb refuses a number that is not finite too (NaN, Infinity: Python's json reads both, and
"1e400" as infinity), and a JSON encoder other than Python's (orjson, which the append's storage
uses) would write it as null: found here as well, it is refused naming the field, and never
reaches an encoder that would change it.
"""

import json
import math
from collections.abc import Mapping
from typing import Any

from core.errors import InvalidInput

Path = tuple[str | int, ...]

NUL_CHARACTER = "a NUL character (\\u0000)"
LONE_SURROGATE = "a lone surrogate (\\ud800-\\udfff), which is not valid Unicode"
NOT_FINITE = "a number that is not finite (NaN or infinity), which JSON cannot hold"


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


def find_unstorable(value: Any, path: Path = ()) -> tuple[Path, str] | None:
    """The path to the first string in `value` (a JSON-like tree: dicts, lists, strings,
    including dict keys) or number that cannot be stored, and why; None when all can be."""
    if isinstance(value, Mapping | list | tuple) and _clean(value):
        return None
    return _find(value, path)


def _clean(value: Any) -> bool:
    """True when no string or number in `value` can be unstorable: one pass in C (json's
    encoder writes a NUL as the escape \\u0000, leaves a lone surrogate as it is, which UTF-8
    refuses, and raises on a number that is not finite), several times faster than walking
    the tree in Python, which only a suspect value needs."""
    try:
        dumped = json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        return False  # a number that is not finite
    if "\\u0000" in dumped:
        return False  # or a text holding a backslash and "u0000": the walk tells them apart
    try:
        dumped.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _find(value: Any, path: Path) -> tuple[Path, str] | None:
    if isinstance(value, str):
        problem = text_problem(value)
        return (path, problem) if problem else None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, NOT_FINITE)
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and (problem := text_problem(key)):
                return (*path, key), problem
            if found := _find(item, (*path, key)):
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if found := _find(item, (*path, index)):
                return found
    return None


def dotted(path: Path) -> str:
    """`("content", "items", 0)` as "content.items[0]"."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def check_storable(value: Any, *, field: str, **detail: Any) -> None:
    """Raise InvalidInput naming the field (and any `detail`, such as the event's index) when
    a string in `value` cannot be stored. With `field` empty, the path inside `value` is the
    field's name."""
    found = find_unstorable(value)
    if found is None:
        return
    path, problem = found
    where = dotted((field, *path) if field else path)
    raise InvalidInput(
        f"{where} holds {problem}; it cannot be stored.",
        detail={**detail, "field": where, "problem": problem},
    )
