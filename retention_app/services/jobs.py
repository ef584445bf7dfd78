"""The retention jobs' work: close idle, close paused, archive, delete (enforce_retention) and
compact (compact_sessions), project by project, in bounded batches.

Each batch is one short transaction: the project row taken FOR SHARE (a legal hold being placed
waits for the batch, and the batch sees every hold committed before it), then up to `batch`
candidate sessions (retention_app.selection, the preview's code) locked FOR UPDATE SKIP LOCKED,
so several workers share the work and none does a session twice. Each session's change runs in
its own savepoint: one that fails is rolled back alone, recorded in the run's errors, and not
tried again in this run. The run's counts are updated in the batch's transaction, so they
commit exactly with the changes they count. Running again changes nothing more (every rule
selects only what is still due), but for what the run's own deletions made due: a parent whose
last fork it deleted is compacted by the compact job that follows (services.preview counts
that), and deleted, if due, by the next run.
"""

import logging
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from celery import current_app  # type: ignore[import-untyped]
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.actors import Actor
from core.domain_events import publish
from core.errors import DomainError
from core.models import Project
from sessions_app.models import Session, SessionStatus
from sessions_app.retention import allow_event_deletion
from sessions_app.services.artifacts import expire_versions_locked
from sessions_app.services.lifecycle import transition_locked

from .. import storage
from ..domain_events import RetentionChanged
from ..models import RetentionRun, RunJob, RunStatus
from ..selection import ORDER_FIELDS, Holds, after_key, candidates, standing_holds
from . import deletion
from .compaction import compact_locked
from .policies import ProjectPolicies, project_policies

logger = logging.getLogger(__name__)

JOB_ACTIONS = {
    # expire_artifacts last: a session the run deletes takes its artifacts with it.
    RunJob.ENFORCE: ("close_idle", "close_paused", "archive", "delete", "expire_artifacts"),
    RunJob.COMPACT: ("compact",),
}
RUN_ERRORS_KEPT = 50
ACTOR = Actor.system("retention")


@dataclass
class Tally:
    examined: int = 0
    closed: int = 0
    archived: int = 0
    compacted: int = 0
    deleted: int = 0
    events_freed: int = 0
    bytes_freed: int = 0
    artifacts_deleted: int = 0
    artifact_bytes_freed: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def add_to(self, run: RetentionRun) -> None:
        RetentionRun.objects.filter(pk=run.pk).update(
            examined=F("examined") + self.examined,
            closed=F("closed") + self.closed,
            archived=F("archived") + self.archived,
            compacted=F("compacted") + self.compacted,
            deleted=F("deleted") + self.deleted,
            events_freed=F("events_freed") + self.events_freed,
            bytes_freed=F("bytes_freed") + self.bytes_freed,
            artifacts_deleted=F("artifacts_deleted") + self.artifacts_deleted,
            artifact_bytes_freed=F("artifact_bytes_freed") + self.artifact_bytes_freed,
        )
        if self.errors:
            run.refresh_from_db(fields=["errors"])
            run.errors = (run.errors + self.errors)[:RUN_ERRORS_KEPT]
            run.save(update_fields=["errors"])


class Skip(Exception):
    """The session no longer qualifies (changed since it was selected): nothing to do."""


