"""Domain events (core.domain_events): outboxed events are an OutboxMessage row in the change's
own transaction, relayed to the groups they name after commit; events appended are live-only.

Real commits (transactional tests) and the real Redis channel layer: a GroupListener is a
channel of the test added to a group, so what it reads is what a live page would have heard.
"""

from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.actors import Actor
from core.domain_events import RELAY_GRACE, publish, relay_pending
from core.models import OutboxMessage
from core.realtime import project_list_group, session_group, task_group
from sessions_app.domain_events import EventsAppended, LifecycleChanged
from sessions_app.models import Session
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import pause_session
from tasks_app.domain_events import TaskTransitioned
from tasks_app.services.steps import update_step
from tasks_app.services.transitions import transition_task
from tests.factories import make_session, make_task

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = Actor.system("agent")
QUIET = 0.6  # seconds a listener waits to conclude that nothing was sent


class Boom(Exception):
    pass


def rows(**filters) -> list[OutboxMessage]:
    return list(OutboxMessage.objects.filter(**filters).order_by("id"))


def visible_elsewhere(message_id: int) -> bool:
    """Whether another connection (another transaction) sees the outbox row."""
    s = connection.settings_dict
    with psycopg.connect(
        host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"], dbname=s["NAME"], autocommit=True
    ) as other:
        table = OutboxMessage._meta.db_table
        found = other.execute(f"SELECT 1 FROM {table} WHERE id = %s", (message_id,)).fetchone()
    return found is not None


def messages(n: int = 1) -> list[EventDraft]:
    return [
        EventDraft(kind="message", role="user", content={"text": f"line {i}"}) for i in range(n)
    ]


# --- Outboxed: one row in the change's transaction ------------------------------------------


def test_a_lifecycle_change_writes_one_row_in_its_transaction_and_is_relayed_after_commit(
    project, listen
):
    session = make_session(project)
    on_page = listen(session_group(session.pk))
    on_list = listen(project_list_group(project.pk, "sessions"))
    before = OutboxMessage.objects.count()

    with transaction.atomic():
        pause_session(session, actor=AGENT, reason="coffee")
        written = rows(type="session.lifecycle")
        assert OutboxMessage.objects.count() == before + 1
        assert len(written) == 1
        row = written[0]
        # Part of this transaction: no other connection sees it yet, nothing was sent yet.
        assert not visible_elsewhere(row.pk)
        assert row.relayed_at is None
        assert on_page.receive(timeout=QUIET) is None

    row.refresh_from_db()
    assert visible_elsewhere(row.pk)
    assert row.relayed_at is not None  # sent right after commit, then marked
    assert row.project_id == project.pk
    assert row.groups == [f"session-{session.pk}", f"project-{project.pk}-sessions"]
    assert row.payload == {
        "type": "session.lifecycle",
        "project_id": project.pk,
        "session_id": str(session.pk),
        "from": "open",
        "to": "paused",
        "reason": "coffee",
        "actor": "agent",
    }
    # Both groups the row names heard it, once, after the live notice of the lifecycle event
    # the transition appended to the log.
    appended = {
        "type": "session.events",
        "project_id": project.pk,
        "session_id": str(session.pk),
        "from_seq": 1,
        "to_seq": 1,
    }
    assert on_page.receive_all(QUIET) == [appended, row.payload]
    assert on_list.receive_all(QUIET) == [appended, row.payload]


def test_task_changes_are_one_row_each_relayed_to_the_task_and_the_tasks_list(project, listen):
    task = make_task(project)
    on_page = listen(task_group(task.pk))
    on_list = listen(project_list_group(project.pk, "tasks"))
    before = OutboxMessage.objects.count()

    transition_task(task, "sent_for_review", actor=AGENT)
    update_step(task, "review", status="running", actor=AGENT)

    new = rows()[before:]
    assert [m.type for m in new] == ["task.transition", "task.step"]
    assert all(m.relayed_at is not None for m in new)
    task_groups = [f"task-{task.pk}", f"project-{project.pk}-tasks"]
    # A transition also reaches the sessions list (a linked task's state); a step does not.
    assert [m.groups for m in new] == [
        [*task_groups, f"project-{project.pk}-sessions"],
        task_groups,
    ]
    transition, step = (m.payload for m in new)
    assert (transition["from"], transition["to"], transition["task_id"]) == (
        "draft_created",
        "sent_for_review",
        str(task.pk),
    )
    assert (step["step"], step["status"], step["attempt"]) == ("review", "running", 1)
    assert on_page.receive_all(QUIET) == [transition, step]
    assert on_list.receive_all(QUIET) == [transition, step]


def test_a_change_rolled_back_after_the_fact_leaves_no_row_and_sends_nothing(project, listen):
    session = make_session(project)
    task = make_task(project)
    heard = listen(
        session_group(session.pk),
        project_list_group(project.pk, "sessions"),
        task_group(task.pk),
        project_list_group(project.pk, "tasks"),
    )
    before = OutboxMessage.objects.count()

    with pytest.raises(Boom), transaction.atomic():
        pause_session(session, actor=AGENT)
        transition_task(task, "sent_for_review", actor=AGENT)
        assert OutboxMessage.objects.count() == before + 2  # written, in this transaction
        raise Boom

    assert OutboxMessage.objects.count() == before
    assert Session.objects.get(pk=session.pk).status == "open"
    task.refresh_from_db()
    assert task.state == "draft_created"
    assert heard.receive_all(QUIET) == []


