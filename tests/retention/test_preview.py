"""The preview says what a run then does, in every category: the enforce job (close, archive,
delete) and then the compact job, as "Run retention now" queues them. What one rule's changes
make due for another (a parent compactable once its last fork is deleted; a parent deletable
once its last fork is) is counted as the run does it, whatever the batch size."""

import pytest
import time_machine

from handoffs_app.services.handoffs import request_handoff
from retention_app.services.holds import place_hold
from retention_app.services.jobs import run_job
from retention_app.services.policies import project_policies, save_policy
from retention_app.services.preview import preview
from sessions_app.models import Session
from sessions_app.services.events import EventDraft
from sessions_app.services.lifecycle import archive_session, pause_session
from sessions_app.services.sessions import fork_session
from tests.factories import make_session
from tests.retention.helpers import POLICY as BASE_POLICY
from tests.retention.helpers import SYSTEM, append, archived, at, closed, conversation

# A session with an error follows the outcome rules (compacted at 60 days, not 30).
POLICY = {**BASE_POLICY, "keep_outcomes": ["error"]}


def run(project, days: float, *, limit: int | None = None) -> dict[str, int]:
    """Both jobs at `days`, enforce then compact (the page's order); the runs' counts by the
    preview's categories."""
    counts: dict[str, int] = {}
    with time_machine.travel(at(days), tick=False):
        for job in ("enforce_retention", "compact_sessions"):
            (done,) = run_job(job, trigger="test", project_ids=[project.pk], limit=limit)
            assert done.errors == []
            for name in ("closed", "archived", "deleted", "compacted", "events_freed"):
                counts[name] = counts.get(name, 0) + getattr(done, name)
    return counts


def previewed(project, days: float) -> dict[str, int]:
    with time_machine.travel(at(days), tick=False):
        result = preview(project, project_policies(project), now=at(days))
    return {
        "closed": result.counts["close_idle"] + result.counts["close_paused"],
        "archived": result.counts["archive"],
        "deleted": result.counts["delete"],
        "compacted": result.counts["compact"],
        "events_freed": sum(result.events_freed_estimate.values()),
    }


def same_counts(expected: dict[str, int], done: dict[str, int]) -> None:
    freed_bound, freed = expected.pop("events_freed"), done.pop("events_freed")
    assert done == expected
    assert freed <= freed_bound  # the preview's is an upper bound (durable events stay)


def forked_and_compacted(project, *, fork_archived_at: float, parent_archived_at: float | None):
    """A parent closed at day 0 with one fork at seq 5; both compacted at day 32 (the parent
    only up to its fork point). The fork is archived at `fork_archived_at`; the parent closed
    (archived at `parent_archived_at` if given)."""
    with time_machine.travel(at(0), tick=False):
        parent = make_session(project)
        append(parent, conversation(14))
        fork = fork_session(parent, at_seq=5, actor=SYSTEM)
        closed(parent)
    with time_machine.travel(at(fork_archived_at), tick=False):
        archived(fork)
    if parent_archived_at is not None:
        with time_machine.travel(at(parent_archived_at), tick=False):
            archive_session(parent, actor=SYSTEM, reason="done")
    return parent, fork


@pytest.fixture
def policy(project):
    save_policy(project, POLICY, actor=SYSTEM)
    return POLICY


def test_a_compaction_the_runs_deletion_of_the_last_fork_allows_is_previewed(db, project, policy):
    parent, fork = forked_and_compacted(project, fork_archived_at=1, parent_archived_at=None)
    assert run(project, 32)["compacted"] == 2
    parent.refresh_from_db()
    assert parent.compacted_through_seq == 5 < parent.head_seq  # stopped at the fork point

    expected = previewed(project, 100)
    assert expected["deleted"] == 1  # the fork, archived 99 days ago
    assert expected["compacted"] == 1  # the parent, once the fork is gone
    done = run(project, 100)
    same_counts(expected, done)
    assert not Session.objects.filter(pk=fork.pk).exists()
    parent.refresh_from_db()
    assert parent.compacted_through_seq == parent.head_seq


@pytest.mark.parametrize("limit", [1, 2, None])
def test_the_preview_equals_the_run_in_every_category_across_a_mixed_project(
    db, project, policy, limit
):
    with time_machine.travel(at(0), tick=False):
        for _ in range(2):
            make_session(project)  # idle: closed
        paused = make_session(project)
        pause_session(paused, actor=SYSTEM)  # paused too long: closed
        waiting = make_session(project)  # paused with an open handoff: kept
        request_handoff(waiting, kind="question", payload={"question": "?"}, actor=SYSTEM)
        for i in range(3):  # closed long ago: archived, compacted
            s = make_session(project)
            append(s, conversation(10, seed=i))
            closed(s)
        errored = make_session(project)  # kept longer: compacted at 60 days, not 30
        append(errored, conversation(6) + [EventDraft(kind="error", content={"e": 1})])
        closed(errored)
        held = make_session(project)  # on hold: archived, neither compacted nor deleted
        append(held, conversation(9))
        archived(held)
        place_hold(project, session=held, reason="subpoena", actor=SYSTEM)
    # A parent compactable once its fork goes; a parent deletable once its fork goes (archived
    # after the fork: a later batch of the same run would find it free).
    free_to_compact, _ = forked_and_compacted(project, fork_archived_at=1, parent_archived_at=None)
    free_to_delete, _ = forked_and_compacted(project, fork_archived_at=1, parent_archived_at=2)
    same_counts(previewed(project, 32), run(project, 32, limit=limit))

    with time_machine.travel(at(45), tick=False):
        recent = make_session(project)  # closed 5 days before the next run: left alone
        append(recent, conversation(8))
        closed(recent)
    same_counts(previewed(project, 50), run(project, 50, limit=limit))

    with time_machine.travel(at(1), tick=False):
        # Archived long ago and never compacted (made after the runs above): the run deletes
        # them, so its compaction does not find them.
        for _ in range(2):
            s = make_session(project)
            append(s, conversation(9))
            archived(s)

    expected = previewed(project, 100)
    assert expected["deleted"] == 4  # two never-compacted sessions, two forks
    assert expected["compacted"] >= 2  # among them the parents freed by their forks' deletion
    same_counts(expected, run(project, 100, limit=limit))
    assert Session.objects.filter(pk=free_to_delete.pk).exists()  # its turn is the next run
    assert Session.objects.filter(pk=held.pk).exists()
    for parent in (free_to_compact, free_to_delete):
        parent.refresh_from_db()
        assert parent.compacted_through_seq == parent.head_seq
    # And the next run does what its preview says too.
    expected = previewed(project, 100)
    assert expected["deleted"] == 1
    same_counts(expected, run(project, 100, limit=limit))
