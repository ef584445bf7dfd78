"""The audit trail: who did what to which object, written in the change's own transaction."""

from typing import Any

from core.actors import Actor
from core.domain_events import AuditRecorded, publish
from core.models import AuditEntry, Project


def record_audit(
    project: Project | int,
    *,
    actor: Actor,
    action: str,
    target_type: str,
    target_id: object,
    detail: dict[str, Any] | None = None,
) -> AuditEntry:
    """Write one audit row; call it inside the transaction of the change it records. The audit
    log page hears of it after commit (live-only: nothing more is written)."""
    project_id = project.pk if isinstance(project, Project) else project
    entry = AuditEntry.objects.create(
        project_id=project_id,
        actor=actor.label,
        user=actor.user,
        api_key=actor.api_key,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        detail=detail or {},
    )
    publish(AuditRecorded(project_id=project_id, entry_id=entry.pk))
    return entry
