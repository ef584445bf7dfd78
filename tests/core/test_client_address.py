"""core.client_address: X-Forwarded-For is believed only from a trusted proxy, read from the
right, and the first address that is not a trusted proxy is the client's (issue 23, defect 3).
The sign-in throttle's use of it: tests/dashboard/test_sign_in_throttle.py; real servers:
tests/dashboard/test_sign_in_servers.py."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory

from config import settings as config_settings
from core.client_address import client_address, decide

PROXIES = ["10.0.0.0/8", "192.0.2.1", "2001:db8::/32"]


def test_it_is_the_connection_with_no_trusted_proxies():
    assert decide("198.51.100.7", "203.0.113.1", []) == "198.51.100.7"


def test_it_ignores_the_header_from_a_connection_that_is_not_a_trusted_proxy():
    assert decide("198.51.100.7", "203.0.113.1", PROXIES) == "198.51.100.7"
    assert decide("127.0.0.1", "203.0.113.1", PROXIES) == "127.0.0.1"


def test_it_takes_the_first_untrusted_address_from_the_right():
    # The client wrote 203.0.113.66 itself; the edge proxy (192.0.2.1) appended the address it
    # was connected from, then an inner proxy (10.2.3.4) appended the edge's.
    assert decide("10.9.9.9", "203.0.113.66, 198.51.100.7, 192.0.2.1, 10.2.3.4", PROXIES) == (
        "198.51.100.7"
    )
    # Several X-Forwarded-For headers arrive joined by commas.
    assert decide("10.9.9.9", "203.0.113.66,198.51.100.7", PROXIES) == "198.51.100.7"


def test_it_reads_cidr_networks_ipv6_ports_and_mapped_addresses():
    assert decide("2001:db8::5", "2001:db9::1", PROXIES) == "2001:db9::1"
    assert decide("10.0.0.1", "[2001:db9::1]:4711", PROXIES) == "2001:db9::1"
    assert decide("10.0.0.1", "198.51.100.7:4711", PROXIES) == "198.51.100.7"
    assert decide("::ffff:10.0.0.1", "198.51.100.7", PROXIES) == "198.51.100.7"
    assert decide("10.0.0.1", "::ffff:198.51.100.7", PROXIES) == "198.51.100.7"


def test_it_is_the_farthest_hop_when_every_hop_is_trusted_and_the_peer_without_a_header():
    assert decide("10.0.0.1", "10.0.0.3, 10.0.0.2", PROXIES) == "10.0.0.3"
    assert decide("10.0.0.1", "", PROXIES) == "10.0.0.1"
    # Something that is no address is no trusted proxy either: it stops the walk.
    assert decide("10.0.0.1", "unknown", PROXIES) == "unknown"


def test_it_reads_the_request_and_the_setting(settings):
    request = RequestFactory().get(
        "/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.66, 198.51.100.7"
    )
    settings.SWITCHBOARD_TRUSTED_PROXIES = []
    assert client_address(request) == "10.0.0.1"
    settings.SWITCHBOARD_TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert client_address(request) == "198.51.100.7"


def test_the_setting_takes_ips_and_networks_and_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("SWITCHBOARD_TRUSTED_PROXIES", " 10.0.0.5, 10.1.0.0/16,::1 ")
    assert config_settings.env_networks("SWITCHBOARD_TRUSTED_PROXIES") == [
        "10.0.0.5/32",
        "10.1.0.0/16",
        "::1/128",
    ]
    monkeypatch.delenv("SWITCHBOARD_TRUSTED_PROXIES")
    assert config_settings.env_networks("SWITCHBOARD_TRUSTED_PROXIES") == []
    for wrong in ("proxy.example.com", "10.1.2.3/16", "*"):
        monkeypatch.setenv("SWITCHBOARD_TRUSTED_PROXIES", wrong)
        with pytest.raises(ImproperlyConfigured, match="SWITCHBOARD_TRUSTED_PROXIES"):
            config_settings.env_networks("SWITCHBOARD_TRUSTED_PROXIES")


def test_nothing_is_trusted_by_default():
    assert config_settings.SWITCHBOARD_TRUSTED_PROXIES == []
