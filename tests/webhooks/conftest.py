import socket

import pytest

from core.actors import Actor
from core.services.webhooks import create_endpoint
from tests.factories import make_project, make_session

from .receiver import receiver

ADMIN = Actor.system("tests")


@pytest.fixture
def recv():
    with receiver() as r:
        yield r


@pytest.fixture
def project(db):
    return make_project()


def endpoint_for(project, url, events=("session.paused",), **kwargs):
    """An endpoint through the service; returns (endpoint, secret)."""
    return create_endpoint(project, url=url, events=list(events), actor=ADMIN, **kwargs)


def paused_session(project):
    from sessions_app.services.lifecycle import pause_session

    session = make_session(project)
    pause_session(session, actor=ADMIN, reason="ask a human")
    return session


def resolving(monkeypatch, names: dict[str, str | None]) -> None:
    """socket.getaddrinfo answering for `names` (an address, or None: no such name) without
    DNS, the machine having none; every other name as before."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in names:
            return real(host, port, *args, **kwargs)
        if names[host] is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (names[host], port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
