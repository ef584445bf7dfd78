"""Opening, forking and exporting sessions."""

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from core.actors import Actor
from core.domain_events import outbox_message, outbox_written, publish
from core.errors import InvalidInput, NotFound
from core.models import Project
from core.services.audit import audit_entry, audit_written, record_audit
from core.storage import insert_in_one_statement
from core.text import check_storable_values
from sessions_app import storage
from sessions_app.compaction import refuse_inside_compacted
from sessions_app.models import Agent, Session, SessionStatus
from sessions_app.queries import export_header, open_export

from ..domain_events import SessionOpened
from ..errors import ExportBusy, ExternalIdTaken


def get_or_register_agent(project: Project, name: str, version: str = "") -> Agent:
    """The project's agent called `name`, registered on first use (race-safe)."""
    agent = Agent.objects.filter(project=project, name=name).first()
    if agent is not None:
        return agent
    try:
        with transaction.atomic():
            return Agent.objects.create(project=project, name=name, version=version)
    except IntegrityError:
        return Agent.objects.get(project=project, name=name)


def open_session(
    project: Project,
    *,
    agent_name: str,
    actor: Actor,
    external_id: str | None = None,
    title: str = "",
    metadata: dict[str, Any] | None = None,
    budget_max_tokens: int | None = None,
    budget_max_cost: Decimal | None = None,
) -> tuple[Session, bool]:
    """Open a session, or return the project's session with this `external_id` (created=False).

    An `external_id` held by a session of another agent (opened, or given to a fork) is not
    that session: ExternalIdTaken (409), naming the agent that holds it.
    """
    if not agent_name:
        raise InvalidInput("A session needs an agent name.")
    check_storable_values(metadata=metadata)
    if external_id is not None:
        existing = _opened_with(project, external_id, agent_name)
        if existing is not None:
            return existing, False
    agent = get_or_register_agent(project, agent_name)
    try:
        with transaction.atomic():
            session = Session.objects.create(
                project=project,
                agent=agent,
                external_id=external_id,
                title=title,
                metadata=metadata or {},
                budget_max_tokens=budget_max_tokens,
                budget_max_cost=budget_max_cost,
            )
            record_audit(
                project,
                actor=actor,
                action="session.open",
                target_type="session",
                target_id=session.pk,
                detail={"agent": agent_name, "external_id": external_id},
            )
            publish(SessionOpened(project_id=project.pk, session_id=str(session.pk)))
    except IntegrityError:
        # The same external_id opened concurrently: the constraint picked one winner.
        if external_id is None:
            raise
        winner = _opened_with(project, external_id, agent_name)
        if winner is None:
            raise
        return winner, False
    return session, True


def _holding(project_id: int, external_id: str) -> Session | None:
    """The project's session with this external_id, with its agent."""
    return (
        Session.objects.select_related("agent")
        .filter(project_id=project_id, external_id=external_id)
        .first()
    )


def _opened_with(project: Project, external_id: str, agent_name: str) -> Session | None:
    """The session opened with `external_id`, if any; ExternalIdTaken if its agent is not
    `agent_name` (answering with another agent's session would hand its log to this one)."""
    existing = _holding(project.pk, external_id)
    if existing is not None and existing.agent.name != agent_name:
        raise ExternalIdTaken(
            f"external_id {external_id!r} belongs to a session of agent "
            f"{existing.agent.name!r}, not {agent_name!r}.",
            detail={
                "external_id": external_id,
                "session_id": str(existing.pk),
                "agent": existing.agent.name,
            },
        )
    return existing


