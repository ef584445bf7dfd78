"""Reading erasures: the receipts (summary and the full, streamed download), the list of a
project's erasures, and whether a missing session was erased (sessions_app.access asks)."""

import json
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from core.access import as_uuid
from core.errors import NotFound

from .errors import SessionErased
from .models import ErasedObject, ErasureRequest, ErasureStatus, ErasureTarget

RECEIPT_CHUNK = 2000


def erased_session(session_id: UUID) -> tuple[int, SessionErased] | None:
    """(project id, 410 `erased` naming the receipt) if an erasure removed this session."""
    row = (
        ErasureTarget.objects.filter(session_id=session_id, erased_at__isnull=False)
        .values_list("project_id", "erasure_id")
        .first()
    )
    if row is None:
        return None
    project_id, erasure_id = row
    return project_id, SessionErased(
        f"This session was erased on a data-protection request (receipt {erasure_id}).",
        detail={"session_id": str(session_id), "erasure_id": str(erasure_id)},
    )


def erasure_in_project(project_id: int, erasure_id: Any) -> ErasureRequest:
    erasure = ErasureRequest.objects.filter(
        pk=as_uuid(erasure_id, "Erasure"), project_id=project_id
    ).first()
    if erasure is None:
        raise NotFound("Erasure not found.", detail={"erasure_id": str(erasure_id)})
    return erasure


def recent_erasures(project_id: int, limit: int = 50) -> list[ErasureRequest]:
    return list(
        ErasureRequest.objects.filter(project_id=project_id).order_by("-requested_at")[:limit]
    )


def counts_shown(kinds: dict[str, int]) -> dict[str, int]:
    """Counts per kind of row (model names, as the job keeps them) named as receipts show
    them: `sessions`, `events` (all, facts included), `facts`, then one plural per kind of
    row (snapshots, handoffs, blobs, artifacts, audit_entries, webhook_deliveries, …)."""
    kinds = dict(kinds)
    out = {"sessions": kinds.pop("session", 0)}
    out["events"] = kinds.pop("event", 0) + kinds.get("fact", 0)
    out["facts"] = kinds.pop("fact", 0)
    for kind, n in sorted(kinds.items()):
        name = f"{kind[:-1]}ies" if kind.endswith("y") else f"{kind}s"
        out[name] = out.get(name, 0) + n
    return out


def erasure_dict(erasure: ErasureRequest) -> dict[str, Any]:
    """The receipt's summary (GET /erasures/{id}, the page's list)."""
    return {
        "id": str(erasure.pk),
        "status": erasure.status,
        "selectors": erasure.selectors,
        "requested_by": erasure.requested_by,
        "requested_at": erasure.requested_at.isoformat(),
        "started_at": erasure.started_at.isoformat() if erasure.started_at else None,
        "finished_at": erasure.finished_at.isoformat() if erasure.finished_at else None,
        "counts": erasure.counts
        if erasure.status == ErasureStatus.DONE
        else counts_shown(erasure.counts),
        "holds": erasure.holds,
        "sessions": ErasureTarget.objects.filter(erasure=erasure).count(),
        "objects": ErasedObject.objects.filter(erasure=erasure).count(),
    }


def receipt_chunks(erasure: ErasureRequest) -> Iterator[bytes]:
    """The whole receipt as one JSON document, streamed: the summary, every erased session's
    id, and every removed object's kind, reference and SHA-256 (a million events' hashes are
    never held in memory at once: read by keyset on the object's id)."""
    head = erasure_dict(erasure)
    sessions = list(
        ErasureTarget.objects.filter(erasure=erasure)
        .order_by("session_id")
        .values_list("session_id", flat=True)
    )
    head["session_ids"] = [str(pk) for pk in sessions]
    body = json.dumps(head, ensure_ascii=False)
    yield (body[:-1] + ', "removed": [').encode()
    after, first = 0, True
    while True:
        rows = list(
            ErasedObject.objects.filter(erasure=erasure, pk__gt=after)
            .order_by("pk")
            .values_list("pk", "kind", "ref", "sha256")[:RECEIPT_CHUNK]
        )
        if not rows:
            break
        parts = []
        for _pk, kind, ref, sha in rows:
            parts.append(json.dumps({"kind": kind, "ref": ref, "sha256": sha}))
        yield (("" if first else ",") + ",".join(parts)).encode()
        first = False
        after = rows[-1][0]
    yield b"]}"
