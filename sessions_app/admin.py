"""Django admin for the session store. Sessions and snapshots are read-only (changes go through
the lifecycle and event services: seqs, lifecycle events, live updates); agents may be edited.

Events cannot be registered on their own: Django's admin refuses models with a composite
primary key (Event's is (session_id, seq)). A session's page lists its latest events instead.
"""

from typing import Any

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.admin import ReadOnlyAdmin
from sessions_app.models import Agent, Artifact, Event, Session, Snapshot

EVENTS_SHOWN = 50


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "version", "project", "created_at")
    list_filter = ("project",)
    search_fields = ("name", "version", "project__name")
    readonly_fields = ("project", "created_at")
    list_select_related = ("project",)

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False  # registered by the API on first use

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False  # sessions point at their agent


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = ("title", "id", "project", "agent", "status", "head_seq", "created_at")
    list_filter = ("status", "project", "created_at")
    search_fields = ("id", "title", "external_id", "agent__name")
    list_select_related = ("project", "agent")
    date_hierarchy = "created_at"
    readonly_fields = ("dashboard_link", "latest_events")

    @admin.display(description="Dashboard")
    def dashboard_link(self, obj: Session) -> SafeString:
        url = reverse("dashboard:session_detail", args=[obj.pk])
        return format_html('<a href="{}">Open the session page</a>', url)

    @admin.display(description=f"Latest {EVENTS_SHOWN} events")
    def latest_events(self, obj: Session) -> SafeString:
        events = Event.objects.filter(session=obj).order_by("-seq")[:EVENTS_SHOWN]
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (e.seq, e.kind, e.tier, e.actor, str(e.content)[:200])
                for e in events.only("seq", "kind", "tier", "actor", "content")
            ),
        )
        return format_html(
            "<table><thead><tr><th>seq</th><th>kind</th><th>tier</th><th>actor</th>"
            "<th>content</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )


@admin.register(Artifact)
class ArtifactAdmin(ReadOnlyAdmin):
    """Read-only: a version is saved and deleted through the API (its event, its file)."""

    list_display = ("name", "version", "session", "size", "content_type", "seq", "deleted_at")
    list_filter = ("content_type", "created_at")
    search_fields = ("name", "sha256", "session__id")
    list_select_related = ("session",)
    date_hierarchy = "created_at"


@admin.register(Snapshot)
class SnapshotAdmin(ReadOnlyAdmin):
    list_display = ("session", "seq", "reason", "content_hash", "created_at")
    list_filter = ("reason", "created_at")
    search_fields = ("session__id", "content_hash")
    list_select_related = ("session",)
