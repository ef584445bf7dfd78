"""Tenancy and access: projects, members and their roles, API keys, the audit trail.

Every other app's rows belong to exactly one Project; nothing here knows what they are.
"""

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

    Fanned out to live pages after commit; webhook delivery reads the same rows. A row is
    never edited except to mark it sent.
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