def test_a_change_rolled_back_to_a_savepoint_sends_nothing_while_the_rest_commits(project, listen):
    session = make_session(project)
    task = make_task(project)
    heard = listen(session_group(session.pk), task_group(task.pk))
    before = OutboxMessage.objects.count()

    with transaction.atomic():
        with pytest.raises(Boom), transaction.atomic():
            pause_session(session, actor=AGENT)
            raise Boom
        transition_task(task, "sent_for_review", actor=AGENT)

    new = rows()[before:]
    assert [m.type for m in new] == ["task.transition"]
    assert new[0].relayed_at is not None
    assert [m["type"] for m in heard.receive_all(QUIET)] == ["task.transition"]
    assert Session.objects.get(pk=session.pk).status == "open"


# --- Live-only: events appended ---------------------------------------------------------------


def test_appending_writes_no_outbox_row_but_the_live_notice_goes_out(project, listen):
    session = make_session(project)
    on_page = listen(session_group(session.pk))
    on_list = listen(project_list_group(project.pk, "sessions"))
    before = OutboxMessage.objects.count()
    table = OutboxMessage._meta.db_table

    with CaptureQueriesContext(connection) as queries:
        # The one-statement path (a few events), the COPY path (a larger batch) and the
        # transactional path (inside a caller's transaction).
        append_events(session, messages(1), actor=AGENT)
        append_events(session, messages(100), actor=AGENT)
        with transaction.atomic():
            append_events(session, messages(3), actor=AGENT)

    assert OutboxMessage.objects.count() == before
    assert not [q["sql"] for q in queries.captured_queries if table in q["sql"]]
    expected = [(1, 1), (2, 101), (102, 104)]
    for listener in (on_page, on_list):
        heard = listener.receive_all(QUIET)
        assert [(m["type"], m["from_seq"], m["to_seq"]) for m in heard] == [
            ("session.events", a, b) for a, b in expected
        ]
        assert all(m["session_id"] == str(session.pk) for m in heard)


def test_an_append_rolled_back_sends_no_notice(project, listen):
    session = make_session(project)
    heard = listen(session_group(session.pk))
    with pytest.raises(Boom), transaction.atomic():
        append_events(session, messages(2), actor=AGENT)
        raise Boom
    assert heard.receive_all(QUIET) == []


# --- Misuse fails at the source -----------------------------------------------------------------


def test_publishing_an_outboxed_event_outside_a_transaction_raises(project, listen):
    session = make_session(project)
    task = make_task(project)
    heard = listen(session_group(session.pk), task_group(task.pk))
    before = OutboxMessage.objects.count()
    assert not connection.in_atomic_block

    with pytest.raises(RuntimeError, match="session.lifecycle.*inside the change's transaction"):
        publish(
            LifecycleChanged(
                project_id=project.pk,
                session_id=str(session.pk),
                from_status="open",
                to_status="paused",
            )
        )
    with pytest.raises(RuntimeError, match="task.transition"):
        publish(TaskTransitioned(project_id=project.pk, task_id=str(task.pk)))

    assert OutboxMessage.objects.count() == before
    assert heard.receive_all(QUIET) == []


def test_a_payload_that_is_not_json_safe_fails_at_the_source(project, listen):
    session = make_session(project)
    heard = listen(session_group(session.pk))
    before = OutboxMessage.objects.count()

    with transaction.atomic():
        # A UUID where the event wants its string: a mistake a service could make.
        with pytest.raises(TypeError, match="not JSON serializable"):
            publish(LifecycleChanged(project_id=project.pk, session_id=session.pk))
        with pytest.raises(TypeError, match="not JSON serializable"):
            publish(EventsAppended(project_id=project.pk, session_id=session.pk, to_seq=1))
        assert OutboxMessage.objects.count() == before  # no row written
    # Outside a transaction too, before anything else is checked.
    with pytest.raises(TypeError):
        publish(
            LifecycleChanged(
                project_id=project.pk, session_id=str(session.pk), reason=timezone.now()
            )
        )
    assert OutboxMessage.objects.count() == before
    assert heard.receive_all(QUIET) == []  # and nothing was queued for after the commit


# --- The layer down: the row waits for the relay job ---------------------------------------------


