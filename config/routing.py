from django.urls import path

from switchboard.console.consumers import AuditLogConsumer
from switchboard.handoffs.consumers import (
    HandoffConsumer,
    HandoffNavConsumer,
    HandoffQueueConsumer,
)
from switchboard.overview.consumers import ProjectConsumer
from switchboard.retention.consumers import RetentionConsumer
from switchboard.sessions.consumers import SessionConsumer
from tasks_app.consumers import TaskConsumer, TaskListConsumer

websocket_urlpatterns = [
    # The overview (?view=overview) and the sessions list (?view=sessions&<its filters>).
    path("ws/projects/<int:project_id>/", ProjectConsumer.as_asgi()),
    # The session page (?order=&kind=&tier=&after_seq=<head shown>&rows=1|0).
    path("ws/sessions/<uuid:session_id>/", SessionConsumer.as_asgi()),
    # The tasks list (?<its filters and cursor>) and the task page
    # (?after=<newest history id shown>&step=&kind=&rows=1|0).
    path("ws/projects/<int:project_id>/tasks/", TaskListConsumer.as_asgi()),
    path("ws/tasks/<uuid:task_id>/", TaskConsumer.as_asgi()),
    # The handoff queue (?<its filters and cursor>) and one handoff's workspace.
    path("ws/projects/<int:project_id>/handoffs/", HandoffQueueConsumer.as_asgi()),
    path("ws/handoffs/<uuid:handoff_id>/", HandoffConsumer.as_asgi()),
    # The navigation's handoff count on every other page of a project.
    path("ws/projects/<int:project_id>/nav/", HandoffNavConsumer.as_asgi()),
    # The audit log (admins; ?<its filters and cursor>).
    path("ws/projects/<int:project_id>/audit/", AuditLogConsumer.as_asgi()),
    # The retention page (runs, chart, holds).
    path("ws/projects/<int:project_id>/retention/", RetentionConsumer.as_asgi()),
]
