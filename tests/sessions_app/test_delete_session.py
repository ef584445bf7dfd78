"""DELETE /api/v1/sessions/{id}: the whole session goes (events, snapshots, handoffs, task
links, holds …) through retention's own deletion (retention_app.services.deletion), in one
transaction, and nothing of any other session; its external_id is free again. Refused (409)
while it has forks unless with_forks=true, and while a legal hold covers it; audited, announced
to webhooks and to live pages. Agent and admin keys alike; another project's session is 404.
The races with appends, forks and re-creation run in several processes (tests.multiproc)."""

import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import psycopg
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from config.asgi import application
from core.actors import Actor
from core.errors import NotFound
from core.models import AuditEntry, KeyScope, OutboxMessage, WebhookDelivery
from core.services.webhooks import create_endpoint, deliver_due
from handoffs_app.models import Handoff
from handoffs_app.services.handoffs import request_handoff
from retention_app.models import LegalHold, SessionTombstone
from retention_app.services.holds import lift_hold, place_hold
from retention_app.services.jobs import run_job_for_project
from retention_app.services.policies import save_policy
from sessions_app.models import Blob, Event, Session, Snapshot
from sessions_app.services.blobs import store_blobs
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.sessions import fork_session
from sessions_app.services.state import take_snapshot
from tasks_app.models import TaskSession
from tests.conftest import ApiClient
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_api_key, make_project, make_session, make_task
from tests.multiproc import ProcessPool, barrier
from tests.retention.helpers import archived, later
from tests.retention.test_policy import POLICY
from tests.webhooks.receiver import receiver

TESTER = Actor.system("tests")


def fill(session: Session, n: int = 6) -> Session:
    """`n` events (messages and facts), a snapshot at 2, a released hold; the session back."""
    append_events(
        session,
        [
            EventDraft(kind="message", role="user", content={"text": f"m{i}"})
            if i % 2
            else EventDraft(kind="fact", content={"key": f"k{i}", "value": i})
            for i in range(n)
        ],
        actor=TESTER,
    )
    take_snapshot(session, 2, reason="agent")
    store_blobs(session, [b"named by a checkpoint", b"and another"])
    hold, _ = place_hold(session.project, session=session, reason="was held", actor=TESTER)
    lift_hold(hold, actor=TESTER)
    session.refresh_from_db()
    return session


def rows_of(session_id) -> dict[str, int]:
    """How many rows of each kind belong to the session."""
    return {
        "session": Session.objects.filter(pk=session_id).count(),
        "events": Event.objects.filter(session_id=session_id).count(),
        "snapshots": Snapshot.objects.filter(session_id=session_id).count(),
        "handoffs": Handoff.objects.filter(session_id=session_id).count(),
        "task_links": TaskSession.objects.filter(session_id=session_id).count(),
        "holds": LegalHold.objects.filter(session_id=session_id).count(),
        "blobs": Blob.objects.filter(session_id=session_id).count(),
    }


GONE = {
    "session": 0,
    "events": 0,
    "snapshots": 0,
    "handoffs": 0,
    "task_links": 0,
    "holds": 0,
    "blobs": 0,
}


@pytest.fixture(params=[KeyScope.AGENT, KeyScope.ADMIN], ids=["agent-key", "admin-key"])
def keyed(request, project):
    """An API client of the project with a key of either scope, and the key."""
    key, raw = make_api_key(project, scope=request.param)
    return ApiClient(raw), key


def test_it_deletes_the_whole_session_and_nothing_of_the_others(project, keyed):
    api, key = keyed
    doomed = fill(make_session(project, title="doomed", external_id="t-1"))
    kept = fill(make_session(project, title="kept"))
    for session in (doomed, kept):
        request_handoff(session, kind="question", payload={"question": "?"}, actor=TESTER)
    make_task(project, session_ids=[doomed.pk, kept.pk])
    elsewhere = fill(make_session(make_project(), title="another project's"))
    before = {s.pk: rows_of(s.pk) for s in (doomed, kept, elsewhere)}
    assert all(n for n in before[doomed.pk].values())  # something of each kind to delete

    response = api.delete(f"/sessions/{doomed.pk}")

    assert response.status_code == 200, response.content
    assert response.json() == {
        "id": str(doomed.pk),
        "deleted": [str(doomed.pk)],
        "events_deleted": before[doomed.pk]["events"],
    }
    assert rows_of(doomed.pk) == GONE
    assert rows_of(kept.pk) == before[kept.pk]
    assert rows_of(elsewhere.pk) == before[elsewhere.pk]
    assert api.get(f"/sessions/{doomed.pk}").status_code == 404
    assert api.delete(f"/sessions/{doomed.pk}").status_code == 404  # once only
    tombstone = SessionTombstone.objects.get(session_id=doomed.pk)
    assert (tombstone.external_id, tombstone.title, tombstone.run) == ("t-1", "doomed", None)
    assert (tombstone.events_deleted, tombstone.snapshots_deleted) == (
        before[doomed.pk]["events"],
        before[doomed.pk]["snapshots"],
    )
    # Audited once, by the key, with what went.
    (entry,) = AuditEntry.objects.filter(action="session.delete", target_id=str(doomed.pk))
    assert entry.actor == f"key:{key.prefix}" and entry.project_id == project.pk
    assert entry.detail["events"] == before[doomed.pk]["events"]
    assert entry.detail["forks"] == 0


