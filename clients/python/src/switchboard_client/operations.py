"""Every API operation the client calls: method, path, the query parameters and body it may
send, and the model it reads per status.

The clients build every request from one of these and refuse, before sending, a query
parameter or body key the operation does not declare; the schema test
(clients/python/tests/test_client_schema.py) holds each declaration against the OpenAPI
document a live server serves. So what the client sends and reads is what the table says, and
the table is what the server serves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from . import models as m


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    # Under /api/v1, with {placeholders} named as the schema names them.
    path: str
    # Query parameter -> its type as the client sends it.
    query: dict[str, Any] = field(default_factory=dict)
    # Parameters named `<prefix><name>` (GET /sessions' `metadata.<name>=<value>`).
    query_prefixes: tuple[str, ...] = ()
    # The request body's TypedDict, or None for no body.
    body: Any = None
    # Status -> the model the answer decodes to; None: not decoded (a stream).
    responses: dict[int, Any] = field(default_factory=dict)
    # Safe to send again when it may have been processed already (a broken connection after
    # the request went out): HTTP's idempotent methods, and POSTs the API makes idempotent.
    # A call can say so itself (an append, every event with a key; an open with external_id).
    idempotent: bool = False
    # The body is bytes of any media type (an artifact's file), not a JSON object.
    raw_body: bool = False

    def __post_init__(self) -> None:
        # Not an upload's PUT: each saves a new version, so sending it twice saves two.
        if self.method in {"GET", "DELETE"} or (self.method == "PUT" and not self.raw_body):
            object.__setattr__(self, "idempotent", True)


Page = {"cursor": str, "limit": int}

PROJECT_READ = Operation("GET", "/project", responses={200: m.Project})
PROJECT_UPDATE = Operation(
    "PATCH", "/project", body=m.ProjectSettingsIn, responses={200: m.Project}, idempotent=True
)

SESSION_OPEN = Operation(
    "POST",
    "/sessions",
    body=m.SessionIn,
    responses={201: m.SessionWithTasks, 200: m.SessionWithTasks},
)
SESSION_LIST = Operation(
    "GET",
    "/sessions",
    query={
        "status": list[m.SessionStatus],
        "agent": str,
        "q": str,
        "external_id": list[str],
        "has_pending_handoff": bool,
        "metadata_key": str,
        "created_after": datetime,
        "created_before": datetime,
        "updated_after": datetime,
        "updated_before": datetime,
        "include": list[Literal["state", "events"]],
        "events_limit": int,
        **Page,
    },
    query_prefixes=("metadata.",),
    responses={200: m.SessionPage},
)
SESSION_READ = Operation("GET", "/sessions/{session_id}", responses={200: m.SessionWithTasks})
SESSION_DELETE = Operation(
    "DELETE",
    "/sessions/{session_id}",
    query={"with_forks": bool},
    responses={200: m.SessionDeleted},
)
EVENTS_APPEND = Operation(
    "POST",
    "/sessions/{session_id}/events",
    body=m.AppendIn,
    responses={201: m.AppendResult, 200: m.AppendResult},
)
EVENTS_SLICE = Operation(
    "GET",
    "/sessions/{session_id}/events",
    query={
        "after_seq": int,
        "before_seq": int,
        "limit": int,
        "kind": list[m.EventKind | Literal["lifecycle", "handoff", "artifact"]],
        "tier": m.Tier,
        "order": Literal["asc", "desc"],
        "key": list[str],
        "key_prefix": str,
    },
    responses={200: m.EventSlice},
)
STATE_READ = Operation(
    "GET", "/sessions/{session_id}/state", query={"at_seq": int}, responses={200: m.State}
)
SNAPSHOT_CREATE = Operation("POST", "/sessions/{session_id}/snapshots", responses={201: m.Snapshot})
SESSION_FORK = Operation(
    "POST",
    "/sessions/{session_id}/fork",
    body=m.ForkIn,
    responses={201: m.Session, 200: m.Session},
)
SESSION_PAUSE = Operation(
    "POST", "/sessions/{session_id}/pause", body=m.ReasonIn, responses={200: m.Session}
)
SESSION_RESUME = Operation(
    "POST", "/sessions/{session_id}/resume", body=m.ReasonIn, responses={200: m.Session}
)
SESSION_CLOSE = Operation(
    "POST", "/sessions/{session_id}/close", body=m.ReasonIn, responses={200: m.Session}
)
SESSION_EXPORT = Operation("GET", "/sessions/{session_id}/export", responses={200: None})

TASK_CREATE = Operation(
    "POST", "/tasks", body=m.TaskIn, responses={201: m.CreatedTask, 200: m.TaskWithSessions}
)
TASK_LIST = Operation(
    "GET",
    "/tasks",
    query={
        "workflow": str,
        "state": list[str],
        "step_status": list[m.StepStatus],
        "session": str,
        "external_id": str,
        **Page,
    },
    responses={200: m.TaskPage},
)
TASK_READ = Operation(
    "GET", "/tasks/{task_id}", query={"history_limit": int}, responses={200: m.TaskDetail}
)
TASK_HISTORY = Operation(
    "GET",
    "/tasks/{task_id}/history",
    query={"after_id": int, "step": str, "limit": int},
    responses={200: m.HistoryPage},
)
TASK_TRANSITION = Operation(
    "POST", "/tasks/{task_id}/transitions", body=m.TransitionIn, responses={200: m.Task}
)
STEP_READ = Operation("GET", "/tasks/{task_id}/steps/{key}", responses={200: m.StepDetail})
STEP_UPDATE = Operation(
    "PUT", "/tasks/{task_id}/steps/{key}", body=m.StepIn, responses={200: m.StepUpdate}
)
TASK_SIGNAL = Operation(
    "POST",
    "/tasks/{task_id}/signals/{name}",
    body=m.SignalIn,
    responses={200: m.SignalResult, 202: m.SignalResult},
)
TASK_SESSIONS = Operation("GET", "/tasks/{task_id}/sessions", responses={200: m.TaskSessions})
TASK_LINK = Operation(
    "POST",
    "/tasks/{task_id}/sessions",
    body=m.LinkIn,
    responses={200: m.LinkResult},
    idempotent=True,  # linking a linked session changes nothing
)
TASK_UNLINK = Operation(
    "DELETE", "/tasks/{task_id}/sessions/{session_id}", responses={200: m.UnlinkResult}
)
SESSION_TASKS = Operation("GET", "/sessions/{session_id}/tasks", responses={200: m.SessionTasks})
WORKFLOW_REGISTER = Operation(
    "POST",
    "/workflows",
    body=m.WorkflowIn,
    responses={201: m.Workflow, 200: m.Workflow},
)
WORKFLOW_LIST = Operation("GET", "/workflows", query={"name": str}, responses={200: m.WorkflowList})
WORKFLOW_READ = Operation(
    "GET", "/workflows/{name}", query={"version": int}, responses={200: m.Workflow}
)

HANDOFF_ASK = Operation(
    "POST",
    "/sessions/{session_id}/handoffs",
    body=m.HandoffIn,
    responses={201: m.Handoff, 200: m.Handoff},
)
HANDOFF_LIST = Operation(
    "GET",
    "/handoffs",
    query={"status": list[m.HandoffStatus], "session_id": str, **Page},
    responses={200: m.HandoffPage},
)
HANDOFF_READ = Operation(
    "GET", "/handoffs/{handoff_id}", query={"wait": int}, responses={200: m.Handoff}
)
HANDOFF_CANCEL = Operation(
    "POST", "/handoffs/{handoff_id}/cancel", body=m.CancelIn, responses={200: m.Handoff}
)

RETENTION_POLICY_READ = Operation("GET", "/retention/policy", responses={200: m.RetentionPolicy})
RETENTION_POLICY_UPDATE = Operation(
    "PUT", "/retention/policy", body=m.PolicyIn, responses={200: m.RetentionPolicy}
)
RETENTION_PREVIEW = Operation("GET", "/retention/preview", responses={200: m.RetentionPreview})
RETENTION_POLICY_RESET = Operation(
    "DELETE", "/retention/policy", responses={200: m.RetentionPolicy}
)
RETENTION_RUNS = Operation("GET", "/retention/runs", query=Page, responses={200: m.RetentionRuns})
RETENTION_RUN_START = Operation("POST", "/retention/runs", responses={202: m.QueuedRuns})
HOLD_LIST = Operation(
    "GET", "/holds", query={"include_released": bool, **Page}, responses={200: m.HoldPage}
)
HOLD_PLACE = Operation(
    "POST",
    "/sessions/{session_id}/hold",
    body=m.HoldIn,
    responses={201: m.Hold, 200: m.Hold},
    idempotent=True,  # a held session's hold is answered (200)
)
HOLD_RELEASE = Operation("DELETE", "/sessions/{session_id}/hold", responses={200: m.Hold})

API_KEY_LIST = Operation("GET", "/api-keys", responses={200: m.ApiKeys})
API_KEY_CREATE = Operation("POST", "/api-keys", body=m.ApiKeyIn, responses={201: m.CreatedApiKey})
API_KEY_REVOKE = Operation("DELETE", "/api-keys/{key_id}", responses={200: m.ApiKey})

WEBHOOK_LIST = Operation("GET", "/webhooks", responses={200: m.Webhooks})
WEBHOOK_CREATE = Operation("POST", "/webhooks", body=m.WebhookIn, responses={201: m.CreatedWebhook})
WEBHOOK_DELETE = Operation("DELETE", "/webhooks/{endpoint_id}", responses={200: m.Webhook})

BLOBS_STORE = Operation(
    "POST",
    "/sessions/{session_id}/blobs",
    body=m.BlobsIn,
    responses={201: m.StoredBlobs, 200: m.StoredBlobs},
    idempotent=True,  # content-addressed: the same bytes sent again are the same blob
)
BLOBS_LOOKUP = Operation(
    "POST",
    "/sessions/{session_id}/blobs/lookup",
    body=m.BlobLookupIn,
    responses={200: m.BlobLookup},
    idempotent=True,  # a read
)
BLOB_READ = Operation("GET", "/sessions/{session_id}/blobs/{sha256}", responses={200: None})

ARTIFACT_PUT = Operation(
    "PUT",
    "/sessions/{session_id}/artifacts/{name}",
    raw_body=True,
    responses={201: m.Artifact},
)
ARTIFACT_LIST = Operation(
    "GET", "/sessions/{session_id}/artifacts", query={"at_seq": int}, responses={200: m.Artifacts}
)
ARTIFACT_READ = Operation(
    "GET",
    "/sessions/{session_id}/artifacts/{name}",
    query={"version": int, "at_seq": int},
    responses={200: None, 206: None},
)
ARTIFACTS_EXPORT = Operation(
    "GET", "/sessions/{session_id}/export/artifacts", responses={200: None}
)
ARTIFACT_DELETE = Operation(
    "DELETE",
    "/sessions/{session_id}/artifacts/{name}",
    query={"version": int},
    responses={200: m.DeletedArtifacts},
)

OPERATIONS: dict[str, Operation] = {
    name: value for name, value in globals().items() if isinstance(value, Operation)
}
