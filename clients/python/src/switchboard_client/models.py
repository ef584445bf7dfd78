"""The API's responses as frozen dataclasses, and its request bodies as TypedDicts.

Each class names the schema it mirrors (`Session` is `SessionOut` of /api/v1/openapi.json), and
clients/python/tests/test_client_schema.py holds every field here against the schema a live
server serves: name, type, nullability and whether it is always sent. Fields with a default are
the ones the server sends only sometimes (`SessionListItem.state`, with include=state).

Ids are strings (UUIDs as the API writes them), times are aware datetimes, money is Decimal.
"""

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, NotRequired, Required, TypedDict

JsonObject = dict[str, Any]

SessionStatus = Literal["open", "paused", "resumed", "closed", "archived"]
# The kinds an agent may send (lifecycle and handoff events are the system's).
EventKind = Literal[
    "message", "tool_call", "tool_result", "note", "error", "state", "fact", "decision"
]
Tier = Literal["transient", "durable"]
HandoffKind = Literal["question", "approval", "takeover"]
HandoffStatus = Literal[
    "open",
    "claimed",
    "answered",
    "taken_over",
    "handed_back",
    "closed",
    "cancelled",
    "expired",
    "ignored",
]
StepStatus = Literal["pending", "running", "waiting", "succeeded", "failed", "skipped"]
Priority = Literal["low", "normal", "high", "urgent"]

# A handoff in one of these has its outcome; `Client.wait_handoff` returns on them.
PENDING_HANDOFF_STATUSES = frozenset({"open", "claimed"})


def _json(name: str) -> Any:
    """A field whose JSON key is a Python keyword (`from`)."""
    return field(metadata={"json": name})


# --- Project ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Project:
    """ProjectOut."""

    id: int
    name: str
    key_scope: str


# --- Sessions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """UsageOut."""

    tokens: int
    cost: Decimal


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """BudgetOut."""

    max_tokens: int | None
    max_cost: Decimal | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Ancestor:
    """AncestorOut."""

    session_id: str
    upto_seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Lineage:
    """LineageOut."""

    parent_id: str | None
    fork_seq: int | None
    ancestry: list[Ancestor]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkedTask:
    """LinkedTaskOut."""

    id: str
    workflow: str
    workflow_version: int
    state: str
    version: int
    finished: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    """HoldOut: a legal hold on a session, an agent or the project."""

    id: int
    scope: str
    session_id: str | None
    agent: str | None
    reason: str
    created_by: str
    created_at: datetime
    released_at: datetime | None
    released_by: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """SessionOut."""

    id: str
    external_id: str | None
    title: str
    agent: str
    status: str
    metadata: JsonObject
    head_seq: int
    usage: Usage
    budget: Budget
    lineage: Lineage
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionWithTasks(Session):
    """SessionWithTasksOut: a session as opened or read, with its linked tasks and the legal
    holds covering it."""

    tasks: list[LinkedTask]
    holds: list[Hold]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorBody:
    """ErrorBody: an error as the API writes it."""

    code: str
    message: str
    detail: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """FactOut: a fact's latest value and the seq that set it."""

    value: Any
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionListItem(Session):
    """ListedSessionOut: with the legal holds covering it. `state`, `facts` and `state_error`
    come with include=state only; `events` (the last ones, oldest first) and `events_has_more`
    with include=events only."""

    holds: list[Hold]
    state: JsonObject | None = None
    facts: dict[str, Fact] | None = None
    state_error: ErrorBody | None = None
    events: "list[Event] | None" = None
    events_has_more: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPage:
    """SessionListOut."""

    sessions: list[SessionListItem]
    next_cursor: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionDeleted:
    """SessionDeletedOut."""

    id: str
    deleted: list[str]
    events_deleted: int


# --- Events, state, snapshots ----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendedEvent:
    """AppendedEventOut."""

    seq: int
    kind: str
    tier: str
    created_at: datetime
    replayed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendResult:
    """AppendOut: the seqs given to the batch, in its order."""

    head_seq: int
    status: str
    events: list[AppendedEvent]


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """EventOut."""

    seq: int
    kind: str
    tier: str
    role: str
    tokens: int
    cost: Decimal
    actor: str
    idempotency_key: str | None
    created_at: datetime
    session_id: str
    content: JsonObject


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactedRange:
    """CompactedRangeOut."""

    session_id: str
    after_seq: int
    through_seq: int
    compaction_id: str | None
    summary: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EventSlice:
    """EventSliceOut."""

    head_seq: int
    has_more: bool
    compacted: list[CompactedRange]
    # 0 from a server older than the field: the same as never compacted.
    compaction_mark: int = 0
    events: list[Event]


