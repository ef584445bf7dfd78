"""Tasks, steps, signals, links and workflows through the sync Client against a live server."""

import pytest
from switchboard_client import Conflict, NotFound
from switchboard_client.models import CreatedTask, TaskWithSessions

REVIEW = {
    "name": "tiny_review",
    "title": "Tiny review",
    "states": ["open", "done"],
    "initial": "open",
    "terminal": ["done"],
    "transitions": [{"from": "open", "to": "done", "name": "finish"}],
    "steps": [{"key": "check", "title": "Check it", "max_attempts": 2}],
}


def test_it_creates_lists_reads_and_moves_tasks(sb):
    session = sb.open_session("drafter")
    task = sb.create_task(
        "document_approval",
        params={"doc": "A-1"},
        metadata={"title": "Refund policy"},
        session_ids=[session.id],
        external_id="doc-A-1",
    )
    assert isinstance(task, CreatedTask) and task.signal_token
    assert (task.state, task.version, task.workflow.name) == (
        "draft_created",
        1,
        "document_approval",
    )
    assert task.session_ids == [session.id] and task.params == {"doc": "A-1"}
    assert [t.to for t in task.allowed_transitions] == ["sent_for_review"]
    assert {s.key for s in task.steps} == {"draft", "review", "revise", "publish"}
    # The same external_id again: that task (200), without its token.
    again = sb.create_task("document_approval", external_id="doc-A-1")
    assert type(again) is TaskWithSessions and again.id == task.id

    page = sb.list_tasks(workflow="document_approval")
    assert [t.id for t in page.tasks] == [task.id] and page.next_cursor is None
    assert [t.id for t in sb.list_tasks(session_id=session.id).tasks] == [task.id]
    assert sb.list_tasks(state=["published"]).tasks == []
    assert [t.id for t in sb.session_tasks(session.id)] == [task.id]
    assert [s.id for s in sb.task_sessions(task.id)] == [session.id]

    step = sb.update_step(task.id, "draft", "running", attempt=1, agent="drafter")
    assert (step.step.status, step.step.attempts, step.replayed) == ("running", 1, False)
    done = sb.update_step(task.id, "draft", "succeeded", outputs={"words": 420}, branch="short")
    assert done.step.outputs == {"words": 420} and done.step.branch == "short"
    assert sb.get_step(task.id, "draft").history[-1].kind == "step"

    moved = sb.transition(task.id, "sent_for_review", expected_version=done.task.version)
    assert moved.state == "sent_for_review" and moved.version > done.task.version
    with pytest.raises(Conflict) as stale:
        sb.transition(task.id, transition="approve", expected_version=1)
    assert stale.value.code and stale.value.status == 409
    with pytest.raises(Conflict) as invalid:
        sb.transition(task.id, "published")
    assert invalid.value.code == "invalid_transition"

    detail = sb.get_task(task.id, history_limit=50)
    assert detail.state == "sent_for_review" and detail.session_ids == [session.id]
    assert [h.kind for h in detail.history][:1] == ["created"] or detail.history
    transitions = [h for h in detail.history if h.kind == "transition"]
    assert [(h.from_, h.to) for h in transitions] == [("draft_created", "sent_for_review")]
    history = sb.task_history(task.id, step="draft")
    assert history.history and all(h.step == "draft" for h in history.history)
    with pytest.raises(NotFound):
        sb.get_task("00000000-0000-0000-0000-000000000000")


def test_it_signals_a_waiting_step_once(sb):
    task = sb.create_task("document_approval")
    sb.update_step(task.id, "review", "waiting", waiting_on={"signal": "review_decision"})
    waiting = sb.get_task(task.id)
    assert [(w.step, w.signal) for w in waiting.waiting] == [("review", "review_decision")]

    result = sb.signal(
        task.id, "review_decision", payload={"verdict": "approve"}, idempotency_key="rd-1"
    )
    assert result.resolved_steps == ["review"] and not result.replayed
    assert result.signal.name == "review_decision"
    replay = sb.signal(
        task.id, "review_decision", payload={"verdict": "approve"}, idempotency_key="rd-1"
    )
    assert replay.replayed and replay.signal.id == result.signal.id
    assert sb.get_step(task.id, "review").signal_payload == {"verdict": "approve"}


def test_it_links_sessions_and_registers_workflows(sb):
    task = sb.create_task("document_approval")
    one, two = sb.open_session("a"), sb.open_session("b")
    linked = sb.link_sessions(task.id, [one.id, two.id])
    assert set(linked.linked) == {one.id, two.id} and set(linked.session_ids) == {one.id, two.id}
    assert sb.link_sessions(task.id, [one.id]).linked == []
    unlinked = sb.unlink_session(task.id, one.id)
    assert unlinked.unlinked and unlinked.session_ids == [two.id]

    workflow = sb.register_workflow(REVIEW)
    assert (workflow.name, workflow.version, workflow.source) == ("tiny_review", 1, "api")
    assert [(t.from_, t.to) for t in workflow.transitions] == [("open", "done")]
    # With its version, the same definition again is the one registered; without, the next.
    assert sb.register_workflow({**REVIEW, "version": 1}).content_hash == workflow.content_hash
    assert sb.register_workflow(REVIEW).version == 2
    assert sb.get_workflow("tiny_review", version=1).content_hash == workflow.content_hash
    assert sb.get_workflow("tiny_review").version == 2
    names = {w.name for w in sb.list_workflows()}
    assert {"tiny_review", "document_approval"} <= names
    assert [w.version for w in sb.list_workflows(name="tiny_review")] == [1, 2]
    custom = sb.create_task("tiny_review")
    assert sb.transition(custom.id, transition="finish").finished
