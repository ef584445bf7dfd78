"""Compaction summarisers: (previous summary, the transient events removed) -> summary text.

The default is deterministic and offline (same input, same text); another is plugged in with
the dotted path in SWITCHBOARD_SUMMARISER (e.g. one that calls an LLM).
"""

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

Summariser = Callable[[str, Sequence[dict[str, Any]]], str]

EXCERPT = 160


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT else text[: EXCERPT - 1] + "…"


def deterministic_summary(previous: str, events: Sequence[dict[str, Any]]) -> str:
    """Counts by kind, the seq range, and the first and last messages, in a fixed format."""
    lines = [previous] if previous else []
    if not events:
        return "\n".join(lines)
    seqs = [e["seq"] for e in events]
    kinds = Counter(str(e["kind"]) for e in events)
    counted = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    lines.append(f"Seqs {min(seqs)}–{max(seqs)} compacted: {counted}.")
    messages = [e for e in events if e["kind"] == "message" and e.get("text")]
    if messages:
        first, last = messages[0], messages[-1]
        lines.append(f"First message ({first['role'] or 'message'}): {_excerpt(first['text'])}")
        if last is not first:
            lines.append(f"Last message ({last['role'] or 'message'}): {_excerpt(last['text'])}")
    tools = sorted({str(e["content"].get("name")) for e in events if e["kind"] == "tool_call"})
    if tools:
        lines.append("Tools called: " + ", ".join(tools) + ".")
    errors = sum(1 for e in events if e["kind"] == "error")
    if errors:
        lines.append(f"{errors} error(s) reported.")
    return "\n".join(lines)


def summariser() -> tuple[str, Summariser]:
    """The configured summariser and its dotted path (ImportError if the setting is wrong)."""
    path: str = settings.SWITCHBOARD_SUMMARISER
    return path, import_string(path)
