from django.urls import path

from switchboard.console import views as console
from switchboard.digest import views as digest
from switchboard.erasure import views as erasure
from switchboard.handoffs import views as handoffs
from switchboard.overview import views as overview
from switchboard.retention import views as retention
from switchboard.sessions import views as sessions
from switchboard.webhooks import views as webhooks

app_name = "dashboard"

urlpatterns = [
    path("", overview.home, name="home"),
    path("switch/", overview.switch_project, name="switch_project"),
    # Any signed-in person may start a project (and becomes its admin).
    path("projects/new/", console.new_project, name="new_project"),
    # Project-scoped pages (viewer and up).
    path("p/<int:project_id>/", overview.overview, name="overview"),
    path("p/<int:project_id>/sessions/", sessions.session_list, name="session_list"),
    # The handoff digest (admin only).
    path("p/<int:project_id>/digest/", digest.handoff_digest, name="handoff_digest"),
    # Webhook endpoints and deliveries (admin only).
    path("p/<int:project_id>/webhooks/", webhooks.webhooks, name="webhooks"),
    path("p/<int:project_id>/webhooks/new/", webhooks.webhook_create, name="webhook_create"),
    path(
        "p/<int:project_id>/webhooks/<int:endpoint_id>/active/",
        webhooks.webhook_toggle,
        name="webhook_toggle",
    ),
    path(
        "p/<int:project_id>/webhooks/<int:endpoint_id>/delete/",
        webhooks.webhook_delete,
        name="webhook_delete",
    ),
    path(
        "p/<int:project_id>/webhooks/deliveries/<uuid:delivery_id>/redeliver/",
        webhooks.webhook_redeliver,
        name="webhook_redeliver",
    ),
    # Retention: every member reads; admins edit the policy, run the jobs, place holds.
    path("p/<int:project_id>/retention/", retention.retention, name="retention"),
    path(
        "p/<int:project_id>/retention/policy/",
        retention.retention_policy,
        name="retention_policy",
    ),
    path("p/<int:project_id>/retention/run/", retention.retention_run, name="retention_run"),
    path("p/<int:project_id>/retention/holds/", retention.retention_hold, name="retention_hold"),
    path(
        "p/<int:project_id>/retention/holds/<int:hold_id>/lift/",
        retention.retention_lift,
        name="retention_lift",
    ),
    # Erasure of a data subject: admins only (preview, confirm, receipts).
    path("p/<int:project_id>/erasure/", erasure.erasure, name="erasure"),
    path("p/<int:project_id>/erasure/preview/", erasure.erasure_preview, name="erasure_preview"),
    path("p/<int:project_id>/erasure/confirm/", erasure.erasure_confirm, name="erasure_confirm"),
    path(
        "p/<int:project_id>/erasure/<uuid:erasure_id>/receipt/",
        erasure.erasure_receipt,
        name="erasure_receipt",
    ),
    # One session (viewer and up to read and export; operator and up to act).
    path("sessions/<uuid:session_id>/", sessions.session_detail, name="session_detail"),
    path("sessions/<uuid:session_id>/events/", sessions.session_events, name="session_events"),
    path(
        "sessions/<uuid:session_id>/inspector/",
        sessions.session_inspector,
        name="session_inspector",
    ),
    path("sessions/<uuid:session_id>/export.jsonl", sessions.session_export, name="session_export"),
    path(
        "sessions/<uuid:session_id>/artifacts/<str:name>",
        sessions.session_artifact,
        name="session_artifact",
    ),
    path("sessions/<uuid:session_id>/pause/", sessions.session_pause, name="session_pause"),
    path("sessions/<uuid:session_id>/resume/", sessions.session_resume, name="session_resume"),
    path("sessions/<uuid:session_id>/close/", sessions.session_close, name="session_close"),
    path("sessions/<uuid:session_id>/fork/", sessions.session_fork, name="session_fork"),
    path("sessions/<uuid:session_id>/delete/", sessions.session_delete, name="session_delete"),
    # Human handoffs: the project's queue, one handoff's workspace (viewer and up to read),
    # its actions (operator and up, the lease holder for most; admin to reassign).
    path("p/<int:project_id>/handoffs/", handoffs.handoff_queue, name="handoff_queue"),
    # The next waiting handoff (?after=<id>: after that one), for the keyboard's "n".
    path("p/<int:project_id>/handoffs/next/", handoffs.handoff_next, name="handoff_next"),
    # The waiting handoffs, for the browser notifications of a person who turned them on.
    path("p/<int:project_id>/handoffs/waiting/", handoffs.handoff_waiting, name="handoff_waiting"),
    path("handoffs/<uuid:handoff_id>/", handoffs.handoff_detail, name="handoff_detail"),
    path(
        "handoffs/<uuid:handoff_id>/messages/",
        handoffs.handoff_messages,
        name="handoff_messages",
    ),
    *(
        path(
            f"handoffs/<uuid:handoff_id>/{segment}/",
            handoffs.handoff_action,
            {"action": name},
            name=f"handoff_{name}",
        )
        for name, (segment, _, _) in handoffs.ACTIONS.items()
    ),
    # The project console: settings and members (viewer and up read, admin acts), API keys and
    # the audit log (admin).
    path("p/<int:project_id>/settings/", console.project_settings, name="project_settings"),
    path("p/<int:project_id>/settings/name/", console.project_rename, name="project_rename"),
    path(
        "p/<int:project_id>/settings/handoffs/",
        console.project_handoff_settings,
        name="project_handoff_settings",
    ),
    path("p/<int:project_id>/members/", console.members, name="members"),
    path("p/<int:project_id>/members/add/", console.member_add, name="member_add"),
    path(
        "p/<int:project_id>/members/<int:member_id>/role/",
        console.member_role,
        name="member_role",
    ),
    path(
        "p/<int:project_id>/members/<int:member_id>/remove/",
        console.member_remove,
        name="member_remove",
    ),
    # Invitations of people without an account (admin): sent from the members page.
    path(
        "p/<int:project_id>/invitations/<uuid:invitation_id>/resend/",
        console.invitation_resend,
        name="invitation_resend",
    ),
    path(
        "p/<int:project_id>/invitations/<uuid:invitation_id>/revoke/",
        console.invitation_revoke,
        name="invitation_revoke",
    ),
    path("p/<int:project_id>/keys/", console.api_keys, name="api_keys"),
    path("p/<int:project_id>/keys/create/", console.api_key_create, name="api_key_create"),
    path(
        "p/<int:project_id>/keys/<int:key_id>/revoke/",
        console.api_key_revoke,
        name="api_key_revoke",
    ),
    path("p/<int:project_id>/audit/", console.audit_log, name="audit_log"),
]