@dataclass(frozen=True, slots=True, kw_only=True)
class State:
    """StateOut: working state, facts and summary at `seq`."""

    seq: int
    state: JsonObject
    facts: dict[str, Fact]
    summary: str
    content_hash: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """SnapshotOut."""

    seq: int
    content_hash: str
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportedSession:
    """The header line of an export (`{"session": {...}}`)."""

    id: str
    title: str
    agent: str
    parent_id: str | None
    fork_seq: int | None
    status: str
    head_seq: int
    usage: Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportHeader:
    session: ExportedSession


# --- Tasks and workflows ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowRef:
    """WorkflowRefOut."""

    name: str
    version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AllowedTransition:
    """AllowedTransitionOut."""

    to: str
    name: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    """WaitOut."""

    signal: str
    deadline: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """StepOut."""

    key: str
    title: str
    status: str
    round: int
    attempts: int
    max_attempts: int
    last_error: JsonObject | None
    inputs: JsonObject
    outputs: JsonObject
    branch: str | None
    waiting_on: Wait | None
    signal_payload: JsonObject | None
    agent: str | None
    actor: str | None
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedStep:
    """FailedStepOut."""

    key: str
    attempts: int
    max_attempts: int
    error: JsonObject | None


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingStep:
    """WaitingStepOut."""

    step: str
    signal: str
    deadline: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """TaskOut."""

    id: str
    external_id: str | None
    workflow: WorkflowRef
    state: str
    finished: bool
    allowed_transitions: list[AllowedTransition]
    params: JsonObject
    metadata: JsonObject
    version: int
    initiated_by: str
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    steps: list[Step]
    failed_steps: list[FailedStep]
    waiting: list[WaitingStep]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskWithSessions(Task):
    """TaskWithSessionsOut: a task as created again by its external_id (200)."""

    session_ids: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatedTask(TaskWithSessions):
    """CreatedTaskOut: a new task, with the signal token shown once (201)."""

    signal_token: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEntry:
    """HistoryOut."""

    id: int
    kind: str
    actor: str
    from_: str | None = _json("from")
    to: str | None
    step: str | None
    round: int | None
    attempt: int | None
    reason: str
    error: JsonObject | None
    data: JsonObject
    task_version: int | None
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskDetail(TaskWithSessions):
    """TaskDetailOut: a task with its latest history."""

    history: list[HistoryEntry]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPage:
    """TaskPageOut."""

    tasks: list[Task]
    next_cursor: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryPage:
    """HistoryPageOut."""

    history: list[HistoryEntry]
    has_more: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class StepDetail(Step):
    """StepDetailOut."""

    history: list[HistoryEntry]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskBrief:
    """TaskBriefOut."""

    id: str
    state: str
    version: int
    finished: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class StepUpdate:
    """StepUpdateOut."""

    step: Step
    task: TaskBrief
    replayed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalRecord:
    """SignalRecordOut."""

    id: int
    name: str
    received_at: datetime
    consumed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalResult:
    """SignalOut."""

    signal: SignalRecord
    resolved_steps: list[str]
    task: TaskBrief
    replayed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSession:
    """TaskSessionOut."""

    id: str
    title: str
    agent: str
    status: str
    external_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSessions:
    """TaskSessionsOut."""

    sessions: list[TaskSession]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkResult:
    """LinkOut."""

    linked: list[str]
    session_ids: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class UnlinkResult:
    """UnlinkOut."""

    unlinked: bool
    session_ids: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTasks:
    """SessionTasksOut."""

    tasks: list[Task]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepDef:
    """StepDefOut."""

    key: str
    title: str
    max_attempts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TransitionDef:
    """TransitionDefOut."""

    from_: str = _json("from")
    to: str
    name: str
    reopen: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Workflow:
    """WorkflowOut."""

    name: str
    version: int
    title: str
    description: str
    states: list[str]
    initial: str
    terminal: list[str]
    transitions: list[TransitionDef]
    steps: list[StepDef]
    builtin: bool
    source: str
    content_hash: str
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowList:
    """WorkflowListOut."""

    workflows: list[Workflow]


