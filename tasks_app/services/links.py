"""Links between tasks and sessions (many to many, through TaskSession).

Links never cross projects: every id is resolved inside the task's (or session's) project and an
unknown id is a 404 naming it. Linking does not move a task's version: it changes no workflow
state, and an agent opening a session for a task must not make other agents' transitions fail.
"""

from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from django.db import transaction

from core.actors import Actor
from core.domain_events import publish
from core.services.audit import record_audit
from sessions_app.domain_events import SessionOpened
from sessions_app.models import Session

from .. import storage
from ..domain_events import TaskLinksChanged
from ..errors import InvalidInput, NotFound
from ..models import HistoryKind, Task, TaskSession
from .history import append_history
from .locking import lock_task, lock_tasks

MAX_LINKS_PER_CALL = 100


def _as_uuids(ids: Iterable[Any], what: str) -> list[UUID]:
    result: list[UUID] = []
    for value in ids:
        try:
            result.append(value if isinstance(value, UUID) else UUID(str(value)))
        except ValueError:
            detail = {f"{what.lower()}_ids": [str(value)]}
            raise NotFound(f"{what} not found.", detail=detail) from None
    if len(result) > MAX_LINKS_PER_CALL:
        raise InvalidInput(f"At most {MAX_LINKS_PER_CALL} links per call.")
    return list(dict.fromkeys(result))


def resolve_sessions(project_id: int, session_ids: Iterable[Any]) -> list[Session]:
    """The project's sessions with these ids; NotFound lists any that are not (also other
    projects' sessions, which are indistinguishable from missing ones)."""
    ids = _as_uuids(session_ids, "Session")
    found = {s.pk: s for s in Session.objects.filter(project_id=project_id, pk__in=ids)}
    missing = [str(i) for i in ids if i not in found]
    if missing:
        raise NotFound("Session not found.", detail={"session_ids": missing})
    return [found[i] for i in ids]


def resolve_tasks(project_id: int, task_ids: Iterable[Any]) -> list[Task]:
    ids = _as_uuids(task_ids, "Task")
    found = {t.pk: t for t in Task.objects.filter(project_id=project_id, pk__in=ids)}
    missing = [str(i) for i in ids if i not in found]
    if missing:
        raise NotFound("Task not found.", detail={"task_ids": missing})
    return [found[i] for i in ids]


def link_sessions_locked(task: Task, sessions: Sequence[Session], *, actor: Actor) -> list[Session]:
    """Link `sessions` to `task` (caller holds the task lock); returns the newly linked ones."""
    already = set(
        TaskSession.objects.filter(task=task, session__in=sessions).values_list(
            "session_id", flat=True
        )
    )
    new = [s for s in sessions if s.pk not in already]
    if not new:
        return []
    TaskSession.objects.bulk_create(
        [TaskSession(task=task, session=s, linked_by=actor.label) for s in new]
    )
    for session in new:
        append_history(
            task, kind=HistoryKind.LINK, actor=actor, data={"session_id": str(session.pk)}
        )
    record_audit(
        task.project_id,
        actor=actor,
        action="task.link",
        target_type="task",
        target_id=task.pk,
        detail={"session_ids": [str(s.pk) for s in new]},
    )
    publish(
        TaskLinksChanged(
            project_id=task.project_id, task_id=str(task.pk), linked=[str(s.pk) for s in new]
        )
    )
    return new


def link_sessions(task: Task, session_ids: Iterable[Any], *, actor: Actor) -> list[Session]:
    """Link the project's sessions to `task`; already-linked ones are left as they are.

    Locks the task row. Raises NotFound naming ids that are not sessions of the task's project.
    """
    sessions = resolve_sessions(task.project_id, session_ids)
    with transaction.atomic():
        locked = lock_task(task.pk)
        return link_sessions_locked(locked, sessions, actor=actor)


def link_tasks_to_session(session: Session, task_ids: Iterable[Any], *, actor: Actor) -> list[Task]:
    """Link `session` to each of the tasks (POST /sessions with task_ids). Locks the tasks in
    id order. Raises NotFound naming ids that are not tasks of the session's project."""
    tasks = resolve_tasks(session.project_id, task_ids)
    with transaction.atomic():
        for locked in lock_tasks(t.pk for t in tasks):
            link_sessions_locked(locked, [session], actor=actor)
    return tasks


def unlink_session(task: Task, session_id: Any, *, actor: Actor) -> bool:
    """Remove one link; False if there was none. Raises NotFound for another project's session."""
    (session,) = resolve_sessions(task.project_id, [session_id])
    with transaction.atomic():
        locked = lock_task(task.pk)
        deleted, _ = TaskSession.objects.filter(task=locked, session=session).delete()
        if not deleted:
            return False
        append_history(
            locked, kind=HistoryKind.UNLINK, actor=actor, data={"session_id": str(session.pk)}
        )
        record_audit(
            locked.project_id,
            actor=actor,
            action="task.unlink",
            target_type="task",
            target_id=locked.pk,
            detail={"session_ids": [str(session.pk)]},
        )
        publish(
            TaskLinksChanged(
                project_id=locked.project_id,
                task_id=str(locked.pk),
                unlinked=[str(session.pk)],
            )
        )
    return True


def open_session_for_tasks(
    project: Any, *, task_ids: Sequence[Any], actor: Actor, **session_fields: Any
) -> tuple[Session, bool]:
    """Open a session (sessions_app's open_session) and link it to `task_ids`, all or nothing.

    Unknown task ids raise NotFound before anything is written; a failure while linking rolls
    the new session back with it.
    """
    from sessions_app.services.sessions import open_session

    resolve_tasks(project.pk, task_ids)
    with transaction.atomic():
        session, created = open_session(project, actor=actor, **session_fields)
        if task_ids:
            link_tasks_to_session(session, task_ids, actor=actor)
    return session, created


def keep_parents_task_links(event: SessionOpened) -> None:
    """A fork keeps its parent's task links: on a fork's SessionOpened (core.domain_events
    react_to, in the fork's transaction), link the fork to every task its parent is linked to.
    """
    if event.parent_id is None:
        return
    task_ids = storage.linked_task_ids(event.parent_id)
    if not task_ids:
        return
    fork = Session.objects.get(pk=event.session_id)
    link_tasks_to_session(fork, task_ids, actor=Actor.system())
