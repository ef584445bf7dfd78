"""Task domain errors: core's DomainError family, plus the task-specific conflicts.

The API's single DomainError handler renders all of them as {"error": {code, message, detail}}.
"""

from core.errors import (
    Conflict,
    DomainError,
    InvalidInput,
    InvalidTransition,
    NotFound,
    PermissionDeniedError,
)

__all__ = [
    "AttemptConflict",
    "Conflict",
    "DomainError",
    "InvalidInput",
    "InvalidTransition",
    "NotFound",
    "PermissionDeniedError",
    "StepNotActive",
    "TaskFinished",
    "UnknownWorkflow",
    "VersionMismatch",
    "WorkflowVersionExists",
]


class VersionMismatch(Conflict):
    """`expected_version` was given and the task has moved on since; nothing was written."""

    code = "version_mismatch"


class TaskFinished(Conflict):
    """The task is in a terminal state: no new step attempts start."""

    code = "task_finished"


class StepNotActive(Conflict):
    """The update does not fit the step's status (e.g. succeeding a step that never started)."""

    code = "step_not_active"


class AttemptConflict(Conflict):
    """The attempt number is stale, skips ahead, or goes past max_attempts."""

    code = "attempt_conflict"


class WorkflowVersionExists(Conflict):
    """That (name, version) is registered with a different content; versions are immutable."""

    code = "workflow_version_exists"


class UnknownWorkflow(InvalidInput):
    code = "unknown_workflow"
