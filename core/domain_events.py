"""Domain events: the one way a change leaves the service that made it.

Services publish a typed event (sessions_app.domain_events, tasks_app.domain_events) inside
the transaction of the change. Two kinds:

* Outboxed (`outboxed = True`): lifecycle changes, task transitions, step changes, links, and
  the handoff records to come. `publish` writes an OutboxMessage row in the caller's
  transaction, so the notice exists exactly when the change does. After commit the row is
  fanned out to the channel layer (live pages) and marked; the `core.relay_outbox` job re-sends
  any row a crash or a Redis outage left unsent.
* Live-only (`outboxed = False`): high-volume notices (events appended), whose readers can
  always catch up from the log itself. Sent best-effort after commit, so the append's hot path
  gains no write.

An outboxed event whose `webhook_event()` names a webhook event (`session.paused`,
`handoff.created`, …) also gets one pending WebhookDelivery per subscribed endpoint of its
project, inserted in the same transaction (core.services.webhooks).

Nothing is announced for a write that rolled back: every send waits for `on_commit`.
"""

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from celery import current_app  # type: ignore[import-untyped]
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from . import storage
from .models import OutboxMessage
from .realtime import project_list_group, send_to_groups, sends_after_response

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DomainEvent:
    """Base of every domain event: a project, a `type` name, and the groups that hear it."""

    type: ClassVar[str]
    outboxed: ClassVar[bool] = False

    project_id: int

    def groups(self) -> list[str]:
        raise NotImplementedError

    def payload(self) -> dict[str, Any]:
        """The JSON message: the event's fields plus its `type` (channels dispatches on it)."""
        return {"type": self.type, **asdict(self)}

    def webhook_event(self) -> str | None:
        """The webhook event name this change is delivered as (core.webhooks.EVENTS), or None.
        Only outboxed events may have one: their deliveries commit with the change."""
        return None

    def webhook_data(self) -> dict[str, Any]:
        """The webhook's `data`: the payload without the channel `type` and the internal
        project id (an endpoint belongs to one project)."""
        body = self.payload()
        body.pop("type", None)
        body.pop("project_id", None)
        return body


# Reactions of a floor above to an outboxed event, run in the change's transaction right after
# its outbox row (outbox_written): registered by an app's ready() (tasks_app: a fork keeps its
# parent's task links), so the app that publishes never imports the one that reacts.
_REACTIONS: dict[str, list[Callable[[Any], None]]] = {}


def react_to(event_type: str, reaction: Callable[[Any], None]) -> None:
    """Run `reaction(event)` in the transaction of every outboxed `event_type` event written."""
    reactions = _REACTIONS.setdefault(event_type, [])
    if reaction not in reactions:
        reactions.append(reaction)


def publish(event: DomainEvent) -> None:
    """Announce `event` once the current transaction commits (at once in autocommit).

    An outboxed event must be published inside the transaction of the change it reports:
    its row commits with the change or not at all.
    """
    publish_all([event])


def publish_all(events: Sequence[DomainEvent]) -> None:
    """`publish` for several events of one change, in order: the outboxed ones are written in
    one INSERT and relayed together after commit (a retention batch deleting a hundred
    sessions writes one statement, not a hundred, and claims their rows in one)."""
    outboxed: list[tuple[DomainEvent, OutboxMessage]] = []
    for event in events:
        payload = event.payload()
        json.dumps(payload)  # fail at the source if a payload is not JSON-safe
        groups = event.groups()
        if event.outboxed:
            outboxed.append((event, _outbox_row(event, payload, groups)))
            continue
        if event.webhook_event() is not None:
            raise RuntimeError(f"{event.type} has a webhook name but is not outboxed")
        # Live-only: not waited for (the request answers before Redis does), sent in order.
        # Robust hooks: the change has committed whatever happens after it. An error here
        # must not reach the caller (who would retry a write that is durable) nor skip the
        # hooks registered after this one; a relay that failed leaves its rows to
        # `relay_pending`.
        transaction.on_commit(_live_send(groups, payload), robust=True)
    if not outboxed:
        return
    if not connection.in_atomic_block:
        names = ", ".join(event.type for event, _ in outboxed)
        raise RuntimeError(f"publish({names}) must run inside the change's transaction")
    OutboxMessage.objects.bulk_create([message for _, message in outboxed])
    _written(outboxed)


