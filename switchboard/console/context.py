"""What the console pages render: their section navigation, and audit entries with a link to
what each one is about (the composing app knows every app's pages)."""

import uuid
from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from core.models import AuditEntry, Membership, Project, Role


@dataclass(frozen=True)
class Section:
    key: str
    label: str
    url: str


def settings_sections(membership: Membership) -> list[Section]:
    """The console's sections the member may open (the others are not shown)."""
    project_id = membership.project_id
    sections = [
        Section("settings", "General", reverse("dashboard:project_settings", args=[project_id])),
        Section("members", "Members", reverse("dashboard:members", args=[project_id])),
    ]
    if membership.has_role(Role.ADMIN):
        sections += [
            Section("keys", "API keys", reverse("dashboard:api_keys", args=[project_id])),
            Section("webhooks", "Webhooks", reverse("dashboard:webhooks", args=[project_id])),
            Section(
                "digest", "Handoff digest", reverse("dashboard:handoff_digest", args=[project_id])
            ),
            Section("audit", "Audit log", reverse("dashboard:audit_log", args=[project_id])),
        ]
    return sections


# Suggestions for the audit log's filters (any value may be typed; these are the ones the
# services write today).
KNOWN_ACTIONS = [
    "api_key.create",
    "api_key.revoke",
    "handoff.requested",
    "handoff.claimed",
    "handoff.released",
    "handoff.lease_expired",
    "handoff.reassigned",
    "handoff.answered",
    "handoff.ignored",
    "handoff.state",
    "handoff.facts",
    "handoff.message",
    "handoff.taken_over",
    "handoff.handed_back",
    "handoff.closed",
    "handoff.cancelled",
    "handoff.overdue",
    "handoff.expired",
    "handoff.settings",
    "invitation.create",
    "invitation.resend",
    "invitation.revoke",
    "invitation.accept",
    "member.add",
    "member.role",
    "member.remove",
    "project.create",
    "project.rename",
    "session.open",
    "session.fork",
    "session.export",
    "session.paused",
    "session.resumed",
    "session.closed",
    "session.archived",
    "session.delete",
    "task.create",
    "task.transition",
    "task.link",
    "task.unlink",
    "webhook.created",
    "webhook.enabled",
    "webhook.disabled",
    "webhook.deleted",
    "webhook.redelivered",
    "workflow.register",
]
KNOWN_TARGET_TYPES = [
    "api_key",
    "handoff",
    "invitation",
    "membership",
    "project",
    "session",
    "task",
    "webhook",
    "webhook_delivery",
    "workflow",
]


def duration_text(seconds: int) -> str:
    """ "30 minutes", "1 day", "90 seconds": the largest unit that divides it."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds} seconds"


def _uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def audit_target_url(project: Project, entry: AuditEntry) -> str | None:
    """The page of what `entry` is about, when there is one."""
    kind, target = entry.target_type, entry.target_id
    if kind == "session" and _uuid(target):
        return reverse("dashboard:session_detail", args=[target])
    if kind == "task" and _uuid(target):
        return reverse("tasks:detail", args=[target])
    if kind == "api_key":
        return f"{reverse('dashboard:api_keys', args=[project.pk])}#key-{target}"
    if kind == "invitation":  # pending ones are listed there; a done one is not
        return f"{reverse('dashboard:members', args=[project.pk])}#invitations"
    if kind == "membership":
        return f"{reverse('dashboard:members', args=[project.pk])}#member-{target}"
    if kind == "handoff" and _uuid(target):
        return reverse("dashboard:handoff_detail", args=[target])
    # A webhook's row on the webhooks page (gone once deleted: the page then opens at its top).
    if kind == "webhook":
        return f"{reverse('dashboard:webhooks', args=[project.pk])}#endpoint-{target}"
    if kind == "webhook_delivery" and _uuid(target):
        return f"{reverse('dashboard:webhooks', args=[project.pk])}#delivery-{target}"
    if kind == "project" and entry.action == "handoff.settings":
        return f"{reverse('dashboard:project_settings', args=[project.pk])}#handoff-settings"
    if kind == "project":
        return reverse("dashboard:project_settings", args=[project.pk])
    return None


def audit_rows(project: Project, entries: list[AuditEntry]) -> list[dict[str, Any]]:
    return [{"entry": e, "target_url": audit_target_url(project, e)} for e in entries]
