"""Retention: policies (per project, per-agent overrides), legal holds, the jobs' runs, the
compactions they made, and the tombstones of deleted sessions."""

import uuid

from django.db import models
from django.db.models import Q

from core.models import Project
from sessions_app.models import Agent, Session

# The policy's durations, in the order the page and the API show them. Each may be empty
# (= never).
DURATION_FIELDS = (
    "close_idle_after",
    "close_paused_after",
    "archive_closed_after",
    "compact_after",
    "delete_after",
    "outcome_compact_after",
    "outcome_delete_after",
    "artifact_max_age",
)
# The outcomes that keep a session's data longer (outcome_compact_after / outcome_delete_after).
OUTCOMES = ("error", "handoff", "over_budget")
POLICY_FIELDS = (*DURATION_FIELDS, "keep_outcomes", "keep_tags")


class RetentionPolicy(models.Model):
    """A project's policy (agent empty), or an agent's override (agent set).

    An override sets only the fields named in `overrides`; the others come from the project's
    policy. A project without a policy row uses SWITCHBOARD_RETENTION_DEFAULTS.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    close_idle_after = models.DurationField(null=True, blank=True)
    close_paused_after = models.DurationField(null=True, blank=True)
    archive_closed_after = models.DurationField(null=True, blank=True)
    compact_after = models.DurationField(null=True, blank=True)
    delete_after = models.DurationField(null=True, blank=True)
    # Sessions with one of these outcomes, or one of these tags (metadata["tags"]), keep their
    # data longer: these replace compact_after / delete_after for them.
    keep_outcomes = models.JSONField(default=list, blank=True)
    keep_tags = models.JSONField(default=list, blank=True)
    outcome_compact_after = models.DurationField(null=True, blank=True)
    outcome_delete_after = models.DurationField(null=True, blank=True)
    # Artifact versions older than this (since saved) are deleted from the sessions that keep
    # them, held ones aside; empty: kept as long as their session (services.jobs).
    artifact_max_age = models.DurationField(null=True, blank=True)
    # An override's own fields (names from POLICY_FIELDS); unused on a project policy.
    overrides = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        verbose_name_plural = "retention policies"
        constraints = [
            models.UniqueConstraint(
                fields=["project"], condition=Q(agent__isnull=True), name="retention_one_policy"
            ),
            models.UniqueConstraint(
                fields=["project", "agent"],
                condition=Q(agent__isnull=False),
                name="retention_one_override",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project_id} {self.agent or 'project'}"


class HoldScope(models.TextChoices):
    SESSION = "session"
    AGENT = "agent"
    PROJECT = "project"


class LegalHold(models.Model):
    """While a hold stands (released_at empty) nothing it covers is compacted or deleted."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=10, choices=HoldScope.choices)
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    reason = models.CharField(max_length=1000)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.CharField(max_length=150, blank=True, default="")
    release_reason = models.CharField(max_length=1000, blank=True, default="")

    class Meta:
        constraints = [
            # One standing hold per target (placing it again is a no-op, see services.holds).
            models.UniqueConstraint(
                fields=["project", "scope", "session", "agent"],
                condition=Q(released_at__isnull=True),
                nulls_distinct=False,
                name="retention_one_standing_hold",
            ),
        ]
        indexes = [
            # The jobs' and the preview's hold check (a few standing rows per project).
            models.Index(
                fields=["project", "scope"],
                condition=Q(released_at__isnull=True),
                name="retention_standing_holds",
            )
        ]

    def __str__(self) -> str:
        target = self.session_id or self.agent_id or self.project_id
        return f"hold {self.scope} {target}"


class RunJob(models.TextChoices):
    ENFORCE = "enforce_retention"
    COMPACT = "compact_sessions"


class RunStatus(models.TextChoices):
    QUEUED = "queued"  # asked for from the page; a worker has not taken it yet
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # finished, with at least one session's error recorded


