"""Template context for every dashboard page: the navigation's count of waiting handoffs.

Lazy: counted (one aggregate over the queue's partial index) only when a page renders the
navigation, for the project the view resolved and checked (core.pages.base_context records
it on the request), never for a project the user is not a member of.
"""

from functools import cached_property
from typing import Any

from django.http import HttpRequest

from handoffs_app.queries import QueueCounts, queue_counts


class HandoffNav:
    def __init__(self, request: HttpRequest) -> None:
        self.request = request

    @cached_property
    def counts(self) -> QueueCounts | None:
        counted = getattr(self.request, "handoff_counts", None)
        if counted is not None:
            return counted  # the page counted them already (the queue, the overview)
        project_id = getattr(self.request, "dashboard_project_id", None)
        user = getattr(self.request, "user", None)
        if project_id is None or user is None or not user.is_authenticated:
            return None
        return queue_counts(project_id, user=user)

    @property
    def open(self) -> int:
        return self.counts.open if self.counts else 0

    @property
    def overdue(self) -> int:
        return self.counts.overdue if self.counts else 0


def handoff_nav(request: HttpRequest) -> dict[str, Any]:
    return {"handoff_nav": HandoffNav(request)}
