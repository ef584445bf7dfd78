"""Compaction summarisers: (previous summary, the transient events removed) -> summary text.

The default is deterministic and offline (same input, same text); another is plugged in with
the dotted path in SWITCHBOARD_SUMMARISER (e.g. one that calls an LLM).
"""

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

Summariser = Callable[[str, Sequence[dict[str, Any]]], str]

EXCERPT = 160


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT else text[: EXCERPT - 1] + "…"


@dataclass
class Digest:
    """What the deterministic summary says of a range of transient events: built from the
    events in Python (digest_of), or by PostgreSQL while it deletes them
    (retention_app.storage.delete_transient_events_digest), so compaction never ships the
    rows to Python for the default summariser. Both must agree (tests/retention)."""

    count: int = 0
    first_seq: int = 0
    last_seq: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    # (seq, role, text) of the first and last message with text.
    first_message: tuple[int, str, str] | None = None
    last_message: tuple[int, str, str] | None = None
    tools: list[str] = field(default_factory=list)  # sorted, distinct
    errors: int = 0


def digest_of(events: Sequence[dict[str, Any]]) -> Digest:
    if not events:
        return Digest()
    seqs = [e["seq"] for e in events]
    messages = [e for e in events if e["kind"] == "message" and e.get("text")]
    first = messages[0] if messages else None
    last = messages[-1] if messages else None
    return Digest(
        count=len(events),
        first_seq=min(seqs),
        last_seq=max(seqs),
        kinds=dict(Counter(str(e["kind"]) for e in events)),
        first_message=(first["seq"], first["role"], first["text"]) if first else None,
        last_message=(last["seq"], last["role"], last["text"]) if last else None,
        tools=sorted({str(e["content"].get("name")) for e in events if e["kind"] == "tool_call"}),
        errors=sum(1 for e in events if e["kind"] == "error"),
    )


def summary_of_digest(previous: str, digest: Digest) -> str:
    """The deterministic summary's text: counts by kind, the seq range, the first and last
    messages, the tools called, the errors, in a fixed format."""
    lines = [previous] if previous else []
    if not digest.count:
        return "\n".join(lines)
    counted = ", ".join(f"{n} {kind}" for kind, n in sorted(digest.kinds.items()))
    lines.append(f"Seqs {digest.first_seq}–{digest.last_seq} compacted: {counted}.")
    if digest.first_message is not None:
        _, role, text = digest.first_message
        lines.append(f"First message ({role or 'message'}): {_excerpt(text)}")
        last = digest.last_message
        if last is not None and last[0] != digest.first_message[0]:
            lines.append(f"Last message ({last[1] or 'message'}): {_excerpt(last[2])}")
    if digest.tools:
        lines.append("Tools called: " + ", ".join(digest.tools) + ".")
    if digest.errors:
        lines.append(f"{digest.errors} error(s) reported.")
    return "\n".join(lines)


def deterministic_summary(previous: str, events: Sequence[dict[str, Any]]) -> str:
    """The default summariser: deterministic and offline (same input, same text)."""
    return summary_of_digest(previous, digest_of(events))


def summariser() -> tuple[str, Summariser]:
    """The configured summariser and its dotted path (ImportError if the setting is wrong)."""
    path: str = settings.SWITCHBOARD_SUMMARISER
    return path, import_string(path)
