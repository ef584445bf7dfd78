"""The TLS settings of the client's connections: for a plain http server, a context that trusts
no certificate (no certificate store is loaded for it, the better part of making a client, and
a TLS connection it should never make would fail); for https, httpx's own verification (its
certificate store); and the caller's `httpx_options` over both. No server needed."""

import asyncio
import ssl

import pytest
from switchboard_client import AsyncClient, Client
from switchboard_client._core import no_tls_context


def context_of(client):
    return client._http._transport._pool._ssl_context


@pytest.mark.parametrize("flavour", [Client, AsyncClient])
def test_a_client_of_an_http_server_trusts_no_certificate(flavour):
    client = flavour("http://sb.example:8000", "key")
    context = context_of(client)
    assert context is no_tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0
    close(client)


@pytest.mark.parametrize("flavour", [Client, AsyncClient])
def test_a_client_of_an_https_server_verifies_against_certifi(flavour):
    client = flavour("https://sb.example", "key")
    context = context_of(client)
    assert context is not no_tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0
    close(client)


def test_the_callers_httpx_options_win():
    own = ssl.create_default_context()
    client = Client("http://sb.example:8000", "key", httpx_options={"verify": own})
    assert context_of(client) is own
    close(client)


def close(client):
    if isinstance(client, AsyncClient):
        asyncio.run(client.aclose())
    else:
        client.close()
