"""API rate limiting: on by default, the limit headers on every counted response, 429 with
Retry-After in the error shape past the limit, and signal-token requests counted per task.

The clock is frozen (time_machine) at 30 s into a minute, so the fixed one-minute window holds
every request of a test and its reset is exactly 30 s away.
"""

from datetime import UTC, datetime, timedelta

import time_machine
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings

from core.ratelimit import API_PERIOD, api_key_bucket, counter
from sessions_app.models import Session
from tasks_app.models import TaskSignal
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_session
from tests.tasks_app.helpers import assert_error

HALF_PAST = datetime(2026, 3, 2, 12, 0, 30, tzinfo=UTC)


def test_it_limits_each_key_by_default_and_says_so_in_the_headers(api):
    # tests/settings.py keeps the shipped default: this is what a fresh install enforces.
    assert settings.SWITCHBOARD_API_RATE_PER_MINUTE == 60000
    with time_machine.travel(HALF_PAST, tick=False):
        first = api.get("/sessions")
        second = api.get("/sessions")
    assert first.status_code == 200, first.content
    assert first["RateLimit-Limit"] == "60000"
    assert first["RateLimit-Remaining"] == "59999"
    assert first["RateLimit-Reset"] == "30"
    assert second["RateLimit-Remaining"] == "59998"


def test_it_sends_the_headers_on_error_answers_too(api):
    with time_machine.travel(HALF_PAST, tick=False):
        response = api.get("/sessions/00000000-0000-0000-0000-000000000000")
    assert_error(response, 404, "not_found")
    assert response["RateLimit-Limit"] == "60000"
    assert response["RateLimit-Remaining"] == "59999"


# What one LangGraph process made in a minute (issue 24): a busy agent, not a runaway one.
BUSY_AGENT_PROCESS_PER_MINUTE = 8500


def test_one_busy_agent_process_is_not_throttled_by_default(api, api_key):
    key, _ = api_key
    with time_machine.travel(HALF_PAST, tick=False):
        counter_key, _, timeout = counter(api_key_bucket(key.prefix).name, API_PERIOD)
        cache.set(counter_key, BUSY_AGENT_PROCESS_PER_MINUTE - 1, timeout)  # its minute so far
        response = api.get("/sessions")
    assert response.status_code == 200, response.content
    assert int(response["RateLimit-Remaining"]) == 60000 - BUSY_AGENT_PROCESS_PER_MINUTE


@override_settings(SWITCHBOARD_API_RATE_PER_MINUTE=3)
def test_it_answers_429_with_retry_after_past_a_low_limit_and_writes_nothing(api, project):
    session = make_session(project)
    other = ApiClient(make_api_key(project, name="second")[1])
    url = f"/sessions/{session.pk}/events"
    with time_machine.travel(HALF_PAST, tick=False):
        statuses = [api.post(url, {"events": [{"kind": "note"}]}).status_code for _ in range(3)]
        refused = api.post(url, {"events": [{"kind": "note"}]})
        other_key = other.get(f"/sessions/{session.pk}")
    assert statuses == [201, 201, 201]
    error = assert_error(refused, 429, "rate_limited")
    assert error["detail"] == {"retry_after": 30}
    assert "API key" in error["message"]
    assert refused["Retry-After"] == "30"
    assert refused["RateLimit-Limit"] == "3"
    assert refused["RateLimit-Remaining"] == "0"
    assert refused["RateLimit-Reset"] == "30"
    assert Session.objects.get(pk=session.pk).head_seq == 3  # the refused append wrote nothing
    # Another key of the same project has its own count.
    assert other_key.status_code == 200
    assert other_key["RateLimit-Remaining"] == "2"
    # The next window starts afresh.
    with time_machine.travel(HALF_PAST + timedelta(seconds=60), tick=False):
        assert api.post(url, {"events": [{"kind": "note"}]}).status_code == 201


@override_settings(SWITCHBOARD_API_RATE_PER_MINUTE=0)
def test_it_counts_nothing_when_the_rate_is_zero(api):
    response = api.get("/sessions")
    assert response.status_code == 200
    assert "RateLimit-Limit" not in response


@override_settings(SWITCHBOARD_SIGNAL_RATE_PER_MINUTE=2)
def test_it_counts_signal_token_requests_per_task_and_not_against_the_key(api):
    webhook = ApiClient(None)
    with time_machine.travel(HALF_PAST, tick=False):
        first = api.post("/tasks", {"workflow": "document_approval"}).json()
        second = api.post("/tasks", {"workflow": "document_approval"}).json()
        key_before = api.get(f"/tasks/{first['id']}")

        def signal(task, name):
            return webhook.post(
                f"/tasks/{task['id']}/signals/{name}",
                {"payload": {}},
                HTTP_X_SIGNAL_TOKEN=task["signal_token"],
            )

        a1, a2, a3 = signal(first, "one"), signal(first, "two"), signal(first, "three")
        b1 = signal(second, "one")
        key_after = api.get(f"/tasks/{first['id']}")

    assert [a1.status_code, a2.status_code] == [202, 202]
    assert [a1["RateLimit-Limit"], a1["RateLimit-Remaining"]] == ["2", "1"]
    assert a2["RateLimit-Remaining"] == "0"
    error = assert_error(a3, 429, "rate_limited")
    assert "task" in error["message"]
    assert a3["Retry-After"] == "30"
    assert TaskSignal.objects.filter(task_id=first["id"]).count() == 2  # the third is not stored
    # The other task's token has its own bucket.
    assert b1.status_code == 202
    assert [b1["RateLimit-Limit"], b1["RateLimit-Remaining"]] == ["2", "1"]
    # The key's bucket saw only the key's own requests (the two reads), none of the signals.
    assert key_before["RateLimit-Limit"] == "60000"
    assert int(key_before["RateLimit-Remaining"]) - int(key_after["RateLimit-Remaining"]) == 1