def fork_session(
    parent: Session,
    *,
    at_seq: int,
    actor: Actor,
    title: str = "",
    external_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Session:
    """open_fork's fork, new or (by `external_id`) found."""
    return open_fork(
        parent, at_seq=at_seq, actor=actor, title=title, external_id=external_id, metadata=metadata
    )[0]


def open_fork(
    parent: Session,
    *,
    at_seq: int,
    actor: Actor,
    title: str = "",
    external_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> tuple[Session, bool]:
    """A copy-on-write fork: history = parent's up to `at_seq`, then its own. Copies no event.

    Rewinding is forking at an earlier seq. The fork opens fresh (status open, usage zero,
    the parent's budget), with `metadata` or else a copy of the parent's, and `title` or else
    "Fork of <parent's title>". `parent` needs only its pk and project_id (the API passes no
    more): the row is read here, locked, with its agent; a session of another project is not
    found. The returned fork's `parent` is that row.

    Idempotent by `external_id`, as opening is: when the project's session with it is a fork of
    `parent` at `at_seq`, that fork is returned (created=False; its title and metadata as they
    were, whatever these say), also to a request that raced the one that made it; when it is
    any other session, ExternalIdTaken (409).
    """
    check_storable_values(metadata=metadata)
    if external_id is not None:
        existing = _forked_with(parent, at_seq, external_id)
        if existing is not None:
            return existing, False
    try:
        return _fork(
            parent,
            at_seq=at_seq,
            actor=actor,
            title=title,
            external_id=external_id,
            metadata=metadata,
        ), True
    except IntegrityError:
        # The same external_id taken concurrently: the constraint picked one winner.
        if external_id is None:
            raise
        winner = _forked_with(parent, at_seq, external_id)
        if winner is None:
            raise
        return winner, False


def _forked_with(parent: Session, at_seq: int, external_id: str) -> Session | None:
    """The fork made with `external_id`, if any; ExternalIdTaken if the session holding it is
    not a fork of `parent` at `at_seq`."""
    existing = _holding(parent.project_id, external_id)
    if existing is None:
        return None
    if existing.parent_id != parent.pk or existing.fork_seq != at_seq:
        raise ExternalIdTaken(
            f"external_id {external_id!r} belongs to another session than a fork of this "
            f"session at seq {at_seq}.",
            detail={
                "external_id": external_id,
                "session_id": str(existing.pk),
                "parent_id": None if existing.parent_id is None else str(existing.parent_id),
                "fork_seq": existing.fork_seq,
            },
        )
    return existing


def _fork(
    parent: Session,
    *,
    at_seq: int,
    actor: Actor,
    title: str,
    external_id: str | None,
    metadata: dict[str, Any] | None,
) -> Session:
    with transaction.atomic():
        # The parent's row lock orders this fork after any compaction of the parent in flight
        # (compaction locks it FOR UPDATE and never passes a live fork's fork_seq, see
        # retention_app.services.compaction); a fork inside a compacted range is refused (410):
        # its state there cannot be folded.
        locked = storage.session_in_project(parent.pk, parent.project_id, lock=True)
        if locked is None:
            raise NotFound("Session not found.", detail={"session_id": str(parent.pk)})
        parent = locked
        if at_seq < 0 or at_seq > parent.head_seq:
            raise InvalidInput(
                f"at_seq must be between 0 and the head ({parent.head_seq}).",
                detail={"at_seq": at_seq, "head_seq": parent.head_seq},
            )
        refuse_inside_compacted(parent, at_seq, what="fork point")
        ancestry = [
            [str(segment_id), at_seq if upto is None else min(upto, at_seq)]
            for segment_id, lower, upto in parent.lineage_segments()
            if lower < at_seq
        ]
        fork = Session(
            project_id=parent.project_id,
            agent_id=parent.agent_id,
            external_id=external_id,
            title=title or (f"Fork of {parent.title}" if parent.title else ""),
            status=SessionStatus.OPEN,
            metadata=parent.metadata if metadata is None else metadata,
            head_seq=at_seq,
            budget_max_tokens=parent.budget_max_tokens,
            budget_max_cost=parent.budget_max_cost,
            parent=parent,
            fork_seq=at_seq,
            ancestry=ancestry,
        )
        entry = audit_entry(
            parent.project_id,
            actor=actor,
            action="session.fork",
            target_type="session",
            target_id=fork.pk,
            detail={
                "parent": str(parent.pk),
                "at_seq": at_seq,
                **({} if external_id is None else {"external_id": external_id}),
            },
        )
        opened = SessionOpened(
            project_id=parent.project_id,
            session_id=str(fork.pk),
            parent_id=str(parent.pk),
            fork_seq=at_seq,
        )
        message = outbox_message(opened)
        # The session, its audit row and its outbox row in one statement (one round trip).
        insert_in_one_statement([fork, entry, message])
        audit_written(entry)
        outbox_written(opened, message)
    return fork


# Seconds a refused export is told to wait (Retry-After) before asking again.
EXPORT_RETRY_AFTER_SECONDS = 10


def export_session(session: Session, *, actor: Actor) -> AsyncIterator[str]:
    """Take one of the project's export slots, record who exported the session, and return its
    visible log up to the current head as JSON Lines chunks (queries.SessionExport), after a
    header line describing the session (queries.export_header).

    At most SWITCHBOARD_EXPORTS_PER_PROJECT exports of a project run at once, whichever
    server process serves them (the slots are PostgreSQL advisory locks): past that, ExportBusy
    (429), and nothing is recorded. A few heavy downloads cannot take every connection and
    core from the project's agents, and one project's exports never refuse another's.
    Called from a sync view; the export's connection belongs to the server's event loop.
    """
    slots = settings.SWITCHBOARD_EXPORTS_PER_PROJECT
    agent_name = Agent.objects.filter(pk=session.agent_id).values_list("name", flat=True).get()
    header = export_header(session, agent_name=agent_name)
    with connection.wrap_database_errors:  # psycopg's errors as Django's (an outage: 503)
        export = async_to_sync(open_export)(session, slots=slots, header=header)
    if export is None:
        error = ExportBusy(
            f"This project already runs {slots} exports, its limit; retry when one ends.",
            detail={"limit": slots, "retry_after": EXPORT_RETRY_AFTER_SECONDS},
        )
        error.retry_after = EXPORT_RETRY_AFTER_SECONDS
        raise error
    try:
        record_audit(
            session.project_id,
            actor=actor,
            action="session.export",
            target_type="session",
            target_id=session.pk,
            detail={"head_seq": session.head_seq},
        )
    except BaseException:
        async_to_sync(export.close)()
        raise
    return export.chunks()
