"""Django admin for workflow state, read-only: tasks, steps, links and signals change only
through the task services (versions, history rows, live updates, signal resolution), and
workflow definitions and task history are immutable records."""

from django.contrib import admin

from core.admin import ReadOnlyAdmin
from tasks_app.models import Step, Task, TaskHistory, TaskSession, TaskSignal, WorkflowDefinition


@admin.register(WorkflowDefinition)
class WorkflowDefinitionAdmin(ReadOnlyAdmin):
    list_display = ("name", "version", "title", "project", "source", "created_at")
    list_filter = ("source", "project")
    search_fields = ("name", "title", "content_hash")


class StepInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Step
    extra = 0
    fields = ("position", "key", "status", "attempts", "max_attempts", "waiting_on", "branch")
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ("id", "workflow", "state", "version", "project", "created_at", "finished_at")
    list_filter = ("state", "workflow__name", "project", "created_at")
    search_fields = ("id", "external_id", "workflow__name")
    list_select_related = ("workflow", "project")
    date_hierarchy = "created_at"
    exclude = ("signal_token_hash",)  # a secret's hash, like an API key's
    inlines = (StepInline,)


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    list_display = ("task", "key", "status", "attempts", "max_attempts", "updated_at")
    list_filter = ("status",)
    search_fields = ("task__id", "key", "waiting_on")
    list_select_related = ("task",)


@admin.register(TaskSession)
class TaskSessionAdmin(ReadOnlyAdmin):
    list_display = ("task", "session", "linked_by", "created_at")
    search_fields = ("task__id", "session__id")


@admin.register(TaskHistory)
class TaskHistoryAdmin(ReadOnlyAdmin):
    list_display = ("task", "kind", "actor", "from_state", "to_state", "step_key", "created_at")
    list_filter = ("kind",)
    search_fields = ("task__id", "actor", "step_key", "reason")
    list_select_related = ("task",)


@admin.register(TaskSignal)
class TaskSignalAdmin(ReadOnlyAdmin):
    list_display = ("task", "name", "actor", "received_at", "consumed_at")
    list_filter = ("name",)
    search_fields = ("task__id", "name", "actor")
    list_select_related = ("task",)