def test_its_external_id_opens_a_new_session_afterwards(api):
    first = api.post("/sessions", {"agent": "bot", "external_id": "ticket-9"}).json()["id"]
    api.post(f"/sessions/{first}/events", {"events": [{"kind": "note", "content": {}}]})

    assert api.delete(f"/sessions/{first}").status_code == 200
    assert not Session.objects.filter(external_id="ticket-9").exists()
    again = api.post("/sessions", {"agent": "bot", "external_id": "ticket-9"})

    assert again.status_code == 201, again.content
    body = again.json()
    assert body["id"] != first and body["head_seq"] == 0 and body["external_id"] == "ticket-9"
    (session,) = Session.objects.filter(external_id="ticket-9")
    assert str(session.pk) == body["id"]
    assert api.post("/sessions", {"agent": "bot", "external_id": "ticket-9"}).status_code == 200


def test_a_fork_goes_alone_and_its_parent_keeps_every_event(api, project):
    parent = fill(make_session(project))
    fork = fork_session(parent, at_seq=4, actor=TESTER)
    append_events(fork, [EventDraft(kind="note", content={"own": 1})], actor=TESTER)
    parent_rows = rows_of(parent.pk)

    response = api.delete(f"/sessions/{fork.pk}")

    assert response.status_code == 200 and response.json()["events_deleted"] == 1
    assert rows_of(fork.pk) == GONE
    assert rows_of(parent.pk) == parent_rows  # the fork's history was the parent's rows
    assert api.delete(f"/sessions/{parent.pk}").status_code == 200  # no fork left


def test_it_refuses_a_session_with_forks_unless_with_forks(api, project):
    root = fill(make_session(project))
    first = fork_session(root, at_seq=3, actor=TESTER)
    second = fork_session(root, at_seq=1, actor=TESTER)
    grandchild = fork_session(first, at_seq=2, actor=TESTER)
    append_events(grandchild, [EventDraft(kind="note", content={})], actor=TESTER)
    bystander = fill(make_session(project))
    tree = [root, first, second, grandchild]
    before = {s.pk: rows_of(s.pk) for s in [*tree, bystander]}

    refused = api.delete(f"/sessions/{root.pk}")

    assert refused.status_code == 409, refused.content
    error = refused.json()["error"]
    assert error["code"] == "session_has_forks"
    assert error["detail"] == {
        "session_id": str(root.pk),
        "fork_ids": [str(first.pk), str(second.pk)],
    }
    assert {s.pk: rows_of(s.pk) for s in [*tree, bystander]} == before
    assert api.delete(f"/sessions/{root.pk}?with_forks=false").status_code == 409
    assert api.delete(f"/sessions/{first.pk}").json()["error"]["detail"]["fork_ids"] == [
        str(grandchild.pk)
    ]

    response = api.delete(f"/sessions/{root.pk}?with_forks=true")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["deleted"] == [str(s.pk) for s in tree]  # parents before their forks
    assert body["events_deleted"] == before[root.pk]["events"] + 1
    for session in tree:
        assert rows_of(session.pk) == GONE
    assert rows_of(bystander.pk) == before[bystander.pk]
    assert SessionTombstone.objects.filter(session_id__in=[s.pk for s in tree]).count() == 4
    entries = AuditEntry.objects.filter(action="session.delete")
    assert sorted(entries.values_list("target_id", flat=True)) == sorted(str(s.pk) for s in tree)
    assert entries.get(target_id=str(grandchild.pk)).detail["deleted_with"] == str(root.pk)
    assert entries.get(target_id=str(root.pk)).detail["forks"] == 3


