"""Demo tasks for seed_demo: the two example workflows in instructive states, made through the
same services agents use, linked to the demo sessions when those exist.

Idempotent: each demo task has an external_id; a second run finds them and changes nothing.

A task linked to a demo session is a script (a generator) whose `yield`s say how far into the
session's conversation its next steps happen: seed_demo writes the conversation up to there,
then lets the script go on, so the task's history times fall between the session's event times
and the session page's time travel (tasks_app.queries.tasks_as_of) shows the task as it was.
"""

from collections.abc import Callable, Generator, Iterator
from datetime import timedelta
from typing import Any

from django.utils import timezone

from core.actors import Actor
from core.models import Project
from sessions_app.models import Session

from .models import Task
from .services.signals import deliver_signal
from .services.steps import update_step
from .services.tasks import create_task
from .services.transitions import transition_task

SEED = Actor.system("seed_demo")


def _session_ids(project: Project, *external_ids: str) -> list[Any]:
    return list(
        Session.objects.filter(project=project, external_id__in=external_ids).values_list(
            "pk", flat=True
        )
    )


def _new(project: Project, workflow: str, key: str, **kwargs: Any) -> Task | None:
    result = create_task(project, workflow=workflow, actor=SEED, external_id=key, **kwargs)
    return result.task if result.created else None


def _run(
    task: Task,
    key: str,
    outputs: dict[str, Any],
    *,
    agent: str,
    inputs: dict[str, Any] | None = None,
) -> None:
    update_step(task, key, status="running", actor=SEED, agent_name=agent, inputs=inputs)
    update_step(task, key, status="succeeded", actor=SEED, outputs=outputs)


def _fail(
    task: Task,
    key: str,
    error_type: str,
    message: str,
    *,
    agent: str,
    attempt_detail: dict[str, Any] | None = None,
) -> None:
    update_step(task, key, status="running", actor=SEED, agent_name=agent)
    update_step(
        task,
        key,
        status="failed",
        actor=SEED,
        error={"type": error_type, "message": message, "detail": attempt_detail or {}},
    )


# A linked task's script: yields the fraction (0..1) of its session's conversation to write
# before it goes on; returns the task it created (None: it was there already).
TaskScript = Generator[float, None, Task | None]


def _refund_policy(project: Project) -> TaskScript:
    """Published after one round of requested changes; the reviewer answered by webhook."""
    yield 0.1
    task = _new(
        project,
        "document_approval",
        "demo-task-refund-policy",
        metadata={"title": "Refund policy v3"},
        params={"document": "Refund policy v3", "reviewers": ["legal"]},
        session_ids=_session_ids(project, "demo-0"),
    )
    if task is None:
        return None
    yield 0.2
    _run(
        task,
        "draft",
        {"uri": "s3://docs/refund-policy-v3.md", "words": 1240},
        agent="support-triage",
    )
    transition_task(task, transition="submit", actor=SEED)
    update_step(task, "review", status="waiting", actor=SEED, waiting_on="review_decision")
    yield 0.35
    deliver_signal(
        task,
        "review_decision",
        actor=Actor.system("legal-review-webhook"),
        payload={"decision": "changes", "comments": ["Define 'damaged'."]},
    )
    transition_task(task, transition="request_changes", actor=SEED)
    yield 0.5
    _run(task, "revise", {"uri": "s3://docs/refund-policy-v3.1.md"}, agent="support-triage")
    transition_task(task, transition="resubmit", actor=SEED)
    update_step(task, "review", status="waiting", actor=SEED, waiting_on="review_decision")
    yield 0.65
    deliver_signal(
        task,
        "review_decision",
        actor=Actor.system("legal-review-webhook"),
        payload={"decision": "approve", "reviewer": "legal"},
    )
    transition_task(task, transition="approve", actor=SEED)
    yield 0.8
    _run(task, "publish", {"url": "https://help.example.com/refunds"}, agent="support-triage")
    transition_task(task, transition="publish", actor=SEED, reason="Live on the help centre")
    return task


def _gdpr_notice(project: Project) -> TaskScript:
    """Waiting on a reviewer, with a deadline the beat job will enforce."""
    yield 0.15
    task = _new(
        project,
        "document_approval",
        "demo-task-gdpr-notice",
        metadata={"title": "GDPR data export notice"},
        params={"document": "GDPR data export notice"},
        session_ids=_session_ids(project, "demo-5"),
    )
    if task is None:
        return None
    yield 0.4
    _run(
        task,
        "draft",
        {"uri": "s3://docs/gdpr-export.md", "words": 640},
        agent="billing-assistant",
    )
    yield 0.6
    transition_task(task, transition="submit", actor=SEED)
    update_step(
        task,
        "review",
        status="waiting",
        actor=SEED,
        waiting_on="review_decision",
        wait_deadline=timezone.now() + timedelta(days=2),
    )
    return task


