"""Human handoffs: an agent (or the budget guard) asks for a person; one person claims it
under a lease, answers, and hands the session back or takes it over.

States (HandoffStatus):

    open ──claim──▶ claimed ──respond/accept/reject/edit──▶ answered ──hand back──▶ handed_back
     ▲  ◀─release/lease expiry─┘  │                            │
     │                            ├──take over──▶ taken_over ──┼──hand back──▶ handed_back
     │                            │                 │          └──close──────▶ closed
     │                            ├──hand back / close          └──close──────▶ closed
     │                            └──ignore (allow_ignore)──▶ ignored
     ├──cancel (the agent, while open or claimed)──▶ cancelled
     └──SLA limit (open or claimed)──▶ expired

`open`, `claimed`, `answered` and `taken_over` are active: at most one per session (a partial
unique index), and only a lease holder acts on the last three. The agent's long-poll returns on
anything past `claimed` (RESOLVED).
"""

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.models import Project
from sessions_app.models import Session


class HandoffKind(models.TextChoices):
    QUESTION = "question", "Question"
    APPROVAL = "approval", "Approval"
    TAKEOVER = "takeover", "Take-over"
    BUDGET = "budget", "Budget"


# What an agent may ask for; `budget` handoffs are opened by the system on an overrun.
AGENT_KINDS = (HandoffKind.QUESTION, HandoffKind.APPROVAL, HandoffKind.TAKEOVER)


class HandoffStatus(models.TextChoices):
    OPEN = "open", "Open"
    CLAIMED = "claimed", "Claimed"
    ANSWERED = "answered", "Answered"
    TAKEN_OVER = "taken_over", "Taken over"
    HANDED_BACK = "handed_back", "Handed back"
    CLOSED = "closed", "Closed"
    CANCELLED = "cancelled", "Cancelled"
    EXPIRED = "expired", "Expired"
    # The holder dismissed the request (Agent Inbox's "ignore"): no verdict, the session
    # resumes and the agent goes on without the action.
    IGNORED = "ignored", "Ignored"


ACTIVE_STATUSES = (
    HandoffStatus.OPEN,
    HandoffStatus.CLAIMED,
    HandoffStatus.ANSWERED,
    HandoffStatus.TAKEN_OVER,
)
# Held under a lease by one person.
LEASED_STATUSES = (HandoffStatus.CLAIMED, HandoffStatus.ANSWERED, HandoffStatus.TAKEN_OVER)
# The agent has its outcome: the long-poll returns on these.
RESOLVED_STATUSES = (
    HandoffStatus.ANSWERED,
    HandoffStatus.TAKEN_OVER,
    HandoffStatus.HANDED_BACK,
    HandoffStatus.CLOSED,
    HandoffStatus.CANCELLED,
    HandoffStatus.EXPIRED,
    HandoffStatus.IGNORED,
)
# Overdue and expiry apply while nobody has answered yet.
UNANSWERED_STATUSES = (HandoffStatus.OPEN, HandoffStatus.CLAIMED)


class Priority(models.IntegerChoices):
    LOW = 0, "low"
    NORMAL = 1, "normal"
    HIGH = 2, "high"
    URGENT = 3, "urgent"

    @classmethod
    def from_name(cls, name: str) -> "Priority":
        for member in cls:
            if member.label == name:
                return member
        raise ValueError(name)