def _live_send(groups: list[str], payload: dict[str, Any]) -> Callable[[], None]:
    """The after-commit hook sending one live-only notice (a function with a name: Django
    logs a robust hook's failure by its __qualname__)."""

    def send_live_notice() -> None:
        send_to_groups(groups, payload, wait=False)

    return send_live_notice


def outbox_message(event: DomainEvent) -> OutboxMessage:
    """The unsaved outbox row of an outboxed event without a webhook, for a caller that inserts
    it in the same statement as its change (core.storage.insert_in_one_statement, which makes
    the two commit together even in autocommit); then call `outbox_written`."""
    if not event.outboxed or event.webhook_event() is not None:
        raise RuntimeError(f"{event.type}: only outboxed events without webhooks go this way")
    payload = event.payload()
    json.dumps(payload)  # fail at the source if a payload is not JSON-safe
    return _outbox_row(event, payload, event.groups())


def _outbox_row(event: DomainEvent, payload: dict[str, Any], groups: list[str]) -> OutboxMessage:
    return OutboxMessage(
        project_id=event.project_id, type=event.type, groups=groups, payload=payload
    )


def outbox_written(event: DomainEvent, message: OutboxMessage) -> None:
    """After `event`'s outbox row is inserted: its webhook deliveries (same transaction), then
    the relay on commit (at once in autocommit), and the reactions registered for its type
    (react_to), in the same transaction."""
    _written([(event, message)])


def _written(outboxed: list[tuple[DomainEvent, OutboxMessage]]) -> None:
    """In the transaction of inserted outbox rows: each event's reactions (react_to) and webhook
    deliveries (one statement per project and webhook name: a retention batch deleting a
    hundred sessions fans out their `session.deleted` at once), then one after-commit relay of
    all the rows."""
    webhooks: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for event, _ in outboxed:
        for reaction in _REACTIONS.get(event.type, ()):
            reaction(event)
        webhook = event.webhook_event()
        if webhook is not None:
            webhooks.setdefault((event.project_id, webhook), []).append(event.webhook_data())
    for (project_id, webhook), payloads in webhooks.items():
        enqueue_deliveries_of(project_id, webhook, payloads)
    message_ids = [message.pk for _, message in outboxed]
    transaction.on_commit(lambda: relay_after_response(message_ids), robust=True)


def enqueue_deliveries(project_id: int, event: str, data: dict[str, Any]) -> int:
    """Insert a pending delivery of `event` for each subscribed active endpoint of the project,
    in the caller's transaction; after commit, kick the delivery job. Returns how many."""
    return enqueue_deliveries_of(project_id, event, [data])


def enqueue_deliveries_of(project_id: int, event: str, payloads: list[dict[str, Any]]) -> int:
    """enqueue_deliveries for several changes of one kind, in one statement."""
    created = storage.insert_webhook_deliveries_of(project_id, event, payloads, now=timezone.now())
    if created:
        transaction.on_commit(kick_delivery_job, robust=True)
    return created


def kick_delivery_job() -> None:
    """Ask a worker to run core.deliver_webhooks now (by name: core.tasks is a floor above).
    Without retries: with the broker down, beat's next run picks the rows up."""
    current_app.send_task(
        "core.deliver_webhooks", queue=settings.SWITCHBOARD_WEBHOOK_QUEUE, retry=False
    )


# Outbox rows committed while this thread serves a request under relays_after_response are
# relayed once its response has been handed to the server: a fork or a pause answers without
# waiting for the relay's claim, its Redis send and its commit. The rows are durable already;
# if the process dies first, the relay job sends them (RELAY_GRACE), as after any lost relay.
_serving = threading.local()


