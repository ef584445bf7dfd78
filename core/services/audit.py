"""The audit trail: who did what to which object, written in the change's own transaction."""

from typing import Any

from core.actors import Actor
from core.domain_events import AuditRecorded, publish, publish_all
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
    entry = audit_entry(
        project,
        actor=actor,
        action=action,
        target_type=target_type,
        target_id=target_id,
        detail=detail,
    )
    record_audits([entry])
    return entry


def record_audits(entries: list[AuditEntry]) -> None:
    """Write unsaved audit rows (audit_entry) in one INSERT, in the transaction of the change
    they record (a retention batch records each session it deletes)."""
    AuditEntry.objects.bulk_create(entries)
    publish_all(
        [AuditRecorded(project_id=entry.project_id, entry_id=entry.pk) for entry in entries]
    )


def audit_entry(
    project: Project | int,
    *,
    actor: Actor,
    action: str,
    target_type: str,
    target_id: object,
    detail: dict[str, Any] | None = None,
) -> AuditEntry:
    """The unsaved audit row `record_audit` writes, for a caller that inserts it together with
    its change (core.storage.insert_in_one_statement); then call `audit_written`."""
    project_id = project.pk if isinstance(project, Project) else project
    return AuditEntry(
        project_id=project_id,
        actor=actor.label,
        user=actor.user,
        api_key=actor.api_key,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        detail=detail or {},
    )


def audit_written(entry: AuditEntry) -> None:
    """After the audit row is inserted (in the change's transaction): announce it on commit."""
    publish(AuditRecorded(project_id=entry.project_id, entry_id=entry.pk))
