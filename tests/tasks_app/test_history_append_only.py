"""Task history is append-only in the database itself, and broadcasts wait for commit."""

import json

import pytest
from django.db import DatabaseError, transaction

from core import domain_events
from tasks_app.errors import InvalidTransition
from tasks_app.models import TaskHistory
from tasks_app.services.transitions import transition_task
from tests.factories import make_task

from .helpers import TESTER


def test_it_refuses_to_update_a_history_row(project):
    task = make_task(project)
    entry = TaskHistory.objects.get(task=task)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        TaskHistory.objects.filter(pk=entry.pk).update(reason="rewritten")
    with pytest.raises(DatabaseError), transaction.atomic():
        entry.reason = "rewritten"
        entry.save()
    entry.refresh_from_db()
    assert entry.reason == ""


def test_it_announces_a_transition_to_the_task_and_task_list_groups_after_commit(
    project, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(
        domain_events,
        "send_to_groups",
        lambda groups, msg, **kwargs: sent.append((groups, json.loads(json.dumps(msg)))),
    )
    task = make_task(project)
    with django_capture_on_commit_callbacks(execute=True):
        transition_task(task, "sent_for_review", actor=TESTER)
    # The transition's audit row is announced to the audit log page too (its own group).
    audit = [(groups, msg) for groups, msg in sent if msg["type"] == "audit.recorded"]
    assert audit == [
        (
            [f"project-{project.pk}-audit"],
            {
                "type": "audit.recorded",
                "project_id": project.pk,
                "entry_id": audit[0][1]["entry_id"],
            },
        )
    ]
    sent = [item for item in sent if item not in audit]
    assert sent == [
        (
            # The sessions list too: it shows a linked task's state.
            [f"task-{task.pk}", f"project-{project.pk}-tasks", f"project-{project.pk}-sessions"],
            {
                "type": "task.transition",
                "from": "draft_created",
                "to": "sent_for_review",
                "version": 2,
                "task_id": str(task.pk),
                "project_id": project.pk,
            },
        )
    ]


def test_it_broadcasts_nothing_for_a_refused_transition(
    project, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(domain_events, "send_to_groups", lambda *a, **kw: sent.append(a))
    task = make_task(project)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(InvalidTransition):
        transition_task(task, "published", actor=TESTER)
    assert sent == []