def apply_action(
    action: str,
    session: Session,
    *,
    tally: Tally,
    run: RetentionRun | None,
    policies: ProjectPolicies | None = None,
    now: datetime | None = None,
    limit: int | None = None,
) -> None:
    """Do `action` to a session whose row the caller holds locked, selected by run_batch
    (`policies`, `now`, `limit`: expire_artifacts's, the run's).

    Legal holds are not looked up again per session: the batch selected its sessions after
    taking the project row FOR SHARE, so every hold committed before is excluded by the
    selection, and a hold being placed waits for the batch's commit (services.holds)."""
    if action in ("close_idle", "close_paused"):
        expected = (
            (SessionStatus.OPEN, SessionStatus.RESUMED)
            if action == "close_idle"
            else (SessionStatus.PAUSED,)
        )
        if session.status not in expected:
            raise Skip
        reason = "idle" if action == "close_idle" else "paused too long"
        transition_locked(session, SessionStatus.CLOSED, actor=ACTOR, reason=reason)
        tally.closed += 1
    elif action == "archive":
        if session.status != SessionStatus.CLOSED:
            raise Skip
        transition_locked(session, SessionStatus.ARCHIVED, actor=ACTOR, reason="retention")
        tally.archived += 1
    elif action == "compact":
        done = compact_locked(session, actor=ACTOR, run=run)
        if done.compaction is None:
            raise Skip
        tally.compacted += 1
        tally.events_freed += done.events_removed
        tally.bytes_freed += done.bytes_removed
    elif action == "delete":
        if session.status != SessionStatus.ARCHIVED:
            raise Skip
        count, size = delete_session_locked(session, run=run)
        tally.deleted += 1
        tally.events_freed += count
        tally.bytes_freed += size
    elif action == "expire_artifacts":
        assert policies is not None and now is not None
        policy = policies.effective.get(session.agent_id, policies.project)
        if policy.artifact_max_age is None:
            raise Skip
        expired = expire_versions_locked(
            session,
            saved_before=now - policy.artifact_max_age,
            actor=ACTOR,
            limit=limit or settings.SWITCHBOARD_RETENTION_BATCH,
        )
        if not expired:
            raise Skip
        # The deletion's event is the system's record, not activity: the session's idle clock
        # (close_idle ages on updated_at) is left where it was.
        Session.objects.filter(pk=session.pk).update(updated_at=session.updated_at)
        tally.artifacts_deleted += len(expired)
        tally.artifact_bytes_freed += sum(a.size for a in expired)
    else:
        raise ValueError(action)


def delete_session_locked(session: Session, *, run: RetentionRun | None) -> tuple[int, int]:
    """Delete the whole session (services.deletion); a tombstone with the counts and an audit
    entry remain. The caller holds the row lock."""
    count, size = delete_sessions_locked([session], run=run)[session.pk]
    return count, size


def delete_sessions_locked(
    sessions: list[Session], *, run: RetentionRun | None
) -> dict[UUID, tuple[int, int]]:
    """Retention's deletion of several sessions at once, as the system's "retention" actor
    (services.deletion.delete_sessions_locked, set-based). All or nothing: the caller runs it
    in a savepoint and falls back to one session at a time if it fails.
    Returns (events, bytes) per session."""
    return deletion.delete_sessions_locked(sessions, actor=ACTOR, run=run)


def _delete_together(sessions: list[Session], *, tally: Tally, run: RetentionRun | None) -> bool:
    """Delete a batch's archived sessions set-based, in one savepoint; False (nothing done) if
    that failed, and the batch goes on one session at a time (which records the culprit)."""
    due = [s for s in sessions if s.status == SessionStatus.ARCHIVED]
    if len(due) < 2 or len(due) != len(sessions):
        return False
    try:
        with transaction.atomic():
            freed = delete_sessions_locked(due, run=run)
    except Exception:  # noqa: BLE001  (retried one by one, where it is recorded)
        logger.info("retention: set-based delete of %s sessions failed; one at a time", len(due))
        return False
    tally.deleted += len(due)
    tally.events_freed += sum(n for n, _ in freed.values())
    tally.bytes_freed += sum(size for _, size in freed.values())
    return True


