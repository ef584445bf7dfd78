"""Tenancy and access: projects, members and their roles, API keys, the audit trail.

Every other app's rows belong to exactly one Project; nothing here knows what they are.
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone


class Project(models.Model):
    """The tenant boundary: every row below belongs to exactly one project."""

    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    OPERATOR = "operator", "Operator"
    ADMIN = "admin", "Admin"

    @classmethod
    def rank(cls, role: str) -> int:
        return {cls.VIEWER: 1, cls.OPERATOR: 2, cls.ADMIN: 3}[cls(role)]


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_unique_user"),
        ]

    def __str__(self) -> str:
        return f"user {self.user_id} in project {self.project_id}: {self.role}"

    def has_role(self, minimum: str) -> bool:
        return Role.rank(self.role) >= Role.rank(minimum)


class Invitation(models.Model):
    """An admin's invitation of someone who has no account yet (core.services.invitations).

    The invitee is a pending user, created with the first invitation: inactive, with an
    unusable password and the e-mail as username. A user row is what Django's password-reset
    tokens (django.contrib.auth.tokens) are made from: they hash the user's id, password and
    last login, so the link dies once a password is chosen, and expires after
    PASSWORD_RESET_TIMEOUT. This row carries the rest (project, role, who invited) and only
    while the invitation is pending: accepting turns it into a Membership, revoking deletes it,
    and either way the link, which names this row, stops working. The audit log keeps the story.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="invitations"
    )
    email = models.EmailField(max_length=254)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="invitations_sent",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # When the last e-mail went out: its link's expiry counts from here (resend renews it).
    sent_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="invitation_unique_user"),
        ]

    def __str__(self) -> str:
        return f"invitation of {self.email} to project {self.project_id}: {self.role}"


class KeyScope(models.TextChoices):
    """What an API key may reach: `agent` (sessions, tasks, handoffs of its project) or
    `admin` (also the project's settings, retention policy, holds, webhook endpoints)."""

    AGENT = "agent", "Agent"
    ADMIN = "admin", "Admin"

    @classmethod
    def rank(cls, scope: str) -> int:
        return {cls.AGENT: 1, cls.ADMIN: 2}[cls(scope)]


class ApiKey(models.Model):
    """A project-scoped secret. Only its SHA-256 is stored; `prefix` identifies it in lists."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    hashed_secret = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    scope = models.CharField(max_length=16, choices=KeyScope.choices, default=KeyScope.AGENT)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    def has_scope(self, minimum: str) -> bool:
        return KeyScope.rank(self.scope) >= KeyScope.rank(minimum)


class AuditEntry(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="audit_entries")
    actor = models.CharField(max_length=150)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=50)
    target_type = models.CharField(max_length=50)
    target_id = models.CharField(max_length=64)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["project", "-created_at"], name="audit_project_created"),
            models.Index(fields=["target_type", "target_id"], name="audit_target"),
            # The audit log page: a project's entries newest first, keyset on the id.
            models.Index(fields=["project", "-id"], name="audit_project_id"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.target_type}:{self.target_id}"


class OutboxMessage(models.Model):
    """A domain event written in the transaction of the change it reports (core.domain_events).

    Fanned out to live pages after commit (webhooks get their own WebhookDelivery rows, written
    in the same transaction). A row is never edited except to mark it sent.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="outbox")
    type = models.CharField(max_length=60)
    groups = models.JSONField(default=list)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    relayed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The relay job's scan: unsent rows, oldest first (a handful at any time).
            models.Index(
                fields=["id"], condition=models.Q(relayed_at__isnull=True), name="outbox_unsent"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} #{self.pk}"


class LiveNotice(models.Model):
    """A live notice too large for NOTIFY's 8000 bytes (core.notify_layer, the channel layer of
    a deployment without Redis): the notice names the row, its listeners read it, and it is
    dropped a few minutes later by the next one stored."""

    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"live notice #{self.pk}"


class WebhookEndpoint(models.Model):
    """A project's URL that receives signed POSTs for the events it subscribes to.

    `secret` is kept as written: the delivery job signs every request with it (HMAC-SHA256),
    which needs the secret itself, so unlike an API key it cannot be stored hashed. It is shown
    once when the endpoint is created and never rendered again (lists show `secret_hint`).
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    secret = models.CharField(max_length=100)
    events = models.JSONField(default=list)  # event names, e.g. ["session.paused"]
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # The fan-out in the change's transaction (core.storage.insert_webhook_deliveries):
            # a project's active endpoints, usually none, found without reading the table.
            models.Index(
                fields=["project"], condition=models.Q(active=True), name="webhook_active"
            ),
        ]

    def __str__(self) -> str:
        return self.url

    @property
    def secret_hint(self) -> str:
        return f"{self.secret[:10]}…"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class WebhookDelivery(models.Model):
    """One event for one endpoint. Its `id` is the delivery id the receiver de-duplicates on:
    every attempt of it, redeliveries included, carries the same id and the same body."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    event = models.CharField(max_length=60)
    payload = models.JSONField(default=dict)  # the event's `data`
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    # Due time while pending; while a worker sends it, the end of that worker's lease.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Set while a worker (or a redelivery) is sending it; a crashed sender's lease runs out
    # and the row is due again (at least once delivery: receivers de-duplicate by id).
    leased_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            # The delivery job's scan: pending rows that are due, soonest first.
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status="pending"),
                name="webhook_delivery_due",
            ),
            # The dashboard's recent deliveries of a project.
            models.Index(fields=["project", "-created_at"], name="webhook_delivery_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.event} → endpoint {self.endpoint_id} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP attempt of a delivery, whatever its outcome (the delivery's log)."""

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=200, blank=True)
    succeeded = models.BooleanField()
    redelivery = models.BooleanField(default=False)

    class Meta:
        ordering = ["delivery", "number", "id"]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery_id}"
