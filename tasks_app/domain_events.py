"""What the workflow-state store announces (see core.domain_events for how it travels).

Every task change is outboxed: transitions, steps, signals and links are what agents and
people outside wait on, and they are few next to appended events.
"""

from dataclasses import dataclass, field

from core.domain_events import DomainEvent
from core.realtime import project_list_group, task_group


@dataclass(frozen=True)
class TaskEvent(DomainEvent):
    outboxed = True
    task_id: str

    def groups(self) -> list[str]:
        return [task_group(self.task_id), project_list_group(self.project_id, "tasks")]


@dataclass(frozen=True)
class TaskCreated(TaskEvent):
    type = "task.created"
    state: str = ""
    version: int = 0


@dataclass(frozen=True)
class TaskTransitioned(TaskEvent):
    type = "task.transition"
    from_state: str = ""
    to_state: str = ""
    version: int = 0

    def groups(self) -> list[str]:
        # The sessions list shows each session's linked task's state: it hears transitions
        # and links (few), never steps or signals.
        return [*super().groups(), project_list_group(self.project_id, "sessions")]

    def payload(self) -> dict[str, object]:
        body = super().payload()
        body["from"] = body.pop("from_state")
        body["to"] = body.pop("to_state")
        return body


@dataclass(frozen=True)
class StepChanged(TaskEvent):
    type = "task.step"
    step: str = ""
    status: str = ""
    attempt: int = 0
    version: int = 0


@dataclass(frozen=True)
class SignalReceived(TaskEvent):
    type = "task.signal"
    signal: str = ""
    resolved: list[str] = field(default_factory=list)
    version: int = 0


@dataclass(frozen=True)
class TaskLinksChanged(TaskEvent):
    type = "task.links"
    linked: list[str] = field(default_factory=list)
    unlinked: list[str] = field(default_factory=list)

    def groups(self) -> list[str]:
        # The sessions list's task column and its "with a task" filter (see TaskTransitioned).
        return [*super().groups(), project_list_group(self.project_id, "sessions")]