class RetentionRun(models.Model):
    """One execution of a retention job in one project: what it examined, changed, freed."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    job = models.CharField(max_length=24, choices=RunJob.choices)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.RUNNING)
    trigger = models.CharField(max_length=150, default="beat")  # "beat" or who ran it
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    examined = models.IntegerField(default=0)
    closed = models.IntegerField(default=0)
    archived = models.IntegerField(default=0)
    compacted = models.IntegerField(default=0)
    deleted = models.IntegerField(default=0)
    events_freed = models.BigIntegerField(default=0)
    bytes_freed = models.BigIntegerField(default=0)
    # Artifact versions the policy's artifact_max_age deleted, and their stored bytes.
    artifacts_deleted = models.IntegerField(default=0)
    artifact_bytes_freed = models.BigIntegerField(default=0)
    # [{"session_id", "action", "error"}], at most RUN_ERRORS_KEPT of them.
    errors = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "-started_at"], name="retention_run_recent")]

    def __str__(self) -> str:
        return f"{self.job} {self.started_at:%Y-%m-%d %H:%M} {self.status}"


class Compaction(models.Model):
    """One compaction of a session up to `boundary_seq` (invariant 6 recorded by its hashes)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    after_seq = models.IntegerField()
    boundary_seq = models.IntegerField()
    events_removed = models.IntegerField()
    bytes_removed = models.BigIntegerField()
    summary = models.TextField(blank=True, default="")
    summariser = models.CharField(max_length=200)
    state_hash_before = models.CharField(max_length=64)
    state_hash_after = models.CharField(max_length=64)
    run = models.ForeignKey(
        RetentionRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.session_id} through {self.boundary_seq}"


class SessionTombstone(models.Model):
    """What is left of a session retention deleted: who it was and how much went."""

    session_id = models.UUIDField(primary_key=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    agent_name = models.CharField(max_length=100)
    external_id = models.CharField(max_length=200, null=True, blank=True)
    title = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(auto_now_add=True)
    events_deleted = models.IntegerField()
    snapshots_deleted = models.IntegerField()
    bytes_deleted = models.BigIntegerField()
    run = models.ForeignKey(
        RetentionRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"tombstone {self.session_id}"


class ErasureStatus(models.TextChoices):
    QUEUED = "queued"  # requested; the job has not started
    RUNNING = "running"
    HELD = "held"  # stopped: a legal hold placed after the request covers a matching session
    DONE = "done"  # the receipt is final (the database refuses any change to it from then on)


class ErasureRequest(models.Model):
    """An admin's request to erase one data subject's data, and its receipt once done.

    `selectors` names the subject (all of them must match a session: services.erasure);
    `counts` says how much of each kind went; every removed object's SHA-256 is an
    ErasedObject row. Once `done`, a trigger (migration 0004) refuses any UPDATE or DELETE of
    the row: the receipt is kept as it was written."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    selectors = models.JSONField()
    requested_by = models.CharField(max_length=150)
    requested_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(
        max_length=10, choices=ErasureStatus.choices, default=ErasureStatus.QUEUED
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # kind -> how many: sessions, events, facts, snapshots, handoffs, … (services.erasure).
    counts = models.JSONField(default=dict, blank=True)
    # While `held`: the holds that stopped it ([{id, scope, session_id, agent}]).
    holds = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "-requested_at"], name="erasure_recent")]

    def __str__(self) -> str:
        return f"erasure {self.pk} ({self.status})"


class ErasureTarget(models.Model):
    """A session an erasure removes: the matching sessions and their forks, frozen when it was
    requested (a fork made later is added by the batch that finds it). `erased_at` set = gone;
    the row stays, so reads of the id answer 410 `erased` naming the receipt."""

    erasure = models.ForeignKey(ErasureRequest, on_delete=models.CASCADE, related_name="targets")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    # No foreign key: the session row is deleted by the erasure, this row stays.
    session_id = models.UUIDField()
    erased_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["erasure", "session_id"], name="erasure_target_unique_session"
            )
        ]
        indexes = [
            # The job's queue: an erasure's targets not yet erased.
            models.Index(
                fields=["erasure", "session_id"],
                condition=Q(erased_at__isnull=True),
                name="erasure_target_pending",
            ),
            # "Was this missing session erased?" (the 410 of reads; the guard trigger's check).
            models.Index(fields=["session_id"], name="erasure_target_session"),
        ]

    def __str__(self) -> str:
        return f"{self.erasure_id} {self.session_id}"


class ErasedObject(models.Model):
    """One object an erasure removed (or rewrote): its kind, a reference, and the SHA-256 of
    its stored form before it went. Append-only (migration 0004's trigger)."""

    erasure = models.ForeignKey(
        ErasureRequest, on_delete=models.CASCADE, related_name="erased_objects"
    )
    kind = models.CharField(max_length=40)
    ref = models.CharField(max_length=200)
    sha256 = models.CharField(max_length=64)

    class Meta:
        indexes = [models.Index(fields=["erasure", "id"], name="erased_object_receipt")]

    def __str__(self) -> str:
        return f"{self.kind} {self.ref}"
