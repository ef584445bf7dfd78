"""The live audit log (ws/projects/<id>/audit/): admins only, entries matching the page's
filters inserted on top of its first page, a notice on older pages, and a member demoted
meanwhile disconnected. Real commits on the configured channel layer."""

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from core.actors import Actor
from core.live import CLOSE_NOT_FOUND
from core.models import Membership, Role
from core.services.audit import record_audit
from core.services.members import change_member_role
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_member
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
