"""Text PostgreSQL can store: the one check every edge and service uses for client strings.

PostgreSQL's text and jsonb refuse a NUL character (U+0000), and psycopg cannot encode a lone
surrogate (U+D800..U+DFFF, which JSON's "\\ud800" escape produces) as UTF-8. Either one, left
to reach the database, turns into a DataError quoting SQL, or a UnicodeEncodeError that is no
database error at all (a 500). Checked at the edge, it is a 422 that names the field.
"""

from collections.abc import Mapping
from typing import Any

from core.errors import InvalidInput

Path = tuple[str | int, ...]

NUL_CHARACTER = "a NUL character (\\u0000)"
LONE_SURROGATE = "a lone surrogate (\\ud800-\\udfff), which is not valid Unicode"


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
    including dict keys) that cannot be stored, and why; None when every string can be."""
    if isinstance(value, str):
        problem = text_problem(value)
        return (path, problem) if problem else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and (problem := text_problem(key)):
                return (*path, key), problem
            if found := find_unstorable(item, (*path, key)):
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if found := find_unstorable(item, (*path, index)):
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
