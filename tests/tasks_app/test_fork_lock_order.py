"""Forks race task writes on the same session and task, in several OS processes (issue 13).

A fork locks its parent session's row, then (tasks_app's reaction, in the same transaction) its
linked tasks' rows. Every tasks_app writer locks the task row first; the ones that then touch a
session only insert or delete TaskSession rows, whose foreign-key check takes FOR KEY SHARE on
the session row, which the fork's FOR NO KEY UPDATE lock does not block. So no writer waits for a
session while holding a task a fork waits for: no lock cycle, no deadlock. This test races them:
two processes fork the parent, one moves the task between two states, one links and unlinks
other sessions (and the parent again) to the task, each round started at once by a barrier.
"""

import pytest

from core.actors import Actor
from sessions_app.models import Session
from tasks_app.models import HistoryKind, Task, TaskHistory, TaskSession
from tasks_app.services.links import link_sessions
from tests.factories import make_session, make_task
from tests.multiproc import barrier, run_in_processes

from .helpers import drive

pytestmark = [pytest.mark.slow]

ROUNDS = 12
RACER = Actor.system("race")


def fork_each_round(parent_id: str, rounds: int) -> list[str]:
    from sessions_app.services.sessions import fork_session

    forks = []
    for _ in range(rounds):
        barrier().wait()
        parent = Session.objects.get(pk=parent_id)
        forks.append(str(fork_session(parent, at_seq=0, actor=RACER).pk))
    return forks


def transition_each_round(task_id: str, rounds: int) -> list[str]:
    """reviewing -> drafting -> reviewing …: a legal loop of research_report."""
    from tasks_app.services.transitions import transition_task

    states = []
    for index in range(rounds):
        barrier().wait()
        task = Task.objects.get(pk=task_id)
        to = "drafting" if index % 2 == 0 else "reviewing"
        states.append(transition_task(task, to, actor=RACER).state)
    return states


def link_and_unlink_each_round(task_id: str, parent_id: str, other_ids: list[str]) -> int:
    from tasks_app.services.links import unlink_session

    for other_id in other_ids:
        barrier().wait()
        task = Task.objects.get(pk=task_id)
        # The parent again (already linked: nothing new) with another session, then that one off.
        link_sessions(task, [parent_id, other_id], actor=RACER)
        assert unlink_session(task, other_id, actor=RACER)
    return len(other_ids)


ROLES = {
    "fork": fork_each_round,
    "transition": transition_each_round,
    "link": link_and_unlink_each_round,
}


def race(role: str, *args):
    return ROLES[role](*args)


def test_forks_racing_task_transitions_and_links_never_deadlock(transactional_db, project):
    parent = make_session(project, title="Parent")
    task = drive(make_task(project, "research_report"), ["drafting", "reviewing"])
    link_sessions(task, [parent.pk], actor=RACER)
    others = [str(make_session(project, title=f"other {i}").pk) for i in range(ROUNDS)]

    # Any deadlock fails the child with psycopg's DeadlockDetected (run_in_processes re-raises).
    forks_a, forks_b, states, links = run_in_processes(
        race,
        [
            ("fork", str(parent.pk), ROUNDS),
            ("fork", str(parent.pk), ROUNDS),
            ("transition", str(task.pk), ROUNDS),
            ("link", str(task.pk), str(parent.pk), others),
        ],
    )

    forks = set(forks_a) | set(forks_b)
    assert len(forks) == 2 * ROUNDS
    assert states == ["drafting", "reviewing"] * (ROUNDS // 2)
    assert links == ROUNDS

    task.refresh_from_db()
    # Every fork kept the parent's link; the other sessions are all unlinked again.
    linked = set(TaskSession.objects.filter(task=task).values_list("session_id", flat=True))
    assert {str(s) for s in linked} == {str(parent.pk)} | forks
    # One history row per link and per transition, none lost or doubled.
    history = TaskHistory.objects.filter(task=task)
    fork_links = history.filter(kind=HistoryKind.LINK, data__session_id__in=list(forks))
    assert fork_links.count() == 2 * ROUNDS
    assert history.filter(kind=HistoryKind.UNLINK).count() == ROUNDS
    assert task.state == "reviewing"
