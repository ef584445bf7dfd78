import json
import re

from django.urls import reverse

from core.actors import Actor
from sessions_app.services.events import EventDraft
from sessions_app.services.lifecycle import pause_session
from sessions_app.services.sessions import fork_session
from tests import factories

from .conftest import append, fact, message, state

HTMX = {"HX-Request": "true"}


def detail(team, session, who="viewer", headers=None, **params):
    url = reverse("dashboard:session_detail", args=[session.pk])
    return team.client(who).get(url, params, headers=headers or {})


def seqs(response):
    return [e.seq for e in response.context["log"].events]


def test_it_shows_header_timeline_log_facts_and_state(team, session):
    pause_session(session, actor=Actor.system("t"), reason="ask a human")
    response = detail(team, session)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Refund for order 4411" in page and "triage" in page
    assert seqs(response) == [7, 6, 5, 4, 3, 2, 1]  # newest first by default
    assert [(i.from_status, i.to_status, i.reason) for i in response.context["timeline"]] == [
        ("open", "paused", "ask a human")
    ]
    assert [f.key for f in response.context["facts"]] == ["customer_tier"]
    assert json.loads(response.context["inspector"]["state"]) == {"stage": "waiting"}
    assert 'ws-connect="/ws/sessions/' in page
    assert "data-relative" in page


def test_it_marks_durable_events_and_pretty_prints_json_escaped(team, session):
    append(
        session,
        EventDraft(
            kind="note", content={"text": "<script>alert(1)</script>", "nested": {"a": [1, 2]}}
        ),
    )
    page = detail(team, session).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # The fact (seq 3) and the decision (seq 5) are durable, and say so.
    assert re.search(r'id="event-3" data-live-row class="event event-fact durable"', page)
    assert re.search(r'id="event-5" data-live-row class="event event-decision durable"', page)
    assert 'class="event event-message"' in page
    # JSON is indented by json.dumps(indent=2), inside a <details>, escaped by the template.
    assert "&quot;nested&quot;: {\n" in page
    assert "<details" in page


def test_it_truncates_long_text_with_an_expander(team, session):
    append(session, message("word " * 400))
    response = detail(team, session)
    event = response.context["log"].events[0]
    assert event.text_truncated and len(event.text_preview) <= 401
    page = response.content.decode()
    assert "Show all 2000 characters" in page


def test_it_orders_filters_and_jumps(team, session):
    assert seqs(detail(team, session, order="asc")) == [1, 2, 3, 4, 5, 6]
    assert seqs(detail(team, session, kind=["state"])) == [6, 2]
    assert seqs(detail(team, session, kind=["message", "fact"], order="asc")) == [1, 3, 4]
    assert seqs(detail(team, session, tier="durable")) == [5, 3]
    jumped = detail(team, session, seq=3)
    assert seqs(jumped) == [3, 2, 1]
    assert jumped.context["log"].live is False  # a jump into the past stops following
    assert 'class="event event-fact durable target"' in jumped.content.decode()
    assert seqs(detail(team, session, seq=3, order="asc")) == [3, 4, 5, 6]


def test_it_loads_more_by_positional_slices(team, session, monkeypatch):
    from switchboard.sessions import context as dashboard

    monkeypatch.setattr(dashboard, "EVENTS_PER_PAGE", 4)
    first = detail(team, session)
    log = first.context["log"]
    assert seqs(first) == [6, 5, 4, 3] and log.has_more
    assert 'hx-trigger="revealed, click"' in first.content.decode()
    url = reverse("dashboard:session_events", args=[session.pk])
    more = team.client("viewer").get(f"{url}?{log.more_query}", headers=HTMX)
    assert more.status_code == 200
    body = more.content.decode()
    assert re.findall(r'id="event-(\d+)"', body) == ["2", "1"]
    assert "load-more" not in body and "<html" not in body
    # Oldest first, the slice stops at the head the page was rendered with.
    asc = detail(team, session, order="asc")
    append(session, message("after the page was rendered"))
    more = team.client("viewer").get(f"{url}?{asc.context['log'].more_query}", headers=HTMX)
    assert re.findall(r'id="event-(\d+)"', more.content.decode()) == ["5", "6"]
    # Without JavaScript the same link opens the page at that slice.
    plain = team.client("viewer").get(f"{url}?{log.more_query}")
    assert plain.status_code == 302 and "before_seq=3" in plain["Location"]


def test_it_answers_htmx_with_the_event_log_partial(team, session):
    response = detail(team, session, headers={**HTMX, "HX-Target": "event-log"}, kind="state")
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="event-log"')
    assert "<html" not in body and 'id="timeline"' not in body
    assert "kind=state" in body  # the live socket follows the same filter


def test_it_refuses_bad_log_settings_with_400(team, session):
    for params in [
        {"seq": 99},
        {"seq": "abc"},
        {"kind": "gossip"},
        {"order": "sideways"},
        {"tier": "forever"},
    ]:
        response = detail(team, session, **params)
        assert response.status_code == 400, params
        assert "These log settings cannot be used" in response.content.decode()
    url = reverse("dashboard:session_events", args=[session.pk])
    assert team.client("viewer").get(url, {"before_seq": "x"}, headers=HTMX).status_code == 400