# --- Handoffs --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Handoff:
    """HandoffOut. `answer`: {"type": "respond"|"accept"|"edit"|"reject"|"ignore"|..., "text"?,
    ...}; status "ignored" (answer type "ignore"): the person dismissed the request, and the
    agent goes on without the action."""

    id: str
    session_id: str
    kind: str
    status: str
    reason: str
    payload: JsonObject
    priority: str
    due_at: datetime
    overdue: bool
    expires_at: datetime
    idempotency_key: str | None
    requested_by: str
    allowed_answers: list[str]
    answer: JsonObject | None
    holder: str | None
    lease_expires_at: datetime | None
    created_at: datetime
    claimed_at: datetime | None
    answered_at: datetime | None
    resolved_at: datetime | None

    @property
    def resolved(self) -> bool:
        """It has its outcome: answered, taken over, handed back, closed, cancelled, expired,
        ignored."""
        return self.status not in PENDING_HANDOFF_STATUSES

    @property
    def has_answer(self) -> bool:
        """The person answered (or dismissed) the request, so the run can go on with it:
        answered, ignored, or handed back after an answer (a person who answers and hands back
        at once may do both before the agent's wait sees "answered")."""
        return self.answer is not None and self.status in ("answered", "ignored", "handed_back")

    @property
    def ignored(self) -> bool:
        """The person dismissed the request (Agent Inbox's "ignore", allowed by the approval's
        `config.allow_ignore`): no verdict; go on without the action."""
        return self.status == "ignored"


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffPage:
    """HandoffPageOut."""

    handoffs: list[Handoff]
    next_cursor: str | None


# --- Retention and holds ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    """PolicyOut: durations in seconds (None: never); `agents`: per-agent overrides."""

    close_idle_after: int | None
    close_paused_after: int | None
    archive_closed_after: int | None
    compact_after: int | None
    delete_after: int | None
    outcome_compact_after: int | None
    outcome_delete_after: int | None
    artifact_max_age: int | None
    keep_outcomes: list[str]
    keep_tags: list[str]
    defaults: bool
    agents: dict[str, JsonObject]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPreview:
    """PreviewOut."""

    would: dict[str, JsonObject]
    notes: str
    now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionRun:
    """RunOut."""

    id: int
    job: str
    status: str
    trigger: str
    started_at: datetime
    finished_at: datetime | None
    examined: int
    closed: int
    archived: int
    compacted: int
    deleted: int
    events_freed: int
    bytes_freed: int
    artifacts_deleted: int
    artifact_bytes_freed: int
    errors: list[JsonObject]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionRuns:
    """RunsOut: a page of runs, newest first."""

    runs: list[RetentionRun]
    next_cursor: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedRuns:
    """QueuedRunsOut: the runs POST /retention/runs queued, one per job."""

    runs: list[RetentionRun]


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldPage:
    """HoldPageOut."""

    holds: list[Hold]
    next_cursor: str | None


# --- API keys and webhook endpoints -----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """ApiKeyOut: a key as listed (never its secret)."""

    id: int
    name: str
    prefix: str
    scope: str
    created_at: datetime
    created_by: str | None
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    active: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKeys:
    """ApiKeysOut."""

    api_keys: list[ApiKey]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatedApiKey(ApiKey):
    """CreatedApiKeyOut: a new key with its secret, `key`, shown this once."""

    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Webhook:
    """WebhookOut."""

    id: int
    url: str
    events: list[str]
    active: bool
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Webhooks:
    """WebhooksOut."""

    webhooks: list[Webhook]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatedWebhook(Webhook):
    """CreatedWebhookOut: a new endpoint with its signing secret, shown this once."""

    secret: str


# --- Request bodies --------------------------------------------------------------------------
# Keys the client sends; each is held against the schema of the body it goes in (*In).

Money = Decimal | str | int | float


class EventIn(TypedDict, total=False):
    """One event of an append. Without an idempotency_key the client gives it one."""

    kind: Required[EventKind]
    tier: Tier | None
    role: str
    content: JsonObject
    tokens: int
    cost: Money
    idempotency_key: str | None


class BudgetIn(TypedDict, total=False):
    max_tokens: int | None
    max_cost: Money | None


class SessionIn(TypedDict, total=False):
    agent: Required[str]
    external_id: str | None
    title: str
    metadata: JsonObject
    budget: BudgetIn | None
    task_ids: list[str]


class BlobIn(TypedDict):
    data: str


class AppendIn(TypedDict, total=False):
    events: Required[list[EventIn]]
    expected_head_seq: int | None
    blobs: list[BlobIn]  # stored with the events (both or neither)


class ForkIn(TypedDict, total=False):
    at_seq: Required[int]
    external_id: str | None
    title: str
    metadata: JsonObject | None


class ReasonIn(TypedDict, total=False):
    reason: str


class TaskIn(TypedDict, total=False):
    workflow: Required[str]
    workflow_version: int | None
    params: JsonObject
    metadata: JsonObject
    session_ids: list[str]
    external_id: str | None


class TransitionIn(TypedDict, total=False):
    to: str | None
    transition: str | None
    expected_version: int | None
    reason: str


class StepErrorIn(TypedDict, total=False):
    type: Required[str]
    message: str
    detail: JsonObject