def run_batch(
    project_id: int,
    action: str,
    *,
    now: datetime,
    limit: int,
    policies: ProjectPolicies,
    holds: Holds | None,
    skip: set[UUID],
    run: RetentionRun | None,
    resume: list[tuple[Any, UUID]] | None = None,
) -> tuple[int, Tally]:
    """One batch in one transaction; returns (sessions locked, what was done).

    `resume` carries the run's place between batches: ((order value, id) of the last session
    this run's previous batch took); the batch starts after it and records its own last one.
    Without it every batch would walk (and sort) the whole remaining selection again."""
    tally = Tally()
    # Compaction and deletion open the append-only guard once for the batch (four round trips
    # per session otherwise); the per-session savepoints below roll back a failed one's
    # deletions, and the guard closes with the batch.
    deleting = allow_event_deletion() if action in ("compact", "delete") else nullcontext()
    with transaction.atomic(), deleting:
        storage.commit_without_waiting_for_flush()
        storage.share_project(project_id)
        current_holds = standing_holds(project_id) if holds is None else holds
        selected = candidates(project_id, action, now=now, policies=policies, holds=current_holds)
        if resume:
            selected = selected.filter(after_key(action, resume[-1]))
        rows = list(
            selected.exclude(pk__in=list(skip))
            .select_related("agent")
            .select_for_update(skip_locked=True, of=("self",))[:limit]
        )
        if resume is not None and rows:
            resume.append((getattr(rows[-1], ORDER_FIELDS[action]), rows[-1].pk))
        tally.examined = len(rows)
        if action == "delete" and _delete_together(rows, tally=tally, run=run):
            rows_left: list[Session] = []
        else:
            rows_left = rows
        for session in rows_left:
            try:
                with transaction.atomic():
                    apply_action(
                        action,
                        session,
                        tally=tally,
                        run=run,
                        policies=policies,
                        now=now,
                        limit=limit,
                    )
            except Skip:
                skip.add(session.pk)
            except Exception as exc:  # one bad session must not stop the run
                logger.exception("retention %s failed for session %s", action, session.pk)
                skip.add(session.pk)
                tally.errors.append(
                    {"session_id": str(session.pk), "action": action, "error": repr(exc)[:500]}
                )
        if action == "delete":
            # A parent whose fork this batch deleted may have no fork left: it waits for the
            # next run rather than a later batch of this one (which takes it only if it sorts
            # after the fork), so what a run deletes does not depend on the batch size and is
            # what the preview counts from the rows as they were (services.preview).
            skip.update(s.parent_id for s in rows if s.parent_id is not None)
        if run is not None and (tally.examined or tally.errors):
            tally.add_to(run)
    return len(rows), tally


def _start_run(project_id: int, job: str, trigger: str, now: datetime) -> RetentionRun:
    with transaction.atomic():
        # A run a crash left "running" past the task time limit is marked as interrupted.
        stale = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
        RetentionRun.objects.filter(
            project_id=project_id, job=job, status=RunStatus.RUNNING, started_at__lt=stale
        ).update(status=RunStatus.FAILED, finished_at=now)
        run = RetentionRun.objects.create(project_id=project_id, job=job, trigger=trigger)
        publish(RetentionChanged(project_id=project_id, what="run", id=str(run.pk)))
    return run


def _take_queued_run(run_id: int, project_id: int, job: str) -> RetentionRun | None:
    """The run the page queued (request_runs), now running; None if it already finished (the
    task was delivered again after it was done) or is not this job's."""
    with transaction.atomic():
        run = (
            RetentionRun.objects.select_for_update()
            .filter(pk=run_id, project_id=project_id, job=job)
            .first()
        )
        if run is None or run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED):
            return None
        if run.status == RunStatus.QUEUED:
            run.status = RunStatus.RUNNING
            run.started_at = timezone.now()
            run.save(update_fields=["status", "started_at"])
            publish(RetentionChanged(project_id=project_id, what="run", id=str(run.pk)))
    return run


def _finish_run(run: RetentionRun) -> RetentionRun:
    with transaction.atomic():
        run.refresh_from_db()
        run.status = RunStatus.FAILED if run.errors else RunStatus.SUCCEEDED
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "finished_at"])
        publish(RetentionChanged(project_id=run.project_id, what="run", id=str(run.pk)))
    return run


