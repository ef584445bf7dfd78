"""Django admin for the core models, so a deployment's staff can help a user without a shell.

Changes that have rules go through the services (renaming a project, members and the last
admin, revoking keys), so the admin writes the same audit rows the console does. An API key's
hash is never shown; keys are created where their secret can be shown once (the console,
`createapikey`), and revoked rather than deleted. The audit trail and the outbox are read-only.

Webhook endpoints: a secret is never shown (not even its hint: the owner has it, and staff
matching one can compare the URL); endpoints are created on the project's webhooks page (the
secret is shown once there), and enabled, disabled or deleted here through the services
(audited). Deliveries and their attempts are the delivery job's records, read-only; staff
can resend a delivery from its row (the same service as the webhooks page's Redeliver).
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from core.actors import Actor
from core.errors import DomainError
from core.models import (
    ApiKey,
    AuditEntry,
    Invitation,
    Membership,
    OutboxMessage,
    Project,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from core.services.invitations import revoke_invitation
from core.services.members import (
    LastAdmin,
    add_project_member,
    change_member_role,
    leaves_no_admin,
    remove_member,
)
from core.services.projects import rename_project, revoke_api_key
from core.services.webhooks import delete_endpoint, redeliver, set_endpoint_active


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Viewable, never added, changed or deleted here (append-only records, or rows only the
    services may write)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_user(request.user)  # type: ignore[arg-type]


class MembershipInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Membership
    extra = 0
    fields = ("user", "role", "created_at")
    readonly_fields = ("user", "role", "created_at")
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("name", "id", "created_at")
    search_fields = ("name",)
    list_filter = ("created_at",)
    readonly_fields = ("created_at",)
    inlines = (MembershipInline,)

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        if change:
            rename_project(obj, name=obj.name, actor=_actor(request))
        else:
            obj.save()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # deleting a tenant (and everything in it) is not a support action


class MembershipForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Membership
        fields = ("project", "user", "role")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        role = cleaned.get("role")
        if self.instance.pk and role and leaves_no_admin(self.instance, new_role=role):
            raise forms.ValidationError(
                "This is the last admin of the project; make someone else an admin first."
            )
        return cleaned


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = MembershipForm
    list_display = ("user", "project", "role", "created_at")
    list_filter = ("role", "project")
    search_fields = ("user__username", "user__email", "project__name")
    raw_id_fields = ("user",)
    list_select_related = ("user", "project")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ("project", "user", "created_at") if obj is not None else ("created_at",)

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        if change:
            change_member_role(obj, role=obj.role, actor=_actor(request))
        else:
            created = add_project_member(
                obj.project, obj.user, role=obj.role, actor=_actor(request)
            )
            obj.pk = created.pk

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and leaves_no_admin(obj):
            return False  # the last admin stays
        return super().has_delete_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        remove_member(obj, actor=_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        for membership in queryset.select_related("user", "project"):
            try:
                remove_member(membership, actor=_actor(request))
            except LastAdmin as error:
                self.message_user(request, error.message, messages.ERROR)


@admin.action(description="Revoke the selected keys")
def revoke_keys(modeladmin: Any, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
    revoked = 0
    for api_key in queryset.filter(revoked_at__isnull=True):
        revoke_api_key(api_key, actor=_actor(request))
        revoked += 1
    modeladmin.message_user(request, f"{revoked} key(s) revoked.", messages.SUCCESS)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    # `hashed_secret` appears nowhere: not in the list, the form, the filters or the search.
    list_display = (
        "name",
        "prefix",
        "project",
        "scope",
        "created_by",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    list_filter = ("scope", "project", ("revoked_at", admin.EmptyFieldListFilter), "expires_at")
    search_fields = ("name", "prefix", "project__name")
    fields = (
        "name",
        "project",
        "prefix",
        "scope",
        "created_by",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    readonly_fields = (
        "project",
        "prefix",
        "scope",
        "created_by",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    actions = (revoke_keys,)
    list_select_related = ("project", "created_by")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the secret could not be shown here: the console or createapikey

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoke instead: audit rows point at the key


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "project", "actor", "action", "target_type", "target_id")
    list_filter = ("action", "target_type", "project")
    search_fields = ("actor", "action", "target_id")
    date_hierarchy = "created_at"
    list_select_related = ("project",)


@admin.action(description="Revoke the selected invitations")
def revoke_invitations(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[Invitation]
) -> None:
    for invitation in queryset:
        with transaction.atomic():
            revoke_invitation(invitation, actor=_actor(request))
    modeladmin.message_user(request, "Invitation(s) revoked.", messages.SUCCESS)


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    """Pending invitations; sent, resent and accepted through the Members page (their e-mail
    and token), so here they are only read, or revoked through the service (audited)."""

    list_display = ("email", "project", "role", "invited_by", "sent_at")
    list_filter = ("role", "project")
    search_fields = ("email", "project__name")
    list_select_related = ("project", "invited_by")
    actions = [revoke_invitations]


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ("id", "type", "project", "created_at", "relayed_at")
    list_filter = ("type", ("relayed_at", admin.EmptyFieldListFilter), "project")
    search_fields = ("type",)
    date_hierarchy = "created_at"


def _set_active(modeladmin: Any, request: HttpRequest, queryset: Any, *, active: bool) -> None:
    changed = 0
    for endpoint in queryset.exclude(active=active):
        set_endpoint_active(endpoint, active, actor=_actor(request))
        changed += 1
    verb = "enabled" if active else "disabled"
    modeladmin.message_user(request, f"{changed} endpoint(s) {verb}.", messages.SUCCESS)


@admin.action(description="Disable the selected endpoints")
def disable_endpoints(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]
) -> None:
    _set_active(modeladmin, request, queryset, active=False)


@admin.action(description="Enable the selected endpoints")
def enable_endpoints(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]
) -> None:
    _set_active(modeladmin, request, queryset, active=True)


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    # `secret` appears nowhere: not in the list, the form, the filters or the search.
    list_display = ("url", "project", "active", "events", "created_by", "created_at")
    list_filter = ("active", "project", "created_at")
    search_fields = ("url", "project__name")
    fields = ("url", "project", "events", "active", "created_by", "created_at")
    readonly_fields = ("url", "project", "events", "created_by", "created_at")
    actions = (disable_endpoints, enable_endpoints)
    list_select_related = ("project", "created_by")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the secret could not be shown here: the project's webhooks page

    def save_model(
        self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool
    ) -> None:
        if "active" in form.changed_data:
            set_endpoint_active(obj, obj.active, actor=_actor(request))

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # Its deliveries and their attempts go with it (delete_endpoint): they are read-only
        # on their own, which must not make the endpoint undeletable here.
        deleted, counts, _perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected

    def delete_model(self, request: HttpRequest, obj: WebhookEndpoint) -> None:
        delete_endpoint(obj, actor=_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            delete_endpoint(endpoint, actor=_actor(request))


class WebhookAttemptInline(admin.TabularInline):  # type: ignore[type-arg]
    model = WebhookAttempt
    extra = 0
    fields = (
        "number",
        "started_at",
        "duration_ms",
        "response_code",
        "error",
        "succeeded",
        "redelivery",
    )
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.action(description="Redeliver the selected deliveries now")
def redeliver_deliveries(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet[WebhookDelivery]
) -> None:
    sent = failed = 0
    for delivery in queryset[:20]:  # each is an HTTP request made while the page waits
        try:
            attempt = redeliver(delivery, actor=_actor(request))
        except DomainError as error:
            modeladmin.message_user(request, f"{delivery.pk}: {error.message}", messages.ERROR)
            continue
        if attempt.succeeded:
            sent += 1
        else:
            failed += 1
    modeladmin.message_user(
        request, f"{sent} redelivered, {failed} failed again.", messages.SUCCESS
    )


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "event",
        "status",
        "attempts",
        "last_response_code",
        "endpoint",
        "project",
        "created_at",
        "next_attempt_at",
    )
    list_filter = ("status", "event", "project", "created_at")
    search_fields = ("id", "event", "endpoint__url", "project__name")
    list_select_related = ("endpoint", "project")
    date_hierarchy = "created_at"
    inlines = (WebhookAttemptInline,)
    actions = (redeliver_deliveries,)


@admin.register(WebhookAttempt)
class WebhookAttemptAdmin(ReadOnlyAdmin):
    list_display = (
        "delivery",
        "number",
        "started_at",
        "duration_ms",
        "response_code",
        "succeeded",
        "redelivery",
    )
    list_filter = ("succeeded", "redelivery", "response_code", "started_at")
    search_fields = ("delivery__id", "delivery__event", "error")
    list_select_related = ("delivery",)
    raw_id_fields = ("delivery",)
    date_hierarchy = "started_at"