@pytest.mark.parametrize("scope", ["session", "agent", "project"])
def test_it_refuses_a_session_under_a_legal_hold(api, project, scope):
    session = fill(make_session(project, agent="held-agent"))
    target = {"session": {"session": session}, "agent": {"agent": session.agent}, "project": {}}
    hold, _ = place_hold(project, reason="litigation", actor=TESTER, **target[scope])
    before = rows_of(session.pk)

    response = api.delete(f"/sessions/{session.pk}")

    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "legal_hold"
    assert error["detail"] == {"hold_id": hold.pk, "scope": scope, "session_id": str(session.pk)}
    assert rows_of(session.pk) == before
    assert not AuditEntry.objects.filter(action="session.delete").exists()

    lift_hold(hold, actor=TESTER)
    assert api.delete(f"/sessions/{session.pk}").status_code == 200


def test_a_hold_on_a_fork_keeps_the_whole_tree(api, project):
    root = fill(make_session(project))
    fork = fork_session(root, at_seq=2, actor=TESTER)
    hold, _ = place_hold(project, session=fork, reason="evidence", actor=TESTER)

    response = api.delete(f"/sessions/{root.pk}?with_forks=true")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "legal_hold"
    assert response.json()["error"]["detail"]["session_id"] == str(fork.pk)
    assert Session.objects.filter(pk__in=[root.pk, fork.pk]).count() == 2
    assert Event.objects.filter(session=root).count() == root.head_seq


@pytest.mark.django_db(transaction=True)
def test_a_hold_placed_on_a_session_deleted_meanwhile_is_not_found(project, api):
    session = make_session(project)  # read by a request that then waits for the project lock
    assert api.delete(f"/sessions/{session.pk}").status_code == 200

    with pytest.raises(NotFound):
        place_hold(project, session=session, reason="too late", actor=TESTER)
    assert not LegalHold.objects.exists()


def test_another_projects_session_is_not_found(other_api, project):
    session = fill(make_session(project))
    before = rows_of(session.pk)

    response = other_api.delete(f"/sessions/{session.pk}?with_forks=true")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert rows_of(session.pk) == before


def test_it_needs_a_valid_key(project):
    session = make_session(project)
    assert ApiClient(None).delete(f"/sessions/{session.pk}").status_code == 401
    assert ApiClient("sb_live_nope_0123").delete(f"/sessions/{session.pk}").status_code == 401
    assert Session.objects.filter(pk=session.pk).exists()


def test_it_is_announced_to_webhooks_and_delivered(api, api_key, project):
    with receiver() as recv:
        endpoint, _ = create_endpoint(
            project, url=recv.url, events=["session.deleted"], actor=TESTER
        )
        create_endpoint(project, url=recv.url, events=["session.closed"], actor=TESTER)
        session = fill(make_session(project, external_id="ext-7"))

        assert api.delete(f"/sessions/{session.pk}").status_code == 200

        (message,) = OutboxMessage.objects.filter(type="session.deleted")
        assert message.payload["session_id"] == str(session.pk)
        (delivery,) = WebhookDelivery.objects.all()
        expected = {
            "session_id": str(session.pk),
            "events_deleted": session.head_seq,
            "external_id": "ext-7",
            "actor": f"key:{api_key[0].prefix}",
        }
        assert (delivery.endpoint_id, delivery.event, delivery.payload) == (
            endpoint.pk,
            "session.deleted",
            expected,
        )
        assert deliver_due().succeeded == 1
        (request,) = recv.requests
        assert request.json["type"] == "session.deleted" and request.json["data"] == expected


def test_retentions_deletions_are_announced_to_webhooks_too_in_one_statement(project):
    for host in ("a", "b"):
        create_endpoint(
            project, url=f"https://{host}.example.com/h", events=["session.deleted"], actor=TESTER
        )
    save_policy(project, POLICY, actor=TESTER)
    sessions = [archived(fill(make_session(project, external_id=f"e-{n}"))) for n in range(3)]

    with CaptureQueriesContext(connection) as queries:
        run_job_for_project("enforce_retention", project.pk, now=later(), trigger="tests")

    assert not Session.objects.filter(pk__in=[s.pk for s in sessions]).exists()
    deliveries = WebhookDelivery.objects.all()
    assert sorted((d.payload["external_id"], d.payload["actor"]) for d in deliveries) == sorted(
        [(s.external_id, "retention") for s in sessions] * 2
    )
    # The batch's deletions fan out together (a statement per deleted session before).
    table = WebhookDelivery._meta.db_table
    inserts = [q for q in queries.captured_queries if q["sql"].startswith(f'INSERT INTO "{table}"')]
    assert len(inserts) == 1