def test_it_time_travels_with_the_inspector(team, session):
    url = reverse("dashboard:session_inspector", args=[session.pk])
    client = team.client("viewer")
    at2 = client.get(url, {"at_seq": 2}, headers=HTMX)
    assert at2.status_code == 200
    assert json.loads(at2.context["inspector"]["state"]) == {"stage": "triage"}
    assert at2.context["inspector"]["facts"] == []
    body = at2.content.decode()
    assert body.lstrip().startswith('<div id="inspector"')
    at3 = client.get(url, {"at_seq": 3}, headers=HTMX)
    assert [f.key for f in at3.context["inspector"]["facts"]] == ["customer_tier"]
    assert client.get(url, {"at_seq": 7}, headers=HTMX).status_code == 400
    assert client.get(url, {"at_seq": -1}, headers=HTMX).status_code == 400
    # The full page accepts the same parameter (no JavaScript).
    assert client.get(url, {"at_seq": 2}).status_code == 302
    page = detail(team, session, at_seq=2)
    assert json.loads(page.context["inspector"]["state"]) == {"stage": "triage"}


def test_it_shows_lineage_both_ways(team, session):
    fork = fork_session(session, at_seq=3, actor=Actor.system("t"), title="Second try")
    parent_page = detail(team, session).content.decode()
    assert reverse("dashboard:session_detail", args=[fork.pk]) in parent_page
    assert "Second try" in parent_page
    fork_page = detail(team, fork)
    assert reverse("dashboard:session_detail", args=[session.pk]) in fork_page.content.decode()
    assert seqs(fork_page) == [3, 2, 1]  # the parent's prefix, through the lineage


def test_it_shows_the_budget(team):
    s = factories.make_session(team.project, budget_max_tokens=1000)
    append(s, message("a", tokens=850))
    response = detail(team, s)
    (bar,) = response.context["budget"]
    assert (bar.percent, bar.level) == (85, "near")
    assert 'aria-valuenow="85"' in response.content.decode()


def test_it_shows_the_tasks_linked_to_the_session(team, session):
    response = detail(team, session)
    assert response.context["tasks"] == []
    page = response.content.decode()
    assert "No task is linked to this session" in page
    assert "Linked tasks appear here once" not in page  # the tasks app is part of the product
    task = factories.make_task(team.project, session_ids=[str(session.pk)])
    unlinked = factories.make_task(team.project)
    response = detail(team, session)
    assert [t.pk for t in response.context["tasks"]] == [task.pk]
    page = response.content.decode()
    assert f'id="task-slot-{task.pk}"' in page
    assert f'id="task-slot-{unlinked.pk}"' not in page
    assert "No task is linked to this session" not in page


def test_it_keeps_the_session_page_to_a_few_queries(team, session, django_assert_max_num_queries):
    for i in range(5):
        append(
            session, *[message(f"m{i}-{j}") for j in range(60)], state({"i": i}), fact(f"k{i}", i)
        )
    fork_session(session, at_seq=10, actor=Actor.system("t"))
    client = team.client("viewer")
    url = reverse("dashboard:session_detail", args=[session.pk])
    client.get(url)
    # Sign-in (2), session + membership (2), projects menu (1), slice (1), forks (1),
    # state at head: snapshot + fold (2, shared by facts and inspector), timeline (1),
    # linked tasks (1), handoff records for the timeline (1), the active handoff (1), the
    # navigation's handoff count (1), the legal hold covering the session (1), the artifacts
    # (1; each previewed text file is a read of storage, not a query): bounded whatever the
    # log's length.
    with django_assert_max_num_queries(16):
        response = client.get(url)
    assert len(response.context["log"].events) == 50


def _order(page: str, *markers: str) -> list[int]:
    return [page.index(marker) for marker in markers]


def test_a_forks_log_marks_where_the_parents_events_end(team, session):
    fork = fork_session(session, at_seq=3, actor=Actor.system("t"), title="Second try")
    append(fork, message("own 4"), message("own 5"))
    boundary = 'class="fork-boundary"'

    page = detail(team, fork).content.decode()  # newest first
    assert page.count(boundary) == 1
    positions = _order(page, 'id="event-4"', boundary, 'id="event-3"')
    assert positions == sorted(positions)
    marker = page[page.index(boundary) : page.index('id="event-3"')]
    assert "Fork point at seq" in marker and 'data-fork-seq="3"' in marker
    assert reverse("dashboard:session_detail", args=[session.pk]) in marker
    assert "this fork&#x27;s own" in marker or "this fork's own" in marker

    page = detail(team, fork, order="asc").content.decode()  # oldest first
    assert page.count(boundary) == 1
    positions = _order(page, 'id="event-3"', boundary, 'id="event-4"')
    assert positions == sorted(positions)

    # A slice starting right after the fork point (its cursor is the parent's last row).
    page = detail(team, fork, order="asc", after_seq=3, until=5).content.decode()
    positions = _order(page, boundary, 'id="event-4"')
    assert positions == sorted(positions) and page.count(boundary) == 1
    # A slice of the fork's own events alone, and the parent's own log: no marker.
    assert boundary not in detail(team, fork, order="asc", after_seq=4, until=5).content.decode()
    assert boundary not in detail(team, session).content.decode()


def test_a_fork_of_a_fork_marks_both_fork_points(team, session):
    fork = fork_session(session, at_seq=2, actor=Actor.system("t"), title="Middle")
    append(fork, message("middle 3"))
    grandchild = fork_session(fork, at_seq=3, actor=Actor.system("t"))
    append(grandchild, message("own 4"))
    page = detail(team, grandchild).content.decode()
    assert re.findall(r'data-fork-seq="(\d+)"', page) == ["3", "2"]
    assert "Middle</a>&#x27;s" in page or "Middle</a>'s" in page
