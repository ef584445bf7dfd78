"""The session page at a moment (`?at=<seq>`): every part with a past shows that seq, the link
is the moment, bad values and compacted seqs are explained, and live pushes keep the past."""

import re

import pytest
from django.urls import reverse

from core.actors import Actor
from retention_app.services.compaction import compact_session
from sessions_app.services.lifecycle import close_session, pause_session
from switchboard.sessions.consumers import SessionStream
from tests import factories
from tests.factories import make_session

from .conftest import append, fact, message

HTMX = {"HX-Request": "true"}
SYSTEM = Actor.system("t")


def detail(team, session, who="viewer", headers=None, **params):
    url = reverse("dashboard:session_detail", args=[session.pk])
    return team.client(who).get(url, params, headers=headers or {})


def test_the_page_at_a_seq_shows_that_moment_everywhere(team, session):
    pause_session(session, actor=SYSTEM, reason="ask a human")  # seq 7
    append(session, fact("customer_tier", "platinum"), message("later", tokens=40))  # 8, 9
    response = detail(team, session, at=2)
    assert response.status_code == 200
    context = response.context
    assert context["moment"].seq == 2
    # The log: a few rows after the moment (greyed), the moment, the rows before; not live.
    log = context["log"]
    assert [(e.seq, e.later, e.is_moment) for e in log.events] == [
        (9, True, False),
        (8, True, False),
        (7, True, False),
        (6, True, False),
        (5, True, False),
        (4, True, False),
        (3, True, False),
        (2, False, True),
        (1, False, False),
    ]
    assert not log.live and "at=2" in log.ws_query and "rows=0" in log.ws_query
    page = response.content.decode()
    assert re.search(r'id="event-2"[^>]*class="[^"]*\bmoment\b[^"]*" data-scroll-moment', page)
    assert re.search(r'id="event-5"[^>]*class="[^"]*\blater\b', page)
    # The facts, the working state, the timeline and the header: as they were at seq 2.
    assert context["facts"] == [] and context["facts_seq"] == 2
    assert context["inspector"]["seq"] == 2
    assert context["timeline"] == []  # the pause came at seq 7
    assert 'id="header-status" class="status status-open"' in page
    assert "now paused" in page
    assert "Back to live" in page and 'id="moment-at" name="at" value="2"' in page
    # At seq 8 the pause and the new fact value are there, the later message's tokens not.
    at8 = detail(team, session, at=8).context
    assert [i.to_status for i in at8["timeline"]] == ["paused"]
    assert [(f.key, f.value) for f in at8["facts"]] == [("customer_tier", "platinum")]
    assert at8["moment"].then.tokens_used == 0
    assert detail(team, session, at=9).context["moment"].then.tokens_used == 40


def test_live_is_the_page_without_at(team, session):
    response = detail(team, session)
    assert response.context["moment"] is None
    page = response.content.decode()
    assert "Back to live" not in page and 'id="moment-at"' not in page
    assert 'id="facts-seq" data-head-count' in page  # live counts follow the head
    assert response.context["log"].live


def test_the_old_at_seq_parameter_still_opens_the_moment(team, session):
    assert detail(team, session, at_seq=3).context["moment"].seq == 3


@pytest.mark.parametrize("value", ["abc", "-1", "7", "1.5", "9" * 30])
def test_a_bad_at_value_gets_a_friendly_live_page(team, session, value):
    response = detail(team, session, at=value)
    assert response.status_code == 400
    page = response.content.decode()
    assert "Cannot show seq" in page and "Showing the live session." in page
    assert response.context["moment"] is None and response.context["log"].live
    # Through htmx only the moment's line answers (the page stays where it was).
    swapped = detail(team, session, headers={**HTMX, "HX-Target": "moment"}, at=value)
    assert swapped.status_code == 400
    body = swapped.content.decode()
    assert body.lstrip().startswith('<div id="moment"') and "Cannot show seq" in body
    assert "hx-swap-oob" not in body