def test_webhook_endpoints_can_subscribe_to_it(project):
    endpoint, _ = create_endpoint(
        project, url="https://hooks.example.com/h", events=["session.deleted"], actor=TESTER
    )
    assert endpoint.events == ["session.deleted"]


# --- The dashboard -------------------------------------------------------------------------


def test_an_admin_deletes_it_from_its_page(team):
    session = fill(make_session(team.project, title="Done with"))
    fork = fork_session(session, at_seq=2, actor=TESTER)
    page = reverse("dashboard:session_detail", args=[session.pk])
    url = reverse("dashboard:session_delete", args=[session.pk])
    admin, operator = team.client("admin"), team.client("operator")
    assert 'form="delete-form"' in admin.get(page).content.decode()
    assert 'form="delete-form"' not in operator.get(page).content.decode()

    assert operator.post(url).status_code == 403
    refused = admin.post(url)
    assert refused.status_code == 409
    assert "fork" in refused.content.decode()
    assert Session.objects.filter(pk__in=[session.pk, fork.pk]).count() == 2

    response = admin.post(url, {"with_forks": "on"})

    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:session_list", args=[team.project.pk])
    assert rows_of(session.pk) == GONE and rows_of(fork.pk) == GONE
    entry = AuditEntry.objects.get(action="session.delete", target_id=str(session.pk))
    assert entry.actor == f"user:{team.admin.get_username()}"
    followed = admin.get(response["Location"]).content.decode()
    assert "Session deleted with 1 fork(s)" in followed


def test_another_projects_admin_cannot_delete_it(team):
    session = make_session(team.project)
    outsider = team.client("outsider")
    assert outsider.post(reverse("dashboard:session_delete", args=[session.pk])).status_code == 404
    assert Session.objects.filter(pk=session.pk).exists()


# --- Live pages ----------------------------------------------------------------------------


def _cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


def _socket(path: str, cookie: str) -> WebsocketCommunicator:
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
    ]
    return WebsocketCommunicator(application, path, headers=headers)


