"""Workflow state: tasks as explicit state machines, separate from sessions.

A task is indexed by its own id and lives in its project; any agent of the project reads and
advances it without reading a conversation. Sessions reference tasks through TaskSession; a task
never lives inside a message thread. Every transition, step attempt, signal and link is recorded
in TaskHistory, which the database keeps append-only (no UPDATE; migration 0002).
"""

import uuid
from functools import cached_property

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.models import ApiKey, Project
from sessions_app.models import Agent, Session

from .workflows import WorkflowSpec, spec_from_stored


class WorkflowDefinition(models.Model):
    """One immutable version of a workflow. Tasks point at the version they started with."""

    class Source(models.TextChoices):
        CODE = "code"
        FILE = "file"
        API = "api"

    # None: a built-in definition registered from code, startable by every project.
    project = models.ForeignKey(
        Project,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="workflow_definitions",
    )
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200, blank=True, default="")
    # WorkflowSpec.as_dict(): validated by parse_workflow before it is ever stored.
    definition = models.JSONField()
    content_hash = models.CharField(max_length=64)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.API)
    created_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "name", "version"],
                condition=Q(project__isnull=False),
                name="workflow_unique_project_version",
            ),
            models.UniqueConstraint(
                fields=["name", "version"],
                condition=Q(project__isnull=True),
                name="workflow_unique_builtin_version",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @cached_property
    def spec(self) -> WorkflowSpec:
        # Stored definitions never change, so one parse per instance (and per process) is enough.
        return spec_from_stored(self.definition, self.content_hash)

    @property
    def is_builtin(self) -> bool:
        return self.project_id is None


class Task(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tasks")
    # RESTRICT, not PROTECT: a definition in use cannot be deleted on its own, but deleting a
    # project takes its tasks and its own definitions together.
    workflow = models.ForeignKey(
        WorkflowDefinition, on_delete=models.RESTRICT, related_name="tasks"
    )
    external_id = models.CharField(max_length=200, null=True, blank=True)
    state = models.CharField(max_length=100)
    params = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # Optimistic concurrency: +1 on every change of state, steps or signals (not on links).
    version = models.PositiveIntegerField(default=1)
    initiated_by = models.CharField(max_length=150)
    initiated_by_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    initiated_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # SHA-256 of the per-task signal token (shown once, to the creator): lets an external system
    # with no API key deliver signals to this task and nothing else.
    signal_token_hash = models.CharField(max_length=64, unique=True)
    sessions = models.ManyToManyField(
        Session, through="TaskSession", related_name="tasks", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"],
                condition=Q(external_id__isnull=False),
                name="task_unique_external_id",
            ),
        ]
        indexes = [
            # Tasks list: newest first within a project, keyset on (created_at, id).
            models.Index(fields=["project", "-created_at", "-id"], name="task_project_created"),
            # Tasks list filtered by state, and by workflow (the API's and dashboard's filters).
            models.Index(
                fields=["project", "state", "-created_at", "-id"], name="task_project_state"
            ),
            models.Index(
                fields=["project", "workflow", "-created_at", "-id"], name="task_project_workflow"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow.name}:{self.pk}"

    @property
    def spec(self) -> WorkflowSpec:
        return self.workflow.spec

    @property
    def display_title(self) -> str:
        """What the dashboard calls the task: its `metadata.title` when the agent gave one
        ("Refund policy v3"), else its workflow's title or name."""
        title = (self.metadata or {}).get("title")
        if isinstance(title, str) and title.strip():
            return title.strip()
        return self.workflow.title or self.workflow.name

    @property
    def is_finished(self) -> bool:
        return self.spec.is_terminal(self.state)


class TaskSession(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="session_links")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="task_links")
    linked_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "session"], name="tasksession_unique"),
        ]
        indexes = [
            # A session's tasks (session page, GET /sessions/{id}); the unique index serves the
            # other direction.
            models.Index(fields=["session", "task"], name="tasksession_session"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} ↔ {self.session_id}"


class StepStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"


FINISHED_STEP_STATUSES = frozenset({StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED})
# An attempt is under way in these: updates for the current attempt apply to them.
ACTIVE_STEP_STATUSES = frozenset({StepStatus.RUNNING, StepStatus.WAITING})


class Step(models.Model):
    """A declared step of a task: its current attempt, what it produced, what it waits on.

    `pending` with attempts > 0 means the last attempt failed and a retry is due; `failed` is
    final (max_attempts reached). `round` goes up when a transition reopens the step (a loop),
    which starts its attempts from zero again; history keeps every round.
    """

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="steps")
    key = models.CharField(max_length=100)
    title = models.CharField(max_length=200, blank=True, default="")
    position = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING)
    round = models.PositiveIntegerField(default=1)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=1)
    # {"type": str, "message": str, "detail": {...}}: the last failure, kept after a success.
    last_error = models.JSONField(null=True, blank=True)
    inputs = models.JSONField(default=dict, blank=True)
    outputs = models.JSONField(default=dict, blank=True)
    branch = models.CharField(max_length=100, blank=True, default="")
    waiting_on = models.CharField(max_length=100, blank=True, default="")
    wait_deadline = models.DateTimeField(null=True, blank=True)
    signal_payload = models.JSONField(null=True, blank=True)
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="steps"
    )
    actor = models.CharField(max_length=150, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "key"], name="step_unique_key"),
        ]
        indexes = [
            # The deadline job's scan (expire_step_deadlines): only waiting steps with a deadline.
            models.Index(
                fields=["wait_deadline"],
                condition=Q(status="waiting", wait_deadline__isnull=False),
                name="step_wait_deadline_due",
            ),
            # Tasks list filtered by step status (e.g. every task with a failed step).
            models.Index(fields=["status", "task"], name="step_status_task"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.key}"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STEP_STATUSES

    @property
    def is_retryable(self) -> bool:
        return self.attempts < self.max_attempts

    def start_clean(self) -> None:
        """Set the fields a round starts with (task creation, a transition reopening the step):
        pending, no attempt, no error, output, branch or wait. Not saved; `round`, `inputs` and
        who ran it are the caller's (a reopening keeps them, a replay of creation resets them)."""
        self.status = StepStatus.PENDING
        self.attempts = 0
        self.last_error = None
        self.outputs = {}
        self.branch = ""
        self.waiting_on = ""
        self.wait_deadline = None
        self.signal_payload = None
        self.started_at = None
        self.finished_at = None


class HistoryKind(models.TextChoices):
    CREATED = "created"
    TRANSITION = "transition"
    STEP = "step"
    SIGNAL = "signal"
    LINK = "link"
    UNLINK = "unlink"


class TaskHistory(models.Model):
    """One append-only record: a transition, a step attempt's change, a signal, a link.

    Enough to debug a failure from data alone: which step, which round and attempt, with which
    inputs, which error, who did it and when. The database refuses UPDATE (migration 0002).
    """

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="history")
    kind = models.CharField(max_length=16, choices=HistoryKind.choices)
    actor = models.CharField(max_length=150)
    # Task states for transitions; step statuses (the attempt's outcome) for step entries.
    from_state = models.CharField(max_length=100, blank=True, default="")
    to_state = models.CharField(max_length=100, blank=True, default="")
    step_key = models.CharField(max_length=100, blank=True, default="")
    round = models.PositiveIntegerField(null=True, blank=True)
    attempt = models.PositiveIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    error = models.JSONField(null=True, blank=True)
    data = models.JSONField(default=dict, blank=True)
    task_version = models.PositiveIntegerField(null=True, blank=True)
    # A replayed step update or signal finds its original through this (see services/steps.py).
    dedupe_key = models.CharField(max_length=300, null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "task history"
        constraints = [
            models.UniqueConstraint(
                fields=["task", "dedupe_key"],
                condition=Q(dedupe_key__isnull=False),
                name="taskhistory_unique_dedupe_key",
            ),
        ]
        indexes = [
            # A task's recent history (GET /tasks/{id}, the dashboard's timeline).
            models.Index(fields=["task", "-id"], name="taskhistory_task_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} {self.kind} {self.from_state}→{self.to_state}"


class TaskSignal(models.Model):
    """A signal delivered to a task. Kept pending until a step waits on it, so a webhook that
    arrives before the agent starts waiting is not lost."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="signals")
    name = models.CharField(max_length=100)
    payload = models.JSONField(default=dict, blank=True)
    error = models.JSONField(null=True, blank=True)
    actor = models.CharField(max_length=150)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    received_at = models.DateTimeField()
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_by = models.JSONField(default=list, blank=True)  # step keys it resolved

    class Meta:
        ordering = ["id"]
        constraints = [
            # A retried webhook finds its original delivery instead of resolving twice.
            models.UniqueConstraint(
                fields=["task", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="tasksignal_unique_idempotency_key",
            ),
        ]
        indexes = [
            # "Is a signal with this name already waiting to be consumed?" (wait_on_signal).
            models.Index(
                fields=["task", "name"],
                condition=Q(consumed_at__isnull=True),
                name="tasksignal_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} signal {self.name}"
