"""What the child processes of tests/core/test_outbox_recovery.py run (not collected as tests).

`python -m tests.core.outbox_children crash <session_id>` pauses the session and, once its
transaction has committed, stops dead before the relay: an on_commit hook registered ahead of
the service's own announces "committed" and sleeps until the parent kills the process.
The other functions run in tests.multiproc.run_in_processes children.
"""

import sys
import time
from datetime import timedelta

from tests.multiproc import barrier


def crash_after_commit(session_id: str) -> None:
    from django.db import transaction

    from core.actors import Actor
    from sessions_app.models import Session
    from sessions_app.services.lifecycle import pause_session

    def committed() -> None:
        print("committed", flush=True)
        time.sleep(600)  # killed here: after the commit, before the relay hook runs

    session = Session.objects.get(pk=session_id)
    with transaction.atomic():
        transaction.on_commit(committed)  # hooks run in order: this one before the relay
        pause_session(session, actor=Actor.system("doomed"))
    print("relayed", flush=True)  # never reached


def _meet_on_first_send() -> None:
    """Make this process's first send wait for the other process (tests.multiproc.barrier):
    by then each has taken its rows, so both hold row locks at the same moment."""
    from core import domain_events

    real = domain_events.send_to_groups
    state = {"first": True}

    def send(groups, payload, **kwargs):  # type: ignore[no-untyped-def]
        if state["first"]:
            state["first"] = False
            barrier().wait()
        return real(groups, payload, **kwargs)

    domain_events.send_to_groups = send


def relay_all_pending(batch: int) -> int:
    """relay_pending in small batches until no row is left unsent; how many this one sent."""
    from django.utils import timezone

    from core.domain_events import relay_pending
    from core.models import OutboxMessage

    _meet_on_first_send()
    later = timezone.now() + timedelta(minutes=1)  # every row is past its grace period
    sent = 0
    while OutboxMessage.objects.filter(relayed_at__isnull=True).exists():
        sent += relay_pending(now=later, batch=batch)
    return sent


def relay_one(message_id: int) -> bool:
    """relay_all([message_id]), as two after-commit hooks of two processes would race on one
    row."""
    from core.domain_events import relay_all

    _meet_on_first_send()
    sent = relay_all([message_id]) == 1
    if not sent:
        barrier().wait()  # release the other, which holds the row in its send
    return sent


if __name__ == "__main__":
    import django

    django.setup()
    if sys.argv[1] == "crash":
        crash_after_commit(sys.argv[2])
