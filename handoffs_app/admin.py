"""Django admin for handoffs, read-only: a handoff changes only through the handoff services
(lease, status machine, the session's log record, the audit entry, the live update and the
webhook), and a project's SLA settings through its project settings page (admins, audited).
What support staff need here is to find a handoff (by id, session, reason, requester or holder),
see who holds it and until when, and jump to its workspace."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin import ReadOnlyAdmin
from handoffs_app.models import Handoff, HandoffSettings


@admin.register(Handoff)
class HandoffAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "kind",
        "status",
        "priority",
        "overdue",
        "project",
        "session",
        "lease_holder",
        "lease_expires_at",
        "created_at",
    )
    list_filter = ("status", "kind", "priority", "overdue", "project", "created_at")
    search_fields = (
        "id",
        "session__id",
        "session__title",
        "reason",
        "requested_by",
        "lease_holder__username",
        "project__name",
    )
    list_select_related = ("project", "session", "lease_holder")
    date_hierarchy = "created_at"
    readonly_fields = ("workspace_link",)

    @admin.display(description="Dashboard")
    def workspace_link(self, obj: Handoff) -> SafeString:
        url = reverse("dashboard:handoff_detail", args=[obj.pk])
        return format_html('<a href="{}">Open the handoff workspace</a>', url)


@admin.register(HandoffSettings)
class HandoffSettingsAdmin(ReadOnlyAdmin):
    list_display = (
        "project",
        "question_due_seconds",
        "approval_due_seconds",
        "takeover_due_seconds",
        "budget_due_seconds",
        "expire_after_overdue_seconds",
        "lease_seconds",
        "updated_at",
    )
    search_fields = ("project__name",)
    list_select_related = ("project",)
    readonly_fields = ("settings_link",)

    @admin.display(description="Dashboard")
    def settings_link(self, obj: HandoffSettings) -> SafeString:
        url = reverse("dashboard:project_settings", args=[obj.project_id])
        return format_html('<a href="{}">Change them on the project settings page</a>', url)
