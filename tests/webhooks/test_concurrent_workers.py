"""Several OS processes running the delivery batch at once send each delivery exactly once
(SKIP LOCKED plus the lease), against a real receiver."""

import pytest

from core.models import DeliveryStatus, WebhookAttempt, WebhookDelivery
from tests.multiproc import run_in_processes

from .children import deliver_until_done
from .conftest import endpoint_for
from .receiver import receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PROCESSES = 4
SESSIONS = 60


def test_four_processes_deliver_each_delivery_exactly_once(project):
    from sessions_app.services.lifecycle import pause_session
    from tests.factories import make_session

    from .conftest import ADMIN

    with receiver(delay=0.01) as recv:
        for _ in range(2):
            endpoint_for(project, recv.url)
        for _ in range(SESSIONS):
            pause_session(make_session(project), actor=ADMIN)
        total = 2 * SESSIONS
        assert WebhookDelivery.objects.count() == total

        batches = run_in_processes(deliver_until_done, [()] * PROCESSES)

        ids = [r.headers["switchboard-delivery"] for r in recv.requests]
        assert len(ids) == total and len(set(ids)) == total  # each once, none twice
        assert sum(1 for b in batches if b) >= 2  # the work was actually shared
        assert WebhookDelivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count() == total
        assert WebhookAttempt.objects.count() == total
        assert set(WebhookDelivery.objects.values_list("attempts", flat=True)) == {1}