@pytest.mark.django_db(transaction=True)
def test_an_open_session_page_says_it_was_deleted_and_the_list_drops_its_row(team, settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    session = make_session(team.project, title="Watched")
    append_events(session, [EventDraft(kind="note", content={})], actor=TESTER)
    key, raw = make_api_key(team.project)
    cookie = _cookie(team.viewer)

    async def scenario():
        page = _socket(f"/ws/sessions/{session.pk}/?rows=1", cookie)
        listing = _socket(f"/ws/projects/{team.project.pk}/?view=sessions", cookie)
        assert (await page.connect())[0] and (await listing.connect())[0]
        await page.receive_nothing(timeout=0.3)  # the catch-up frame, if any

        response = await sync_to_async(ApiClient(raw).delete)(f"/sessions/{session.pk}")
        assert response.status_code == 200

        frame = await page.receive_from(timeout=5)
        assert f"This session was deleted by key:{key.prefix}" in frame
        assert 'id="session-header" hx-swap-oob="true"' in frame
        assert await page.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
        frame = await listing.receive_from(timeout=5)
        assert f'<tr id="session-row-{session.pk}" hx-swap-oob="delete">' in frame
        await listing.disconnect()

    async_to_sync(scenario)()


# --- Races between processes ----------------------------------------------------------------

PROCESSES = 3
ROUNDS = 6


@pytest.fixture(scope="module")
def racers(django_db_setup):
    with ProcessPool(PROCESSES) as pool:
        yield pool


def _status(response) -> tuple[int, object]:
    try:
        body = response.json()
    except ValueError:
        body = response.content.decode(errors="replace")[:200]
    return response.status_code, body


def delete_and_reopen(raw_key: str, external_id: str, rounds: int) -> list[list[tuple]]:
    """In a child: each round, open the external_id's session (the one there, or a new one),
    delete it, open it again, write to it. Every answer, in order."""
    from tests.conftest import ApiClient

    client = ApiClient(raw_key)
    answers = []
    body = {"agent": "racer", "external_id": external_id}
    for _ in range(rounds):
        barrier().wait()
        got = []
        found = _status(client.post("/sessions", body))
        got.append(("open",) + found)
        if found[0] in (200, 201):
            got.append(("delete",) + _status(client.delete(f"/sessions/{found[1]['id']}")))
        opened = _status(client.post("/sessions", body))
        got.append(("open",) + opened)
        if opened[0] in (200, 201):
            session_id = opened[1]["id"]
            event = {"events": [{"kind": "note", "content": {}}]}
            appended = client.post(f"/sessions/{session_id}/events", event)
            got.append(("append", appended.status_code, session_id))
        answers.append(got)
    return answers


def _no_orphans() -> None:
    assert not Event.objects.exclude(session_id__in=Session.objects.values("pk")).exists()
    assert not Snapshot.objects.exclude(session_id__in=Session.objects.values("pk")).exists()


@pytest.mark.slow
def test_processes_deleting_and_reopening_one_external_id_stay_consistent(
    transactional_db, project, racers
):
    _, raw_key = make_api_key(project)
    make_session(project, agent="racer", external_id="shared")

    per_process = racers.run(delete_and_reopen, [(raw_key, "shared", ROUNDS)] * PROCESSES)

    answers = [a for process in per_process for rounds in process for a in rounds]
    allowed = {"delete": {200, 404}, "open": {200, 201}, "append": {201, 404}}
    assert all(status in allowed[what] for what, status, _ in answers), answers
    (survivor,) = Session.objects.filter(project=project)  # one session, the external_id's
    assert survivor.external_id == "shared"
    deleted = sum(1 for what, status, _ in answers if (what, status) == ("delete", 200))
    opened = sum(1 for what, status, _ in answers if (what, status) == ("open", 201))
    assert deleted >= 1 and opened == deleted  # each deletion freed it for exactly one opening
    assert SessionTombstone.objects.filter(project=project).count() == deleted
    assert AuditEntry.objects.filter(action="session.delete").count() == deleted
    landed = [body for what, status, body in answers if (what, status) == ("append", 201)]
    assert landed  # some writes landed
    # The survivor holds exactly the writes that landed on it; the rest went with theirs.
    assert Event.objects.filter(session=survivor).count() == survivor.head_seq
    assert survivor.head_seq == landed.count(str(survivor.pk))
    _no_orphans()


def append_until_gone(raw_key: str, session_id: str, role: str) -> list[tuple]:
    """In a child: the deleter waits a moment and deletes; the others append batches of 3
    until the session is gone. Every answer."""
    from tests.conftest import ApiClient

    client = ApiClient(raw_key)
    barrier().wait()
    if role == "delete":
        time.sleep(0.15)
        return [_status(client.delete(f"/sessions/{session_id}"))]
    answers = []
    batch = {"events": [{"kind": "note", "content": {"i": i}} for i in range(3)]}
    for _ in range(400):
        answers.append(_status(client.post(f"/sessions/{session_id}/events", batch)))
        if answers[-1][0] != 201:
            break
    return answers


@pytest.mark.slow
@pytest.mark.parametrize("budget", [False, True], ids=["one-statement", "transactional"])
def test_a_delete_racing_appends_deletes_every_landed_event(
    transactional_db, project, racers, budget
):
    _, raw_key = make_api_key(project)
    for _ in range(3):
        extra = {"budget_max_tokens": 10**9, "budget_max_cost": Decimal(10**6)} if budget else {}
        session = make_session(project, **extra)
        append_events(session, [EventDraft(kind="note", content={})] * 2, actor=TESTER)
        roles = ["delete", "append", "append"]

        results = racers.run(
            append_until_gone, [(raw_key, str(session.pk), role) for role in roles]
        )

        ((deleted, body),) = results[0]
        assert deleted == 200, body
        appends = [status for answers in results[1:] for status, _ in answers]
        assert set(appends) <= {201, 404}, results[1:]
        assert appends.count(201) >= 1 and appends[-1] == 404  # some landed, then gone
        landed = 2 + 3 * appends.count(201)
        assert body["events_deleted"] == landed  # every landed append was deleted with it
        assert SessionTombstone.objects.get(session_id=session.pk).events_deleted == landed
        assert rows_of(session.pk) == GONE
        _no_orphans()


def fork_or_delete(
    raw_key: str, session_id: str, role: str, with_forks: bool, delay: float
) -> tuple:
    """In a child: after `delay` seconds, delete the session, or fork it at seq 1."""
    from tests.conftest import ApiClient

    client = ApiClient(raw_key)
    barrier().wait()
    time.sleep(delay)
    if role == "delete":
        query = "?with_forks=true" if with_forks else ""
        return _status(client.delete(f"/sessions/{session_id}{query}"))
    return _status(client.post(f"/sessions/{session_id}/fork", {"at_seq": 1}))


@pytest.mark.slow
@pytest.mark.parametrize("with_forks", [False, True], ids=["alone", "with-forks"])
def test_a_delete_racing_forks_either_sees_them_or_they_find_nothing(
    transactional_db, project, racers, with_forks
):
    _, raw_key = make_api_key(project)
    outcomes = set()
    # All at once, or one side a little later: the rounds meet both orders for certain.
    for delete_delay, fork_delay in [(0, 0), (0.3, 0), (0, 0.3), (0, 0), (0.02, 0), (0, 0.02)]:
        session = make_session(project)
        append_events(session, [EventDraft(kind="note", content={})] * 2, actor=TESTER)
        roles = [("delete", delete_delay), ("fork", fork_delay), ("fork", fork_delay)]

        results = racers.run(
            fork_or_delete,
            [(raw_key, str(session.pk), role, with_forks, delay) for role, delay in roles],
        )

        (deleted, body), forks = results[0], results[1:]
        assert {status for status, _ in forks} <= {201, 404}, forks
        made = [fork["id"] for status, fork in forks if status == 201]
        if deleted == 409:
            # Refused: it saw a fork made before it (one made after the refusal it does not
            # name), and everything is there.
            assert not with_forks and body["error"]["code"] == "session_has_forks"
            named = body["error"]["detail"]["fork_ids"]
            assert named and set(named) <= set(made)
            assert Session.objects.filter(pk__in=[session.pk, *made]).count() == 1 + len(made)
        else:
            assert deleted == 200, body
            # Deleted: a fork made before went with it (with_forks), or none was made.
            assert set(body["deleted"]) == {str(session.pk), *made}
            assert not Session.objects.filter(pk__in=[session.pk, *made]).exists()
            assert not made or with_forks
        outcomes.add((deleted, len(made)))
        _no_orphans()
    print(sorted(outcomes))  # -rP: which orders the rounds met
    assert (200, 0) in outcomes  # the delete first: the forks found nothing
    assert (200 if with_forks else 409) in {deleted for deleted, made in outcomes if made}


def hold_or_delete(raw_key: str, session_id: str, role: str) -> tuple | None:
    """In a child: delete the session, or a moment later place a legal hold on it."""
    from tests.conftest import ApiClient

    client = ApiClient(raw_key)
    barrier().wait()
    if role == "delete":
        return _status(client.delete(f"/sessions/{session_id}"))
    if role == "hold":
        time.sleep(0.3)  # the delete first: it has checked the holds and waits on an event
        return _status(client.post(f"/sessions/{session_id}/hold", {"reason": "racing"}))
    return None


def _queued_behind_the_delete(holder: int, timeout: float = 10) -> bool:
    """Until a backend waits on one that waits on `holder` (the hold behind the delete)."""
    params = connection.get_connection_params()
    deadline = time.monotonic() + timeout
    with psycopg.connect(**params, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            (queued,) = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity w JOIN pg_stat_activity d"
                " ON d.pid = ANY(pg_blocking_pids(w.pid)) WHERE %s = ANY(pg_blocking_pids(d.pid))",
                (holder,),
            ).fetchone()
            if queued:
                return True
            time.sleep(0.02)
    return False


@pytest.mark.slow
def test_a_hold_placed_while_a_delete_runs_waits_and_finds_nothing(
    transactional_db, project, racers
):
    _, raw_key = make_api_key(project, scope=KeyScope.ADMIN)
    session = make_session(project)
    append_events(session, [EventDraft(kind="note", content={})], actor=TESTER)
    roles = ["delete", "hold", "idle"]
    racers.run(hold_or_delete, [(raw_key, str(session.pk), "idle")] * PROCESSES)  # started

    with ThreadPoolExecutor(1) as executor:
        with transaction.atomic():
            # The delete takes its locks, finds no hold, then waits on this event's row.
            list(Event.objects.select_for_update().filter(session=session))
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                (holder,) = cursor.fetchone()
            running = executor.submit(
                racers.run, hold_or_delete, [(raw_key, str(session.pk), r) for r in roles]
            )
            queued = _queued_behind_the_delete(holder)
        (deleted, body), (held, hold_body), _ = running.result()

    # The hold waited for the deletion (the project row), then found no session: a hold is
    # never placed and then deleted with the session it was to keep.
    assert queued
    assert (deleted, held) == (200, 404), (body, hold_body)
    assert not LegalHold.objects.exists()
    assert not Session.objects.filter(pk=session.pk).exists()
