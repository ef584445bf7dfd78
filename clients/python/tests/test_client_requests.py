"""The URL a call sends: ids percent-encoded in the path, query values encoded as httpx encodes
`params=` (repeated keys in order, `+` for a space), no `?` without a query. Through a mock
transport: no server needed."""

from datetime import UTC, datetime

import httpx
from switchboard_client import Client

EMPTY_SLICE = {"head_seq": 0, "has_more": False, "compacted": [], "events": []}
EMPTY_PAGE = {"sessions": [], "next_cursor": None}


def sent_urls(call):
    urls = []

    def answer(request):
        urls.append(str(request.url))
        return httpx.Response(
            200, json=EMPTY_PAGE if request.url.path == "/api/v1/sessions" else EMPTY_SLICE
        )

    with Client("http://sb.example:8000/", "key", transport=httpx.MockTransport(answer)) as sb:
        call(sb)
    return urls


def test_a_slice_s_url_encodes_the_id_and_repeats_keys():
    urls = sent_urls(
        lambda sb: sb.events(
            "a/b?c#d é",
            kind=["message", "tool_call"],
            key=["a b&c=d/é", "x+y%25#z"],
            key_prefix="oai:",
            order="desc",
            limit=58,
        )
    )
    assert urls == [
        "http://sb.example:8000/api/v1/sessions/a%2Fb%3Fc%23d%20%C3%A9/events"
        "?limit=58&kind=message&kind=tool_call&order=desc"
        "&key=a+b%26c%3Dd%2F%C3%A9&key=x%2By%2525%23z&key_prefix=oai%3A"
    ]


def test_a_call_without_a_query_has_no_question_mark():
    assert sent_urls(lambda sb: sb.events("s1")) == [
        "http://sb.example:8000/api/v1/sessions/s1/events"
    ]


def test_booleans_datetimes_and_metadata_parameters_are_encoded():
    when = datetime(2026, 11, 27, 19, 40, tzinfo=UTC)
    urls = sent_urls(
        lambda sb: sb.list_sessions(
            has_pending_handoff=False, created_after=when, metadata={"team x": "a&b"}
        )
    )
    assert len(urls) == 1
    assert urls[0].startswith("http://sb.example:8000/api/v1/sessions?")
    assert sorted(urls[0].split("?", 1)[1].split("&")) == sorted(
        [
            "has_pending_handoff=false",
            "created_after=2026-11-27T19%3A40%3A00%2B00%3A00",
            "metadata.team+x=a%26b",
        ]
    )