@contextmanager
def relays_after_response() -> Iterator[None]:
    """Hold back the relays of what commits inside the block, and its live notices
    (realtime.sends_after_response), and send them when it ends (a server wraps a request's
    whole exchange in it, its response's hand-off and close included: config.wsgi_bridge, and
    config.wsgi until a WSGI server closes the response it has written).
    Elsewhere (the test client, Celery, the shell) both go at commit."""
    outer = getattr(_serving, "relays", None)
    held: list[int] = []
    _serving.relays = held
    try:
        # The block's live notices go first when it ends (in the order made), then its relays.
        with sends_after_response():
            yield
    finally:
        _serving.relays = outer
        if held:
            try:
                relay_all(held)
            except Exception:  # the rows wait for the relay job; the response has gone already
                logger.exception("relay of %s outbox rows after the response failed", len(held))
            # The request's own close (request_finished) gave the connection back already;
            # the relay took it again: give it back the same way.
            close_old_connections()


def relay_after_response(message_ids: list[int]) -> None:
    """Relay now, or when the enclosing relays_after_response block ends."""
    held = getattr(_serving, "relays", None)
    if held is None:
        relay_all(message_ids)
    else:
        held.extend(message_ids)


def relay_all(message_ids: list[int]) -> int:
    """Fan outbox rows out to their groups, in id order, and mark them sent; rows another relay
    holds or has sent are skipped. Returns how many were sent.

    Marked sent first (one statement, the rows locked), un-marked together if a send fails:
    the relay job then sends them all again (delivery is at least once; a page that hears a
    notice twice renders the same thing twice)."""
    with transaction.atomic():
        claimed = storage.claim_unsent_outbox_messages(message_ids, timezone.now())
        for groups, payload in claimed:
            if not send_to_groups(groups, payload):
                transaction.set_rollback(True)
                return 0  # left unsent: the relay job tries again
    return len(claimed)


# An unsent row younger than this is probably being relayed right after its commit.
RELAY_GRACE = timedelta(seconds=5)
RELAY_BATCH = 500
# Sent rows are kept this long (for inspection), then dropped.
OUTBOX_KEEP = timedelta(days=7)


def relay_pending(*, now: datetime | None = None, batch: int = RELAY_BATCH) -> int:
    """Send outbox rows that were committed but never sent (a crash between commit and send,
    or the channel layer down); oldest first, in one bounded batch. Several workers may run
    it at once: each takes rows with SKIP LOCKED. Returns how many rows were sent."""
    now = now or timezone.now()
    sent = 0
    with transaction.atomic():
        pending = list(
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(relayed_at__isnull=True, created_at__lt=now - RELAY_GRACE)
            .order_by("id")[:batch]
        )
        for message in pending:
            if not send_to_groups(message.groups, message.payload):
                break  # the layer is down: leave the rest for the next run
            message.relayed_at = timezone.now()
            message.save(update_fields=["relayed_at"])
            sent += 1
    return sent


def drop_relayed(*, now: datetime | None = None, batch: int = 5000) -> int:
    """Delete sent outbox rows older than OUTBOX_KEEP, one bounded batch."""
    now = now or timezone.now()
    old = OutboxMessage.objects.filter(
        relayed_at__isnull=False, created_at__lt=now - OUTBOX_KEEP
    ).values_list("pk", flat=True)[:batch]
    deleted, _ = OutboxMessage.objects.filter(pk__in=list(old)).delete()
    return deleted


@dataclass(frozen=True)
class AuditRecorded(DomainEvent):
    """An audit row was written: the audit log page of its project shows it live. Live-only
    (the page reads what it missed from the table itself)."""

    type: ClassVar[str] = "audit.recorded"

    entry_id: int

    def groups(self) -> list[str]:
        return [project_list_group(self.project_id, "audit")]