class Handoff(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="handoffs")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="handoffs")
    kind = models.CharField(max_length=16, choices=HandoffKind.choices)
    status = models.CharField(
        max_length=16, choices=HandoffStatus.choices, default=HandoffStatus.OPEN
    )
    reason = models.CharField(max_length=1000, blank=True, default="")
    # question: {"question", "choices"?}; approval: Agent Inbox's {"action_request", "config",
    # "description"}; takeover: free; budget: {"reason", "usage", "budget"}.
    payload = models.JSONField(default=dict, blank=True)
    priority = models.SmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    due_at = models.DateTimeField()
    # Raised once by the SLA job when due_at passes unanswered.
    overdue = models.BooleanField(default=False)
    # due_at plus the project's expiry limit: unanswered by then, the SLA job expires it.
    expires_at = models.DateTimeField()
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    requested_by = models.CharField(max_length=150)
    # {"type": "respond"|"accept"|"edit"|"reject"|"ignore"|"budget", "text"?, "args"?,
    # "budget"?, "by"}
    answer = models.JSONField(null=True, blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    lease_holder = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="held_handoffs",
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One active handoff per session: a second request answers 409 (services).
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status__in=["open", "claimed", "answered", "taken_over"]),
                name="handoff_one_active_per_session",
            ),
            # A retried request finds its original.
            models.UniqueConstraint(
                fields=["session", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="handoff_unique_idempotency_key",
            ),
        ]
        indexes = [
            # The queue: a project's active handoffs by priority, then by wait (queries.queue).
            models.Index(
                fields=["project", "-priority", "created_at"],
                condition=Q(status__in=["open", "claimed", "answered", "taken_over"]),
                name="handoff_queue",
            ),
            # GET /handoffs?status=: newest first, keyset on (created_at, id).
            models.Index(
                fields=["project", "status", "-created_at", "-id"], name="handoff_project_status"
            ),
            models.Index(fields=["project", "-created_at", "-id"], name="handoff_project_created"),
            # The lease job: held handoffs by expiry.
            models.Index(
                fields=["lease_expires_at"],
                condition=Q(status__in=["claimed", "answered", "taken_over"]),
                name="handoff_lease_due",
            ),
            # The SLA job: unanswered handoffs by due time, and by expiry.
            models.Index(
                fields=["due_at"],
                condition=Q(status__in=["open", "claimed"], overdue=False),
                name="handoff_sla_due",
            ),
            models.Index(
                fields=["expires_at"],
                condition=Q(status__in=["open", "claimed"]),
                name="handoff_sla_expiry",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} handoff {self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def is_resolved(self) -> bool:
        return self.status in RESOLVED_STATUSES

    @property
    def priority_name(self) -> str:
        return Priority(self.priority).label


DEFAULT_DUE = {
    HandoffKind.QUESTION: timedelta(minutes=30),
    HandoffKind.APPROVAL: timedelta(minutes=30),
    HandoffKind.TAKEOVER: timedelta(minutes=15),
    HandoffKind.BUDGET: timedelta(hours=1),
}


class HandoffSettings(models.Model):
    """A project's SLA: how soon each kind is due, when an overdue one expires, the lease."""

    project = models.OneToOneField(
        Project, on_delete=models.CASCADE, related_name="handoff_settings"
    )
    question_due_seconds = models.PositiveIntegerField(default=30 * 60)
    approval_due_seconds = models.PositiveIntegerField(default=30 * 60)
    takeover_due_seconds = models.PositiveIntegerField(default=15 * 60)
    budget_due_seconds = models.PositiveIntegerField(default=60 * 60)
    # An unanswered handoff this long past its due time expires (the agent is told).
    expire_after_overdue_seconds = models.PositiveIntegerField(default=24 * 60 * 60)
    lease_seconds = models.PositiveIntegerField(default=15 * 60)
    updated_at = models.DateTimeField(auto_now=True)
    # The digest of waiting handoffs (services.digest), off while the interval is 0: e-mailed
    # to these addresses and/or posted to a Slack-compatible incoming webhook ({"text": …}).
    digest_emails = models.JSONField(default=list, blank=True)
    digest_chat_url = models.CharField(max_length=2000, blank=True, default="")
    digest_interval_seconds = models.PositiveIntegerField(default=0)
    # When the digest job next looks at the project; moved on (conditionally, under SKIP
    # LOCKED) by the worker that takes it, so two workers never send the same digest.
    digest_due_at = models.DateTimeField(null=True, blank=True)
    # What each channel was last sent (a fingerprint of the waiting handoffs): a digest goes out
    # only when it differs; a failed send keeps the old one, so the next interval retries.
    digest_email_sent_state = models.CharField(max_length=64, blank=True, default="")
    digest_chat_sent_state = models.CharField(max_length=64, blank=True, default="")
    digest_sent_at = models.DateTimeField(null=True, blank=True)
    digest_last_error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        verbose_name = "handoff settings"
        verbose_name_plural = "handoff settings"  # not Django's default "settingss"
        indexes = [
            # The digest job: projects with a digest, by when they are next due.
            models.Index(
                fields=["digest_due_at"],
                condition=Q(digest_interval_seconds__gt=0),
                name="handoff_digest_due",
            ),
        ]

    def __str__(self) -> str:
        return f"handoff SLA of project {self.project_id}"

    def due_after(self, kind: str) -> timedelta:
        return timedelta(seconds=getattr(self, f"{kind}_due_seconds"))

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_seconds)

    @property
    def expire_after(self) -> timedelta:
        return timedelta(seconds=self.expire_after_overdue_seconds)


class HandoffViewer(models.Model):
    """One open workspace page (its websocket) on a handoff: "Also viewing: alice, bob".

    Kept by the workspace's consumer (handoffs_app.presence): a row when the socket opens,
    its `seen_at` renewed by a heartbeat while it stays open, deleted when it closes. A row
    whose heartbeat stopped (its server process died) counts for no one after
    presence.VIEWER_TTL and is swept later. A table rather than the cache: the embedded default
    has a per-process cache, and several server processes must see one another's viewers.
    """

    handoff = models.ForeignKey(Handoff, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The consumer's channel: one row per open page, so one user's several tabs are several
    # rows (counted once) and closing one of them leaves the others.
    channel_name = models.CharField(max_length=200, unique=True)
    seen_at = models.DateTimeField()

    class Meta:
        indexes = [
            # presence.viewers_of: a handoff's rows seen lately.
            models.Index(fields=["handoff", "seen_at"], name="handoff_viewer_seen"),
            # presence.sweep: rows whose heartbeat stopped, across handoffs.
            models.Index(fields=["seen_at"], name="handoff_viewer_stale"),
        ]

    def __str__(self) -> str:
        return f"user {self.user_id} viewing handoff {self.handoff_id}"
