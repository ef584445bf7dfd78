"""What a retention run would do now under a policy (the saved one, or one being edited):
counts per rule from the jobs' own selection code (retention_app.selection), a sample of each,
and the events and bytes compaction and deletion would free, estimated from head seqs and the
events table's average row size (marked as estimates). Compaction is counted as the compact job
finds it after the enforce job: without the sessions that deletes, and with their parents
bounded only by the forks that remain; artifacts expire (the enforce job's last rule) from the
sessions that remain, with the versions the deleted forks shared."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Sum
from django.db.models.functions import Coalesce

from core.models import Project

from .. import storage
from ..selection import ACTIONS, candidates, expiring_versions, standing_holds
from .policies import ProjectPolicies

SAMPLE = 10


@dataclass
class Preview:
    counts: dict[str, int]
    samples: dict[str, list[dict[str, Any]]]
    events_freed_estimate: dict[str, int]
    bytes_freed_estimate: dict[str, int]
    # expire_artifacts: the versions it deletes and their stored bytes (exact).
    artifact_versions: int = 0
    artifact_bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "would": {
                action: {
                    "sessions": self.counts[action],
                    "sample": self.samples[action],
                    **(
                        {
                            "events_freed": self.events_freed_estimate[action],
                            "bytes_freed": self.bytes_freed_estimate[action],
                            "estimate": True,
                        }
                        if action in self.events_freed_estimate
                        else {}
                    ),
                    **(
                        {"versions": self.artifact_versions, "artifact_bytes": self.artifact_bytes}
                        if action == "expire_artifacts"
                        else {}
                    ),
                }
                for action in ACTIONS
            },
            "notes": (
                "Counts and samples are exact, from the jobs' own selection. events_freed is "
                "an upper bound (every event in the range; durable ones are kept by "
                "compaction); bytes_freed is events_freed times the events table's average "
                "row size. expire_artifacts counts the artifact versions it deletes and their "
                "stored bytes, exactly."
            ),
        }


def preview(project: Project, policies: ProjectPolicies, *, now: datetime) -> Preview:
    holds = standing_holds(project.pk)
    counts: dict[str, int] = {}
    samples: dict[str, list[dict[str, Any]]] = {}
    events: dict[str, int] = {}
    size: dict[str, int] = {}
    average = storage.average_event_bytes()
    artifact_versions = artifact_bytes = 0
    # The compact job follows the enforce job (the page queues them in that order): what the
    # enforce job deletes is not compacted, and a parent whose last fork it deletes may be
    # compacted past that fork's point.
    deleting = candidates(project, "delete", now=now, policies=policies, holds=holds)
    for action in ACTIONS:
        qs = candidates(
            project,
            action,
            now=now,
            policies=policies,
            holds=holds,
            deleted=deleting if action in ("compact", "expire_artifacts") else None,
        )
        counts[action] = qs.count()
        samples[action] = [
            {
                "id": str(s["pk"]),
                "title": s["title"],
                "agent": s["agent__name"],
                "status": s["status"],
                "head_seq": s["head_seq"],
            }
            for s in qs.values("pk", "title", "agent__name", "status", "head_seq")[:SAMPLE]
        ]
        if action == "expire_artifacts":
            versions = expiring_versions(qs, policies, now=now, deleted=deleting).aggregate(
                n=Count("pk"), size=Coalesce(Sum("size"), 0)
            )
            artifact_versions, artifact_bytes = versions["n"], int(versions["size"])
            continue
        if action == "compact":
            total = qs.aggregate(n=Sum(F("_boundary") - F("_after")))["n"] or 0
        elif action == "delete":
            total = qs.aggregate(n=Sum(F("head_seq") - Coalesce(F("fork_seq"), 0)))["n"] or 0
        else:
            continue
        events[action] = int(total)
        size[action] = int(total * average)
    return Preview(counts, samples, events, size, artifact_versions, artifact_bytes)
