"""The live audit log (ws/projects/<id>/audit/): admins only, entries matching the page's
filters inserted on top of its first page, a notice on older pages, a socket joining after
entries were recorded since its page's render catching up on them, and a member demoted
meanwhile disconnected. Real commits on the configured channel layer."""

import re
from datetime import timedelta
from html import unescape
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import Client
from django.utils import timezone

from core.actors import Actor
from core.live import CLOSE_NOT_FOUND
from core.models import AuditEntry, Membership, Role
from core.services.audit import record_audit
from core.services.members import change_member_role
from switchboard.console.views import AUDIT_PER_PAGE
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_member
from tests.realtime.test_list_catch_up import frames_on_joining
from tests.realtime.test_list_groups import QUIET, TIMEOUT, cookie_for, socket

pytestmark = pytest.mark.django_db(transaction=True)


def entry(team, action: str = "session.export", target_type: str = "session") -> int:
    return record_audit(
        team.project,
        actor=Actor.system("tests"),
        action=action,
        target_type=target_type,
        target_id="x",
    ).pk


def test_only_admins_may_listen(team: Team):
    cookies = {who: cookie_for(getattr(team, who)) for who in ("viewer", "operator", "outsider")}

    async def scenario():
        for who, cookie in cookies.items():
            ws = socket(f"/ws/projects/{team.project.pk}/audit/", cookie)
            connected, code = await ws.connect()
            assert not connected and code == CLOSE_NOT_FOUND, who

    async_to_sync(scenario)()


def test_matching_entries_arrive_on_the_first_page_and_others_do_not(team: Team):
    cookie = cookie_for(team.admin)

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/audit/?action=api_key.revoke", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(entry)(team, "session.export")
        assert await ws.receive_nothing(timeout=QUIET)
        wanted = await sync_to_async(entry)(team, "api_key.revoke", "api_key")
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert 'hx-swap-oob="afterbegin:#audit-rows"' in frame
        assert f'id="audit-{wanted}"' in frame
        assert "session.export" not in frame
        await ws.disconnect()

    async_to_sync(scenario)()


def test_an_older_page_gets_a_notice_and_a_demoted_admin_is_disconnected(team: Team):
    cookie = cookie_for(team.admin)
    first = entry(team)
    make_member(team.project, Role.ADMIN)  # so the admin may step down

    async def scenario():
        ws = socket(f"/ws/projects/{team.project.pk}/audit/?cursor={first + 1}", cookie)
        assert (await ws.connect())[0]
        await sync_to_async(entry)(team)
        frame = await ws.receive_from(timeout=TIMEOUT)
        assert 'id="audit-live-notice"' in frame and "audit-row" not in frame
        mine = await sync_to_async(Membership.objects.get)(project=team.project, user=team.admin)
        await sync_to_async(change_member_role)(mine, role=Role.VIEWER, actor=Actor.system("t"))
        output = await ws.receive_output(timeout=TIMEOUT)
        assert output == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}

    async_to_sync(scenario)()


def audit_page_socket(team: Team, query: str = "") -> str:
    """The audit log page's socket URL, as the page renders it."""
    client = Client()
    client.force_login(team.admin)
    page = client.get(f"/p/{team.project.pk}/audit/?{query}").content.decode()
    return unescape(re.search(r'id="audit-results"[^>]*ws-connect="([^"]+)"', page).group(1))


def test_a_socket_joining_late_gets_the_entries_recorded_since_its_pages_render(team: Team):
    shown = entry(team, "api_key.revoke", "api_key")
    path = audit_page_socket(team, "action=api_key.revoke")
    query = parse_qs(urlsplit(path).query)
    assert query["shown"] == [str(shown)] and query["action"] == ["api_key.revoke"]
    # Recorded after the render, before the socket joins: no notice reaches the page.
    missed = entry(team, "api_key.revoke", "api_key")
    filtered_out = entry(team, "session.export")

    frame = frames_on_joining(path, cookie_for(team.admin))
    assert 'hx-swap-oob="afterbegin:#audit-rows"' in frame
    assert f'id="audit-{missed}"' in frame
    # Neither the entry the page shows nor one its filters leave out.
    assert f'id="audit-{shown}"' not in frame and f'id="audit-{filtered_out}"' not in frame


def test_an_older_page_joining_late_gets_the_notice(team: Team):
    first = entry(team)
    entry(team)
    path = audit_page_socket(team, f"cursor={first + 1}")
    entry(team)

    frame = frames_on_joining(path, cookie_for(team.admin))
    assert 'id="audit-live-notice"' in frame and "audit-row" not in frame


def test_a_socket_whose_page_is_current_or_unnamed_gets_nothing_on_joining(team: Team):
    # A page's worth and one more, recorded well before the render (its second of slack would
    # look at them again): the oldest is on no page the socket names, and is not caught up.
    entries = [entry(team) for _ in range(AUDIT_PER_PAGE + 1)]
    shown = entries[-1]
    AuditEntry.objects.filter(pk__in=entries).update(created_at=timezone.now() - timedelta(hours=1))
    path = audit_page_socket(team)
    assert str(entries[0]) not in parse_qs(urlsplit(path).query)["shown"][0].split(",")
    base = f"/ws/projects/{team.project.pk}/audit/?"
    bare = base
    forged = base + urlencode({"rendered_at": "yesterday", "shown": str(shown)})
    not_ids = base + urlencode(
        {"rendered_at": (timezone.now() - timedelta(hours=2)).isoformat(), "shown": "1,x"}
    )
    for url in (path, bare, forged, not_ids):
        assert frames_on_joining(url, cookie_for(team.admin)) == "", url
