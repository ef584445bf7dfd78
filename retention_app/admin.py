"""Django admin of retention, read-only: policies, holds and runs change through the services
(validation, audit, live updates); compactions, tombstones and erasure receipts are records."""

from django.contrib import admin

from core.admin import ReadOnlyAdmin

from .models import (
    Compaction,
    ErasedObject,
    ErasureRequest,
    ErasureTarget,
    LegalHold,
    RetentionPolicy,
    RetentionRun,
    SessionTombstone,
)


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(ReadOnlyAdmin):
    list_display = (
        "project",
        "agent",
        "close_idle_after",
        "compact_after",
        "delete_after",
        "updated_at",
        "updated_by",
    )
    list_filter = ("project",)
    search_fields = ("agent__name", "updated_by")


@admin.register(LegalHold)
class LegalHoldAdmin(ReadOnlyAdmin):
    list_display = (
        "project",
        "scope",
        "session",
        "agent",
        "reason",
        "created_by",
        "created_at",
        "released_at",
    )
    list_filter = ("scope", "project", "released_at")
    search_fields = ("reason", "created_by", "session__id")


@admin.register(RetentionRun)
class RetentionRunAdmin(ReadOnlyAdmin):
    list_display = (
        "job",
        "project",
        "status",
        "started_at",
        "finished_at",
        "examined",
        "closed",
        "archived",
        "compacted",
        "deleted",
        "events_freed",
    )
    list_filter = ("job", "status", "project", "started_at")
    search_fields = ("trigger",)
    date_hierarchy = "started_at"


@admin.register(Compaction)
class CompactionAdmin(ReadOnlyAdmin):
    list_display = (
        "session",
        "project",
        "after_seq",
        "boundary_seq",
        "events_removed",
        "bytes_removed",
        "created_at",
    )
    list_filter = ("project", "created_at")
    search_fields = ("session__id", "summary")


@admin.register(SessionTombstone)
class SessionTombstoneAdmin(ReadOnlyAdmin):
    list_display = (
        "session_id",
        "project",
        "agent_name",
        "external_id",
        "events_deleted",
        "deleted_at",
    )
    list_filter = ("project", "deleted_at")
    search_fields = ("session_id", "external_id", "agent_name", "title")


@admin.register(ErasureRequest)
class ErasureRequestAdmin(ReadOnlyAdmin):
    """Receipts: requested and run through services.erasure, never edited (the database
    refuses any change to a finished one)."""

    list_display = ("id", "project", "status", "requested_by", "requested_at", "finished_at")
    list_filter = ("status", "project")
    search_fields = ("id", "requested_by")


@admin.register(ErasureTarget)
class ErasureTargetAdmin(ReadOnlyAdmin):
    list_display = ("session_id", "erasure", "project", "erased_at")
    list_filter = ("project", "erased_at")
    search_fields = ("session_id", "erasure__id")


@admin.register(ErasedObject)
class ErasedObjectAdmin(ReadOnlyAdmin):
    list_display = ("erasure", "kind", "ref", "sha256")
    list_filter = ("kind",)
    search_fields = ("ref", "sha256")