def _market_report(project: Project) -> TaskScript:
    """In review after a flaky research step (two failed attempts, then a success)."""
    yield 0.1
    task = _new(
        project,
        "research_report",
        "demo-task-market-report",
        metadata={"title": "EU heat-pump market, Q3"},
        params={"question": "EU heat-pump market, Q3"},
        session_ids=_session_ids(project, "demo-1"),
    )
    if task is None:
        return None
    yield 0.2
    _fail(
        task,
        "research",
        "http_error",
        "stats portal answered 503",
        agent="research-writer",
        attempt_detail={"status": 503, "url": "https://stats.example.eu/api"},
    )
    yield 0.35
    _fail(
        task,
        "research",
        "rate_limited",
        "429 from stats portal",
        agent="research-writer",
        attempt_detail={"retry_after": 60},
    )
    yield 0.5
    _run(
        task,
        "research",
        {
            "sources": [
                {"url": "https://stats.example.eu/hp-q3", "claim": "sales +12% QoQ"},
                {"url": "https://news.example.com/hp", "claim": "subsidies cut in two markets"},
            ]
        },
        agent="research-writer",
        inputs={"question": "EU heat-pump market, Q3"},
    )
    transition_task(task, transition="draft", actor=SEED)
    yield 0.7
    _run(task, "draft", {"uri": "s3://reports/hp-q3.md", "words": 2100}, agent="research-writer")
    transition_task(task, transition="submit", actor=SEED)
    yield 0.85
    update_step(task, "review", status="running", actor=SEED, agent_name="code-reviewer")
    return task


# The demo tasks linked to a demo session, by the session's external_id.
LINKED_TASK_SCRIPTS: dict[str, Callable[[Project], TaskScript]] = {
    "demo-0": _refund_policy,
    "demo-5": _gdpr_notice,
    "demo-1": _market_report,
}


def linked_task_script(project: Project, session_external_id: str) -> Iterator[float]:
    """The script of the demo task linked to this demo session (empty when it has none)."""
    script = LINKED_TASK_SCRIPTS.get(session_external_id)
    return script(project) if script else iter(())


def _finish(script: TaskScript) -> Task | None:
    """Run a script to its end at once (no conversation in between)."""
    while True:
        try:
            next(script)
        except StopIteration as stop:
            return stop.value


def build_demo_tasks(project: Project) -> list[Task]:
    """Create the demo tasks that are missing; returns the ones created by this call. The
    linked ones seed_demo already made beside their session's conversation are left as they
    are; run alone, this makes them at once."""
    created: list[Task] = []
    for make in LINKED_TASK_SCRIPTS.values():
        if task := _finish(make(project)):
            created.append(task)

    # Rejected by the reviewer: the alternative end.
    if task := _new(
        project,
        "document_approval",
        "demo-task-promo-terms",
        metadata={"title": "Spring promo terms"},
        params={"document": "Spring promo terms"},
    ):
        _run(task, "draft", {"uri": "s3://docs/promo.md", "words": 310}, agent="support-triage")
        transition_task(task, transition="submit", actor=SEED)
        transition_task(task, transition="reject", actor=SEED, reason="Promo cancelled")
        created.append(task)

    # Stuck: research failed for good, and the task shows why.
    if task := _new(
        project,
        "research_report",
        "demo-task-competitor-scan",
        metadata={"title": "Competitor pricing, APAC"},
        params={"question": "Competitor pricing, APAC"},
    ):
        for message in ("paywall", "paywall", "paywall (last attempt)"):
            _fail(
                task,
                "research",
                "source_unavailable",
                message,
                agent="research-writer",
                attempt_detail={"url": "https://analyst.example.com/apac"},
            )
        created.append(task)

    # Revised once after review, then published.
    if task := _new(
        project,
        "research_report",
        "demo-task-churn-study",
        metadata={"title": "Why trial users churn"},
        params={"question": "Why do trial users churn?"},
    ):
        _run(task, "research", {"interviews": 14}, agent="research-writer")
        transition_task(task, transition="draft", actor=SEED)
        _run(task, "draft", {"uri": "s3://reports/churn-v1.md"}, agent="research-writer")
        transition_task(task, transition="submit", actor=SEED)
        update_step(
            task,
            "review",
            status="succeeded",
            actor=SEED,
            branch="revise",
            outputs={"verdict": "revise", "notes": ["Split by plan tier"]},
        )
        transition_task(task, transition="revise", actor=SEED)
        _run(task, "draft", {"uri": "s3://reports/churn-v2.md"}, agent="research-writer")
        transition_task(task, transition="submit", actor=SEED)
        update_step(
            task,
            "review",
            status="succeeded",
            actor=SEED,
            branch="approve",
            outputs={"verdict": "approve"},
        )
        transition_task(task, transition="approve", actor=SEED)
        _run(task, "publish", {"url": "https://wiki.example.com/churn"}, agent="research-writer")
        transition_task(task, transition="publish", actor=SEED)
        created.append(task)

    return created