def test_htmx_moves_every_part_out_of_band(team, session):
    response = detail(team, session, headers={**HTMX, "HX-Target": "moment"}, at=3)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="moment" class="moment past" data-at="3"')
    for part in (
        "session-header",
        "timeline",
        "event-log",
        "tasks-pane",
        "facts-panel",
        "inspector",
    ):
        assert re.search(rf'id="{part}"[^>]*hx-swap-oob="true"', body), part
    assert "<html" not in body
    back = detail(team, session, headers={**HTMX, "HX-Target": "moment"})
    assert 'data-at=""' in back.content.decode() and back.context["log"].live


def test_a_compacted_seq_is_explained_not_an_error(team):
    s = make_session(team.project)
    append(s, *[message(f"m{i}") for i in range(6)])
    close_session(s, actor=SYSTEM, reason="done")
    s.refresh_from_db()
    compact_session(s, actor=SYSTEM)
    s.refresh_from_db()
    response = detail(team, s, at=3)
    assert response.status_code == 200
    page = response.content.decode()
    assert "cannot be shown: retention compacted it" in page
    assert f'href="?at={s.compacted_through_seq}"' in page
    assert response.context["moment"] is None
    assert detail(team, s, at=s.compacted_through_seq).context["moment"] is not None


def test_filters_and_load_more_keep_the_moment(team, session):
    log = detail(team, session, at=3, order="asc").context["log"]
    assert "at=3" in log.more_query and "at=3" in log.filter_query
    assert [(e.seq, e.later) for e in log.events][:4] == [
        (1, False),
        (2, False),
        (3, False),
        (4, True),
    ]
    page = detail(team, session, headers={**HTMX, "HX-Target": "event-log"}, at=3, kind="state")
    assert '<input type="hidden" name="at" value="3">' in page.content.decode()
    assert [(e.seq, e.later) for e in page.context["log"].events] == [(6, True), (2, False)]


def test_an_operators_action_keeps_a_pinned_header(team, session):
    url = reverse("dashboard:session_pause", args=[session.pk])
    response = team.client("operator").post(url, {"reason": "x", "at": 2}, headers=HTMX)
    body = response.content.decode()
    assert 'id="header-status" class="status status-open"' in body and "now paused" in body
    response = team.client("operator").post(
        reverse("dashboard:session_resume", args=[session.pk]), {}, headers=HTMX
    )
    assert 'id="header-status" class="status status-resumed"' in response.content.decode()


def test_live_pushes_to_a_pinned_page_move_the_counts_not_the_past(team, session):
    stream = SessionStream.open(team.viewer, str(session.pk), "at=2&after_seq=6&rows=0")
    assert stream.moment is not None and not stream.rows
    append(session, fact("customer_tier", "platinum"), message("new"))
    frame = stream.events_frame()
    assert 'data-head-seq="8"' in frame  # the counts follow the head
    assert 'id="header-status" class="status status-open"' in frame  # the past stays
    assert "facts-panel" not in frame and "event-8" not in frame
    pause_session(session, actor=SYSTEM, reason="look")
    lifecycle = stream.lifecycle_frame()
    assert 'id="timeline"' not in lifecycle and "now paused" in lifecycle
    assert 'id="session-actions"' in lifecycle  # the actions act on the session now
    # A live page gets the rows, the facts and the timeline as before.
    live = SessionStream.open(team.viewer, str(session.pk), "after_seq=8")
    append(session, fact("customer_tier", "diamond"))
    assert "facts-panel" in live.events_frame()


def test_a_moment_costs_a_few_queries_more_than_live(team, session, django_assert_max_num_queries):
    for i in range(5):
        append(session, *[message(f"m{i}-{j}") for j in range(60)], fact(f"k{i}", i))
    factories.make_task(team.project, session_ids=[str(session.pk)])
    client = team.client("viewer")
    url = reverse("dashboard:session_detail", args=[session.pk])
    client.get(url, {"at": 100})
    # The live page's 16 (test_session_detail; its artifacts are those of then) and the task's
    # steps, plus the moment's five: the event at the seq, the status then, the usage after
    # it, the budget changes after it, the tasks' history up to then.
    with django_assert_max_num_queries(22):
        response = client.get(url, {"at": 100})
    assert response.context["moment"].seq == 100
    assert len(response.context["log"].events) == 50