class WaitIn(TypedDict, total=False):
    signal: Required[str]
    deadline: datetime | None
    timeout_seconds: int | None


class StepIn(TypedDict, total=False):
    status: Required[Literal["running", "waiting", "succeeded", "failed", "skipped"]]
    attempt: int | None
    error: StepErrorIn | None
    inputs: JsonObject | None
    outputs: JsonObject | None
    branch: str | None
    waiting_on: WaitIn | None
    agent: str | None
    expected_version: int | None
    reason: str


class SignalIn(TypedDict, total=False):
    payload: JsonObject
    error: StepErrorIn | None
    idempotency_key: str | None


class LinkIn(TypedDict):
    session_ids: list[str]


# `from` is a keyword: the functional form.
TransitionDefIn = TypedDict(
    "TransitionDefIn",
    {
        "from": Required[str],
        "to": Required[str],
        "name": NotRequired[str],
        "reopen": NotRequired[list[str]],
    },
)


class StepDefIn(TypedDict, total=False):
    key: Required[str]
    title: str
    max_attempts: int


class WorkflowIn(TypedDict, total=False):
    name: Required[str]
    version: int | None
    title: str
    description: str
    states: Required[list[str]]
    initial: Required[str]
    terminal: Required[list[str]]
    transitions: Required[list[TransitionDefIn]]
    steps: list[StepDefIn]


class HandoffIn(TypedDict, total=False):
    kind: Required[HandoffKind]
    reason: str
    payload: JsonObject
    priority: Priority
    due_in: int | None
    idempotency_key: str | None


class CancelIn(TypedDict, total=False):
    reason: str


class PolicyFieldsIn(TypedDict, total=False):
    """A per-agent override: only the fields it overrides (seconds; None: never)."""

    close_idle_after: int | None
    close_paused_after: int | None
    archive_closed_after: int | None
    compact_after: int | None
    delete_after: int | None
    outcome_compact_after: int | None
    outcome_delete_after: int | None
    artifact_max_age: int | None
    keep_outcomes: list[str] | None
    keep_tags: list[str] | None


class PolicyIn(TypedDict, total=False):
    """The whole policy: every field of the project's (None: never); `agents` override some."""

    close_idle_after: Required[int | None]
    close_paused_after: Required[int | None]
    archive_closed_after: Required[int | None]
    compact_after: Required[int | None]
    delete_after: Required[int | None]
    outcome_compact_after: Required[int | None]
    outcome_delete_after: Required[int | None]
    artifact_max_age: int | None  # left out: None (artifacts kept as long as their session)
    keep_outcomes: Required[list[str]]
    keep_tags: Required[list[str]]
    agents: dict[str, PolicyFieldsIn]
    defaults: bool | None


class ApiKeyIn(TypedDict, total=False):
    name: Required[str]
    scope: Literal["agent", "admin"]
    expires_at: datetime | None


WebhookEvent = Literal[
    "handoff.created",
    "handoff.claimed",
    "handoff.answered",
    "handoff.expired",
    "handoff.overdue",
    "session.paused",
    "session.resumed",
    "session.closed",
    "session.deleted",
]


class WebhookIn(TypedDict):
    url: str
    events: list[WebhookEvent]


class HoldIn(TypedDict):
    reason: str


class ProjectSettingsIn(TypedDict):
    name: str


# --- Blobs ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredBlob:
    """StoredBlobOut: `created` false when the session (or an ancestor) held the bytes."""

    sha256: str
    size: int
    created: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredBlobs:
    """StoredBlobsOut."""

    blobs: list[StoredBlob]


@dataclass(frozen=True, slots=True, kw_only=True)
class FoundBlob:
    """FoundBlobOut: `data` base64, None when not asked for or past the answer's budget."""

    sha256: str
    size: int
    data: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class BlobLookup:
    """BlobLookupOut."""

    blobs: list[FoundBlob]
    missing: list[str]
    not_sent: list[str]


# --- Artifacts ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Artifact:
    """ArtifactOut: one stored version of a named file of a session."""

    name: str
    version: int
    seq: int  # the `artifact` event that recorded it
    size: int
    sha256: str
    content_type: str
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactVersions:
    """ArtifactVersionsOut: a name's stored versions, oldest first, and its latest."""

    name: str
    latest: Artifact
    versions: list[Artifact]


@dataclass(frozen=True, slots=True, kw_only=True)
class Artifacts:
    """ArtifactsOut."""

    artifacts: list[ArtifactVersions]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletedArtifacts:
    """DeletedOut: the versions a deletion removed."""

    name: str
    versions: list[int]


class BlobsIn(TypedDict):
    blobs: list[BlobIn]


class BlobLookupIn(TypedDict, total=False):
    sha256: Required[list[str]]
    data: bool
