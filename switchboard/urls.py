from django.urls import path

from . import console_views, handoff_views, retention_views, views, webhook_views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("switch/", views.switch_project, name="switch_project"),
    # Any signed-in person may start a project (and becomes its admin).
    path("projects/new/", console_views.new_project, name="new_project"),
    # Project-scoped pages (viewer and up).
    path("p/<int:project_id>/", views.overview, name="overview"),
    path("p/<int:project_id>/sessions/", views.session_list, name="session_list"),
    # Webhook endpoints and deliveries (admin only).
    path("p/<int:project_id>/webhooks/", webhook_views.webhooks, name="webhooks"),
    path("p/<int:project_id>/webhooks/new/", webhook_views.webhook_create, name="webhook_create"),
    path(
        "p/<int:project_id>/webhooks/<int:endpoint_id>/active/",
        webhook_views.webhook_toggle,
        name="webhook_toggle",
    ),
    path(
        "p/<int:project_id>/webhooks/<int:endpoint_id>/delete/",
        webhook_views.webhook_delete,
        name="webhook_delete",
    ),
    path(
        "p/<int:project_id>/webhooks/deliveries/<uuid:delivery_id>/redeliver/",
        webhook_views.webhook_redeliver,
        name="webhook_redeliver",
    ),
    # Retention: every member reads; admins edit the policy, run the jobs, place holds.
    path("p/<int:project_id>/retention/", retention_views.retention, name="retention"),
    path(
        "p/<int:project_id>/retention/policy/",
        retention_views.retention_policy,
        name="retention_policy",
    ),
    path("p/<int:project_id>/retention/run/", retention_views.retention_run, name="retention_run"),
    path(
        "p/<int:project_id>/retention/holds/", retention_views.retention_hold, name="retention_hold"
    ),
    path(
        "p/<int:project_id>/retention/holds/<int:hold_id>/lift/",
        retention_views.retention_lift,
        name="retention_lift",
    ),
    # One session (viewer and up to read and export; operator and up to act).
    path("sessions/<uuid:session_id>/", views.session_detail, name="session_detail"),
    path("sessions/<uuid:session_id>/events/", views.session_events, name="session_events"),
    path(
        "sessions/<uuid:session_id>/inspector/", views.session_inspector, name="session_inspector"
    ),
    path("sessions/<uuid:session_id>/export.jsonl", views.session_export, name="session_export"),
    path("sessions/<uuid:session_id>/pause/", views.session_pause, name="session_pause"),
    path("sessions/<uuid:session_id>/resume/", views.session_resume, name="session_resume"),
    path("sessions/<uuid:session_id>/close/", views.session_close, name="session_close"),
    path("sessions/<uuid:session_id>/fork/", views.session_fork, name="session_fork"),
    path("sessions/<uuid:session_id>/delete/", views.session_delete, name="session_delete"),
    # Human handoffs: the project's queue, one handoff's workspace (viewer and up to read),
    # its actions (operator and up, the lease holder for most; admin to reassign).
    path("p/<int:project_id>/handoffs/", handoff_views.handoff_queue, name="handoff_queue"),
    path("handoffs/<uuid:handoff_id>/", handoff_views.handoff_detail, name="handoff_detail"),
    path(
        "handoffs/<uuid:handoff_id>/messages/",
        handoff_views.handoff_messages,
        name="handoff_messages",
    ),
    *(
        path(
            f"handoffs/<uuid:handoff_id>/{segment}/",
            handoff_views.handoff_action,
            {"action": name},
            name=f"handoff_{name}",
        )
        for name, (segment, _, _) in handoff_views.ACTIONS.items()
    ),
    # The project console: settings and members (viewer and up read, admin acts), API keys and
    # the audit log (admin).
    path("p/<int:project_id>/settings/", console_views.project_settings, name="project_settings"),
    path("p/<int:project_id>/settings/name/", console_views.project_rename, name="project_rename"),
    path(
        "p/<int:project_id>/settings/handoffs/",
        console_views.project_handoff_settings,
        name="project_handoff_settings",
    ),
    path("p/<int:project_id>/members/", console_views.members, name="members"),
    path("p/<int:project_id>/members/add/", console_views.member_add, name="member_add"),
    path(
        "p/<int:project_id>/members/<int:member_id>/role/",
        console_views.member_role,
        name="member_role",
    ),
    path(
        "p/<int:project_id>/members/<int:member_id>/remove/",
        console_views.member_remove,
        name="member_remove",
    ),
    path("p/<int:project_id>/keys/", console_views.api_keys, name="api_keys"),
    path("p/<int:project_id>/keys/create/", console_views.api_key_create, name="api_key_create"),
    path(
        "p/<int:project_id>/keys/<int:key_id>/revoke/",
        console_views.api_key_revoke,
        name="api_key_revoke",
    ),
    path("p/<int:project_id>/audit/", console_views.audit_log, name="audit_log"),
]
