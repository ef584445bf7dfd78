"""The wire format's pure parts: signing and verifying, backoff, which URLs are refused."""

import random
import time

import pytest

from core.webhooks import (
    TargetRefused,
    backoff_seconds,
    check_target,
    envelope,
    signature_header,
    verify_signature,
)

SECRET = "whsec_test"
BODY = b'{"id":"d-1","type":"session.paused"}'


def test_it_verifies_its_own_signature():
    assert verify_signature(SECRET, signature_header(SECRET, BODY), BODY)
    assert verify_signature(SECRET, signature_header(SECRET, BODY), BODY.decode())


@pytest.mark.parametrize(
    "secret, body",
    [("whsec_other", BODY), (SECRET, BODY + b" "), (SECRET, BODY.replace(b"d-1", b"d-2"))],
)
def test_it_rejects_another_secret_or_a_changed_body(secret, body):
    assert not verify_signature(secret, signature_header(SECRET, BODY), body)


def test_it_rejects_a_timestamp_outside_the_tolerance():
    old = int(time.time()) - 301
    header = signature_header(SECRET, BODY, timestamp=old)
    assert not verify_signature(SECRET, header, BODY)
    assert verify_signature(SECRET, header, BODY, tolerance=600)
    # The timestamp is signed: moving it forward breaks the signature.
    forged = header.replace(f"t={old}", f"t={int(time.time())}")
    assert not verify_signature(SECRET, forged, BODY)


@pytest.mark.parametrize("header", ["", "v1=abc", "t=1", "t=x,v1=abc", "garbage"])
def test_it_rejects_malformed_headers(header):
    assert not verify_signature(SECRET, header, BODY)


def test_it_accepts_any_of_several_v1_signatures():
    header = signature_header(SECRET, BODY)
    t = header.split(",")[0]
    assert verify_signature(SECRET, f"{t},v1=00,{header.split(',')[1]}", BODY)


def test_the_envelope_is_the_same_bytes_every_time():
    from datetime import UTC, datetime

    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    a = envelope("d-1", "session.paused", created, {"b": 1, "a": 2})
    b = envelope("d-1", "session.paused", created, {"a": 2, "b": 1})
    assert a == b
    assert a.startswith(b'{"created":"2026-01-02T03:04:05+00:00","data":{"a":2,"b":1}')


def test_backoff_grows_and_its_jitter_is_bounded():
    rng = random.Random(7)
    for attempt in range(1, 12):
        step = min(3600, 10 * 2 ** (attempt - 1))
        delays = [
            backoff_seconds(attempt, base_ms=10_000, max_ms=3_600_000, rng=rng) for _ in range(200)
        ]
        assert all(step / 2 <= d <= step for d in delays), attempt
        assert max(delays) - min(delays) > step / 4  # it does vary (jitter)


@pytest.mark.parametrize(
    "url, why",
    [
        ("ftp://example.com/x", "http:// or https://"),
        ("https://", "host name"),
        ("example.com/hooks", "http:// or https://"),
        ("https://user:pw@example.com/", "user name and password"),
        ("http://localhost:9000/", "this machine"),
        ("http://127.0.0.1/", "loopback, private"),
        ("http://10.1.2.3/", "loopback, private"),
        ("http://169.254.169.254/latest/meta-data", "loopback, private"),
        ("http://[::1]/", "loopback, private"),
        ("http://[::ffff:192.168.0.1]/", "loopback, private"),
        ("http://metadata.google.internal/", "internal name"),
        ("https://example.com:99999/", "not a valid URL"),
    ],
)
def test_it_refuses_urls_it_will_not_post_to(url, why):
    with pytest.raises(TargetRefused, match=why):
        check_target(url, allow_private=False)


def test_it_accepts_public_urls_and_private_ones_when_allowed():
    assert check_target(" https://hooks.example.com/in?x=1 ", allow_private=False).url == (
        "https://hooks.example.com/in?x=1"
    )
    target = check_target("http://127.0.0.1:8080/h", allow_private=True)
    assert target.url == "http://127.0.0.1:8080/h"
