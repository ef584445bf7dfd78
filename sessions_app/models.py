"""The session store: agents, sessions, their append-only event logs and snapshots."""

import uuid
from decimal import Decimal

from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q

from core.models import Project


class Agent(models.Model):
    """An agent definition; registered on first use of its name within the project."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    version = models.CharField(max_length=50, blank=True, default="")
    config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="agent_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


class SessionStatus(models.TextChoices):
    OPEN = "open", "Open"
    PAUSED = "paused", "Paused"
    RESUMED = "resumed", "Resumed"
    CLOSED = "closed", "Closed"
    ARCHIVED = "archived", "Archived"


# The lifecycle diagram of DESIGN.md: the only allowed moves.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    SessionStatus.OPEN: frozenset({SessionStatus.PAUSED, SessionStatus.CLOSED}),
    SessionStatus.PAUSED: frozenset({SessionStatus.RESUMED, SessionStatus.CLOSED}),
    SessionStatus.RESUMED: frozenset({SessionStatus.PAUSED, SessionStatus.CLOSED}),
    SessionStatus.CLOSED: frozenset({SessionStatus.ARCHIVED}),
    SessionStatus.ARCHIVED: frozenset(),
}
WRITABLE_STATUSES = (SessionStatus.OPEN, SessionStatus.PAUSED, SessionStatus.RESUMED)


class Session(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sessions")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="sessions")
    external_id = models.CharField(max_length=200, null=True, blank=True)
    title = models.CharField(max_length=300, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=SessionStatus.choices, default=SessionStatus.OPEN
    )
    metadata = models.JSONField(default=dict, blank=True)
    # Highest seq allocated; the next append takes head_seq + 1 (allocated under this row's lock).
    head_seq = models.IntegerField(default=0)
    tokens_used = models.BigIntegerField(default=0)
    cost_used = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    budget_max_tokens = models.BigIntegerField(null=True, blank=True)
    budget_max_cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    # Copy-on-write lineage: this session's history is `parent`'s up to `fork_seq`, then its own.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="forks"
    )
    fork_seq = models.IntegerField(null=True, blank=True)
    # Every ancestor with the last seq taken from it, oldest first: [[session_id, upto_seq], …].
    # Denormalised at fork time so reads resolve the lineage without a recursive query.
    ancestry = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    # Who has taken the conversation over from the agent (an actor label, "" when nobody):
    # while set, appends by agents are refused (409 session_taken_over) and people's accepted.
    # Set by services.lifecycle.set_taken_over (the handoff app calls it; nothing here knows
    # about handoffs) and checked in the allocating UPDATE itself, so no append slips through.
    taken_over_by = models.CharField(max_length=150, blank=True, default="")
    # Compaction (retention_app): this session's own transient events with seq <= this were
    # removed, and a `compaction` snapshot at this seq holds the state and the transcript's
    # summary. 0 = never compacted. Reads use it to say "compacted" instead of skipping seqs.
    compacted_through_seq = models.IntegerField(default=0)
    # The retention app's Compaction record of the latest compaction (no foreign key: the
    # session store knows nothing of the floor above it).
    compaction_id = models.UUIDField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"],
                condition=Q(external_id__isnull=False),
                name="session_unique_external_id",
            ),
        ]
        indexes = [
            # Sessions list: newest first within a project, keyset on (created_at, id).
            models.Index(fields=["project", "-created_at", "-id"], name="session_project_created"),
            # Sessions list filtered by status (the dashboard's most common filter).
            models.Index(
                fields=["project", "status", "-created_at", "-id"], name="session_project_status"
            ),
            models.Index(
                fields=["project", "agent", "-created_at", "-id"], name="session_project_agent"
            ),
            # Recently active sessions (overview, retention's idle scan).
            models.Index(fields=["project", "-updated_at"], name="session_project_updated"),
            # The API list's `metadata.<name>=<value>` (queries.metadata_matches): jsonb
            # containment, ANDed by the planner with a project index above. jsonb_path_ops:
            # smaller and faster than the default for @>, the only operator asked of it.
            GinIndex(
                fields=["metadata"], opclasses=["jsonb_path_ops"], name="session_metadata_path"
            ),
            # Retention's scans (retention_app.selection), oldest first, a batch at a time: each
            # batch walks its rule's index from where the last one stopped and evaluates the
            # outcome rules only for the rows it takes, instead of sorting every candidate.
            # Partial: closed and archived sessions are seldom written, so appends never
            # touch these.
            models.Index(
                fields=["project", "archived_at", "id"],
                condition=models.Q(status="archived"),
                name="session_retention_delete",
            ),
            models.Index(
                fields=["project", "closed_at", "id"],
                condition=models.Q(status="closed"),
                name="session_retention_archive",
            ),
            models.Index(
                fields=["project", "closed_at", "id"],
                condition=models.Q(status__in=["closed", "archived"])
                & models.Q(head_seq__gt=models.F("compacted_through_seq")),
                name="session_retention_compact",
            ),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)

    def can_transition(self, to: str) -> bool:
        return to in ALLOWED_TRANSITIONS[SessionStatus(self.status)]

    @property
    def is_writable(self) -> bool:
        return self.status in WRITABLE_STATUSES

    def lineage_segments(self) -> list[tuple[uuid.UUID, int, int | None]]:
        """(session_id, after_seq, upto_seq) per segment of this session's visible history.

        Segments are disjoint, ordered by seq: ancestors first, then this session (upto None).
        """
        segments: list[tuple[uuid.UUID, int, int | None]] = []
        lower = 0
        for ancestor_id, upto in self.ancestry:
            segments.append((uuid.UUID(str(ancestor_id)), lower, upto))
            lower = upto
        segments.append((self.id, lower, None))
        return segments

    @property
    def own_start_seq(self) -> int:
        """The last seq this session inherits (0 for a root): its own events come after."""
        return self.fork_seq or 0


class EventKind(models.TextChoices):
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    NOTE = "note"
    ERROR = "error"
    STATE = "state"
    FACT = "fact"
    DECISION = "decision"
    LIFECYCLE = "lifecycle"
    HANDOFF = "handoff"
    # A version of a named file saved or deleted (services.artifacts): system-written.
    ARTIFACT = "artifact"


class Tier(models.TextChoices):
    TRANSIENT = "transient"
    DURABLE = "durable"


DEFAULT_TIER: dict[str, str] = {
    EventKind.MESSAGE: Tier.TRANSIENT,
    EventKind.TOOL_CALL: Tier.TRANSIENT,
    EventKind.TOOL_RESULT: Tier.TRANSIENT,
    EventKind.NOTE: Tier.TRANSIENT,
    EventKind.ERROR: Tier.TRANSIENT,
    EventKind.STATE: Tier.TRANSIENT,
    EventKind.FACT: Tier.DURABLE,
    EventKind.DECISION: Tier.DURABLE,
    EventKind.LIFECYCLE: Tier.DURABLE,
    EventKind.HANDOFF: Tier.DURABLE,
    EventKind.ARTIFACT: Tier.DURABLE,
}
AGENT_KINDS = frozenset(
    {
        EventKind.MESSAGE,
        EventKind.TOOL_CALL,
        EventKind.TOOL_RESULT,
        EventKind.NOTE,
        EventKind.ERROR,
        EventKind.STATE,
        EventKind.FACT,
        EventKind.DECISION,
    }
)


class Event(models.Model):
    """One immutable log entry. The database refuses UPDATE, and DELETE outside retention.

    The primary key (session_id, seq) is also the keyset every slice reads along.
    """

    pk = models.CompositePrimaryKey("session_id", "seq")
    # No separate index: the primary key (session_id, seq) already leads with session_id.
    session = models.ForeignKey(Session, on_delete=models.DO_NOTHING, db_index=False)
    seq = models.IntegerField()
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    tier = models.CharField(max_length=10, choices=Tier.choices)
    role = models.CharField(max_length=16, blank=True, default="")
    content = models.JSONField(default=dict)
    # Searchable text (a message's `text`), indexed for full-text search on PostgreSQL.
    text = models.TextField(blank=True, default="")
    tokens = models.IntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal("0"))
    actor = models.CharField(max_length=120, blank=True, default="")
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            # Invariant 3: a retried append finds its original instead of writing again. Also
            # the index of reads by key (GET …/events?key=, ?key_prefix=): with the pattern
            # operator class, `idempotency_key LIKE 'p%'` is a range scan of it whatever the
            # database's collation (a default-collation B-tree serves only equality), and
            # equality and uniqueness are the same (migration 0007).
            models.UniqueConstraint(
                fields=["session", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="event_unique_idempotency_key",
                opclasses=["uuid_ops", "varchar_pattern_ops"],
            ),
        ]
        indexes = [
            # Slices filtered by tier (durable facts/decisions panel, compaction).
            models.Index(
                fields=["session", "seq"],
                condition=Q(tier="durable"),
                name="event_durable_seq",
            ),
            # A session's lifecycle timeline and a paused session's pause time (dashboard
            # session page, queries.lifecycle_changes / waiting_sessions): a few rows per
            # session, where the durable index would walk every fact and decision.
            models.Index(
                fields=["session", "seq"],
                condition=Q(kind="lifecycle"),
                name="event_lifecycle_seq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.kind}"


class Blob(models.Model):
    """Bytes that a session's events refer to by their SHA-256 (hex), stored once per session
    however often they are sent: a framework that re-sends a growing value at every checkpoint
    (LangGraph's message list) stores each part once and names the parts in the event.

    Content-addressed, so a row never changes (nothing updates one). Not part of the log: no
    seq, not compacted (an event kept after compaction may still name it); deleted with the
    session (CASCADE, through retention's whole-session deletion). A fork reads its ancestors'
    blobs (services.blobs): its events name them."""

    pk = models.CompositePrimaryKey("session_id", "sha256")
    # No separate index: the primary key (session_id, sha256) leads with session_id.
    session = models.ForeignKey(Session, on_delete=models.CASCADE, db_index=False)
    sha256 = models.CharField(max_length=64)
    size = models.IntegerField()
    # PostgreSQL compresses a large bytea in place (TOAST), so repetitive bytes take less room.
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.session_id} blob {self.sha256[:12]} ({self.size} bytes)"


class Artifact(models.Model):
    """One version of a named file of a session (PUT /sessions/{id}/artifacts/{name}).

    The bytes live in the `artifacts` storage (Django's storage API: a folder, or S3) under
    `storage_key`, a name of our own making that no client chooses; the row says what they are.
    Each save is also an `artifact` event in the log, whose seq the row keeps: a fork and a
    time-travel read see the rows of the lineage with `seq` up to their point, without a copy
    of the bytes (services.artifacts). A deleted version keeps its row (`deleted_at`), so a
    version number is never given twice and the log's events still name something; its bytes
    are gone. Deleted with the session (CASCADE; its files by services.artifacts'
    forget_session_files, which whole-session deletion calls)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, db_index=False)
    # Denormalised: the project's quota sums its rows without a join.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    name = models.CharField(max_length=200)
    version = models.IntegerField()
    seq = models.IntegerField()
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    content_type = models.CharField(max_length=200)
    storage_key = models.CharField(max_length=300)
    actor = models.CharField(max_length=120, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    # The `artifact` event that recorded the deletion.
    deleted_seq = models.IntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            # Also the index of a session's listing and of one name's versions.
            models.UniqueConstraint(
                fields=["session", "name", "version"], name="artifact_unique_version"
            ),
        ]
        indexes = [
            # The project's quota: the sum of its stored bytes at every upload.
            models.Index(
                fields=["project"],
                include=["size"],
                condition=Q(deleted_at__isnull=True),
                name="artifact_project_stored",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {self.name} v{self.version}"


class Snapshot(models.Model):
    """Folded state of a session at `seq`: working state, facts, summary, and their hash."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="snapshots")
    seq = models.IntegerField()
    state = models.JSONField(default=dict)
    facts = models.JSONField(default=dict)
    summary = models.TextField(blank=True, default="")
    content_hash = models.CharField(max_length=64)
    # "auto" (every N events), "agent" (POST /snapshots), "compaction".
    reason = models.CharField(max_length=16, default="auto")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="snapshot_unique_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}@{self.seq} {self.reason}"