def test_a_row_the_layer_refused_stays_unsent_until_the_relay_job_sends_it(
    project, listen, settings
):
    session = make_session(project)
    heard = listen(session_group(session.pk))
    layers = settings.CHANNEL_LAYERS
    # Redis unreachable (nothing listens on port 1): the relay after commit fails, quietly.
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"], "prefix": "unreachable"},
        }
    }
    pause_session(session, actor=AGENT)  # the change commits whatever the layer does
    settings.CHANNEL_LAYERS = layers

    [row] = rows(type="session.lifecycle", payload__session_id=str(session.pk))
    assert row.relayed_at is None
    assert Session.objects.get(pk=session.pk).status == "paused"
    assert heard.receive(timeout=QUIET) is None

    # Within the grace period the job leaves it (its own on_commit relay may still be running).
    assert relay_pending(now=row.created_at + RELAY_GRACE - timedelta(milliseconds=1)) == 0
    assert relay_pending(now=row.created_at + RELAY_GRACE + timedelta(milliseconds=1)) == 1
    row.refresh_from_db()
    assert row.relayed_at is not None
    assert heard.receive_all(QUIET) == [row.payload]
    # Sent once: a second run finds nothing.
    assert relay_pending(now=timezone.now() + RELAY_GRACE) == 0
    assert heard.receive_all(QUIET) == []


# --- After the commit, nothing can fail the change -------------------------------------------


def test_a_relay_that_fails_after_commit_neither_fails_the_change_nor_stops_later_hooks(
    project, listen, monkeypatch
):
    """A database error in the after-commit relay (a dropped connection, a timeout) must not
    turn a committed change into an error the caller would retry, nor drop the hooks after it
    (another event's relay, a snapshot): the row simply waits for the relay job."""
    from django.db import OperationalError

    from core import domain_events

    session = make_session(project)
    task = make_task(project)
    heard = listen(task_group(task.pk))
    real_relay = domain_events.relay_all
    calls = []

    def relay_failing_once(message_ids: list[int]) -> int:
        calls.append(message_ids)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real_relay(message_ids)

    monkeypatch.setattr(domain_events, "relay_all", relay_failing_once)
    with transaction.atomic():
        pause_session(session, actor=AGENT)  # its relay fails
        transition_task(task, "sent_for_review", actor=AGENT)  # its relay runs after

    assert Session.objects.get(pk=session.pk).status == "paused"
    [lifecycle] = rows(type="session.lifecycle")
    [transition] = rows(type="task.transition")
    assert lifecycle.relayed_at is None  # left for the relay job
    assert transition.relayed_at is not None
    assert heard.receive_all(QUIET) == [transition.payload]
    monkeypatch.undo()
    assert relay_pending(now=timezone.now() + RELAY_GRACE) == 1


def test_a_live_notice_that_fails_does_not_fail_the_committed_append(project, monkeypatch):
    """The one-statement append runs its after-commit hooks at once (autocommit): a failing
    notice must not make a durable append look failed (the agent would append it again)."""
    from core import domain_events

    session = make_session(project)

    def broken(groups, message, **kwargs):
        raise RuntimeError("channel layer misconfigured")

    monkeypatch.setattr(domain_events, "send_to_groups", broken)
    result = append_events(session, messages(1), actor=AGENT)
    assert result.head_seq == 1
    with transaction.atomic():
        result = append_events(session, messages(2), actor=AGENT)
    assert result.head_seq == 3
    assert Session.objects.get(pk=session.pk).head_seq == 3


# --- The relay job ---------------------------------------------------------------------------


def test_the_relay_job_sends_what_is_pending_and_drops_sent_rows_past_the_keep_period(
    project, listen
):
    from core.domain_events import OUTBOX_KEEP, drop_relayed
    from core.tasks import relay_outbox

    session = make_session(project)
    heard = listen(session_group(session.pk))
    pause_session(session, actor=AGENT)
    heard.receive_all(QUIET)
    old = timezone.now() - OUTBOX_KEEP - timedelta(minutes=1)
    sent_long_ago = rows()  # the open and the pause, both relayed after their commits
    assert len(sent_long_ago) == 2 and all(m.relayed_at for m in sent_long_ago)
    OutboxMessage.objects.update(created_at=old)
    unsent_long_ago = OutboxMessage.objects.create(
        project=project,
        type="session.lifecycle",
        groups=[session_group(session.pk)],
        payload={"type": "session.lifecycle", "session_id": str(session.pk)},
    )
    OutboxMessage.objects.filter(pk=unsent_long_ago.pk).update(created_at=old)
    sent_recently = OutboxMessage.objects.create(
        project=project, type="session.lifecycle", groups=[], payload={}, relayed_at=timezone.now()
    )

    # The unsent row is sent; then every sent row created before the keep period is dropped,
    # that one included (the period counts from a row's creation); the recent one stays.
    assert relay_outbox() == {"sent": 1, "dropped": 3}
    assert heard.receive_all(QUIET) == [unsent_long_ago.payload]
    assert list(OutboxMessage.objects.values_list("pk", flat=True)) == [sent_recently.pk]
    assert drop_relayed() == 0
    # Bounded: one batch per call.
    for _ in range(3):
        OutboxMessage.objects.create(
            project=project, type="x", groups=[], payload={}, relayed_at=timezone.now()
        )
    OutboxMessage.objects.update(created_at=old)
    assert drop_relayed(batch=2) == 2
    assert OutboxMessage.objects.count() == 2  # the rest for the next run
