"""find_sessions and list_sessions(include_events=...) through the sync Client against a live
server: several sessions, their state and their last events in one request (issue 27 §2)."""

import httpx
import pytest
from switchboard_client import Client, InvalidInput, RetryPolicy
from switchboard_client.models import Event

FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)


def _counted(server_url: str, api_key: str) -> tuple[Client, list[httpx.Request]]:
    sent: list[httpx.Request] = []
    client = Client(
        server_url, api_key, retry=FAST, httpx_options={"event_hooks": {"request": [sent.append]}}
    )
    return client, sent


def test_it_finds_several_sessions_with_state_and_last_events_in_one_request(server_url, api_key):
    sb, sent = _counted(server_url, api_key)
    with sb:
        chat = sb.open_session("bot", external_id="chat")
        sb.append(chat.id, [{"kind": "note", "content": {"n": n}} for n in range(12)])
        sb.append(chat.id, [{"kind": "state", "content": {"stage": "triage"}}])
        shared = sb.open_session("bot", external_id="shared")
        sb.append(shared.id, [{"kind": "state", "content": {"lang": "en"}}])
        del sent[:]

        found = sb.find_sessions(
            ["chat", "shared", "missing"], include_state=True, include_events=5
        )

        assert len(sent) == 1
        assert set(found) == {"chat", "shared"}
        assert found["chat"].state == {"stage": "triage"}
        assert found["shared"].state == {"lang": "en"}
        events = found["chat"].events
        assert events is not None and all(isinstance(e, Event) for e in events)
        assert [e.seq for e in events] == [9, 10, 11, 12, 13]  # the last five, oldest first
        assert events[-1].content == {"stage": "triage"}
        assert found["chat"].events_has_more is True
        assert found["shared"].events_has_more is False
        # Without include_events, no events.
        assert sb.find_sessions(["chat"])["chat"].events is None
        assert sb.find_sessions([]) == {}


def test_too_many_ids_are_refused(sb):
    with pytest.raises(InvalidInput):
        sb.find_sessions([f"id-{n}" for n in range(21)])