def run_job_for_project(
    job: str,
    project_id: int,
    *,
    now: datetime | None = None,
    trigger: str = "beat",
    limit: int | None = None,
    max_batches: int | None = None,
    run_id: int | None = None,
) -> RetentionRun | None:
    """Run `job` over one project. A run is recorded when anything was examined or failed,
    or when a person triggered it (beat's idle ticks leave no rows). `run_id` names a run
    queued by request_runs: it is the one recorded (and nothing is done if it already ended)."""
    now = now or timezone.now()
    limit = limit or settings.SWITCHBOARD_RETENTION_BATCH
    max_batches = max_batches or settings.SWITCHBOARD_RETENTION_MAX_BATCHES
    policies = project_policies(project_id)
    run: RetentionRun | None
    if run_id is not None:
        run = _take_queued_run(run_id, project_id, job)
        if run is None:
            return None
    else:
        run = _start_run(project_id, job, trigger, now) if trigger != "beat" else None
    for action in JOB_ACTIONS[RunJob(job)]:
        skip: set[UUID] = set()
        resume: list[tuple[Any, UUID]] = []
        for _ in range(max_batches):
            if run is None:
                # Beat: look before recording a run (most ticks find nothing).
                if not candidates(project_id, action, now=now, policies=policies).exists():
                    break
                run = _start_run(project_id, job, trigger, now)
            locked, _tally = run_batch(
                project_id,
                action,
                now=now,
                limit=limit,
                policies=policies,
                holds=None,
                skip=skip,
                run=run,
                resume=resume,
            )
            if locked < limit:
                break
    return _finish_run(run) if run is not None else None


TASK_NAMES = {
    RunJob.ENFORCE: "retention_app.enforce_retention",
    RunJob.COMPACT: "retention_app.compact_sessions",
}


class JobsUnavailable(DomainError):
    """The broker refused the jobs: nothing will run them (the runs are marked failed)."""

    status = 503
    code = "jobs_unavailable"


def request_runs(project_id: int, *, trigger: str) -> list[RetentionRun]:
    """Queue both jobs over one project on the retention queue (the tasks beat runs, scoped
    to the project), each with a `queued` run recorded first so the page shows it at once;
    the worker that takes the task runs it under that run (running, then finished).

    The broker is asked after the runs commit (a worker must find them). If it refuses,
    the runs are marked failed with the reason and JobsUnavailable is raised."""
    with transaction.atomic():
        runs = [
            RetentionRun.objects.create(
                project_id=project_id, job=job, trigger=trigger, status=RunStatus.QUEUED
            )
            for job in (RunJob.ENFORCE, RunJob.COMPACT)
        ]
        for run in runs:
            publish(RetentionChanged(project_id=project_id, what="run", id=str(run.pk)))
    try:
        for run in runs:
            current_app.send_task(
                TASK_NAMES[RunJob(run.job)],
                kwargs={"project_ids": [project_id], "trigger": trigger, "run_id": run.pk},
                queue=settings.SWITCHBOARD_RETENTION_QUEUE,
                retry=False,
            )
    except Exception as exc:  # kombu's OperationalError, a refused or unreachable socket …
        logger.warning("retention jobs not queued for project %s: %r", project_id, exc)
        with transaction.atomic():
            for run in runs:
                updated = RetentionRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
                    status=RunStatus.FAILED,
                    finished_at=timezone.now(),
                    errors=[{"session_id": "", "action": "queue", "error": "broker unavailable"}],
                )
                if updated:
                    publish(RetentionChanged(project_id=project_id, what="run", id=str(run.pk)))
        raise JobsUnavailable(
            "The job queue is unavailable: nothing was run. Try again later.",
            detail={"runs": [run.pk for run in runs]},
        ) from exc
    return runs


def run_job(
    job: str,
    *,
    now: datetime | None = None,
    trigger: str = "beat",
    limit: int | None = None,
    max_batches: int | None = None,
    project_ids: list[int] | None = None,
) -> list[RetentionRun]:
    """Run `job` over every project (or those named); the runs recorded."""
    ids = project_ids or list(Project.objects.order_by("pk").values_list("pk", flat=True))
    runs = []
    for project_id in ids:
        run = run_job_for_project(
            job, project_id, now=now, trigger=trigger, limit=limit, max_batches=max_batches
        )
        if run is not None:
            runs.append(run)
    return runs
