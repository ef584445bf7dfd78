"""Template helpers of the task pages. They return plain values (coordinates, strings, booleans);
the templates turn them into markup, autoescaped. Nothing here is marked safe."""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone

from ..diagram import Diagram, layout
from ..models import Task
from ..workflows import TransitionSpec

register = template.Library()


@dataclass(frozen=True)
class TaskDiagram:
    """A task's workflow diagram: the layout of its version, and where the task stands."""

    layout: Diagram
    current: str
    finished: bool
    next_transitions: tuple[TransitionSpec, ...]

    @property
    def next_targets(self) -> frozenset[str]:
        return frozenset(t.target for t in self.next_transitions)


@register.simple_tag
def task_diagram(task: Task) -> TaskDiagram:
    """{% task_diagram task as diagram %}: no query (the workflow rides along with the task)."""
    spec = task.spec
    return TaskDiagram(
        layout=layout(spec),
        current=task.state,
        finished=spec.is_terminal(task.state),
        next_transitions=spec.allowed_from(task.state),
    )


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON text; the template escapes it like any other string."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def is_past(value: datetime | None) -> bool:
    return value is not None and value < timezone.now()


@register.filter
def short_id(value: Any) -> str:
    return str(value)[:8]


@register.filter
def readable(value: Any) -> str:
    """A state or status name as words: `sent_for_review` -> `sent for review`."""
    return str(value or "").replace("_", " ")
