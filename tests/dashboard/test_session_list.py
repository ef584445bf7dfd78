from datetime import timedelta

import pytest
import time_machine
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone

from core.actors import Actor
from sessions_app.models import Session
from sessions_app.queries import encode_sort_cursor
from sessions_app.services.lifecycle import pause_session
from switchboard.sessions import views
from tests import factories
from tests.factories import make_session

from .conftest import append, message


def get(team, who="viewer", headers=None, **params):
    url = reverse("dashboard:session_list", args=[team.project.pk])
    return team.client(who).get(url, params, headers=headers or {})


def titles(response):
    return [s.title for s in response.context["sessions"]]


def test_it_lists_the_projects_sessions_newest_first(team, session):
    newer = make_session(team.project, title="Newer")
    make_session(team.other_project, title="Not ours")
    response = get(team)
    assert response.status_code == 200
    assert titles(response) == ["Newer", "Refund for order 4411"]
    page = response.content.decode()
    assert f'id="session-row-{newer.pk}"' in page
    assert "Not ours" not in page


def test_it_filters_by_status_agent_tag_and_text(team, session):
    other = make_session(
        team.project, agent="writer", title="Report", metadata={"customer": "cust-202", "vip": True}
    )
    append(other, message("quarterly numbers"))
    pause_session(other, actor=Actor.system("t"))
    assert titles(get(team, status="paused")) == ["Report"]
    assert titles(get(team, status=["open", "paused"])) == ["Report", "Refund for order 4411"]
    assert titles(get(team, agent="triage")) == ["Refund for order 4411"]
    assert titles(get(team, tag="vip")) == ["Report"]
    assert titles(get(team, tag="customer=cust-101")) == ["Refund for order 4411"]
    assert titles(get(team, tag="customer")) == ["Report", "Refund for order 4411"]
    assert titles(get(team, q="refund")) == ["Refund for order 4411"]
    assert titles(get(team, q="quarterly")) == ["Report"]
    assert titles(get(team, q="nothing-like-this")) == []


def test_it_filters_by_time_range_and_activity(team):
    with time_machine.travel(timezone.now() - timedelta(days=3), tick=False):
        make_session(team.project, title="Old")
    make_session(team.project, title="Recent")
    yesterday = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert titles(get(team, created_after=yesterday)) == ["Recent"]
    assert titles(get(team, created_before=yesterday)) == ["Old"]
    assert titles(get(team, active="24h")) == ["Recent"]
    assert titles(get(team, active="7d")) == ["Recent", "Old"]


def test_it_filters_by_linked_task(team, session):
    alone = make_session(team.project, title="Alone")
    factories.make_task(team.project, session_ids=[str(session.pk)])
    assert titles(get(team, has_task="yes")) == ["Refund for order 4411"]
    assert titles(get(team, has_task="no")) == ["Alone"]
    # Unfiltered, the list has its Task column and shows the linked row's task state.
    response = get(team)
    assert {s.title: bool(s.first_task) for s in response.context["sessions"]} == {
        "Refund for order 4411": True,
        "Alone": False,
    }
    page = response.content.decode()
    assert '<th scope="col">Task</th>' in page
    row = page.split(f'id="session-row-{session.pk}"', 1)[1].split("</tr>", 1)[0]
    assert ">draft created</a>" in row
    row = page.split(f'id="session-row-{alone.pk}"', 1)[1].split("</tr>", 1)[0]
    assert "task-state" not in row


@pytest.mark.parametrize("sort", ["-created", "created", "-updated", "updated"])
def test_it_pages_by_keyset_for_every_sort_without_gaps_or_repeats(team, sort, monkeypatch):
    base = timezone.now() - timedelta(hours=1)
    made = []
    for i in range(7):
        # Two sessions per instant: ties on the sort key are broken by id.
        with time_machine.travel(base + timedelta(minutes=i // 2), tick=False):
            made.append(make_session(team.project, title=f"s{i}"))
    monkeypatch.setattr(views, "SESSIONS_PER_PAGE", 3)
    client = team.client("viewer")
    url = reverse("dashboard:session_list", args=[team.project.pk])
    seen, params = [], {"sort": sort}
    while True:
        response = client.get(url, params)
        assert response.status_code == 200
        seen += [s.pk for s in response.context["sessions"]]
        if not response.context["next_query"]:
            break
        params = QueryDict(response.context["next_query"])
    field = "created_at" if "created" in sort else "updated_at"
    order = [f"-{field}", "-id"] if sort.startswith("-") else [field, "id"]
    expected = list(
        Session.objects.filter(project=team.project).order_by(*order).values_list("pk", flat=True)
    )
    assert seen == expected


def test_it_refuses_bad_filters_with_a_friendly_400_and_searches_nothing(team, session):
    for params in [
        {"status": "sleeping"},
        {"agent": "nobody"},
        {"created_after": "yesterday"},
        {"sort": "random"},
        {"cursor": "not-a-cursor"},
        {"has_task": "maybe"},
        {"created_after": "2026-01-02T00:00", "created_before": "2026-01-01T00:00"},
    ]:
        response = get(team, **params)
        assert response.status_code == 400, params
        page = response.content.decode()
        assert "These filters cannot be used" in page, params
        assert "sessions" not in response.context or not response.context.get("sessions")
        assert f'id="session-row-{session.pk}"' not in page


def test_it_refuses_a_cursor_issued_for_another_sort(team):
    for i in range(3):
        make_session(team.project, title=f"s{i}")
    cursor = encode_sort_cursor("-updated", timezone.now(), "00000000-0000-0000-0000-000000000000")
    response = get(team, sort="-created", cursor=cursor)
    assert response.status_code == 400
    assert "another sort order" in response.content.decode()


def test_it_answers_htmx_with_the_results_partial(team, session):
    response = get(
        team, headers={"HX-Request": "true", "HX-Target": "session-results"}, status="open"
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="session-results"')
    assert "<html" not in body and 'class="filters' not in body
    assert f"/ws/projects/{team.project.pk}/?" in body and "view=sessions" in body
    bad = get(team, headers={"HX-Request": "true", "HX-Target": "session-results"}, status="nope")
    assert bad.status_code == 400
    assert bad.content.decode().lstrip().startswith('<section id="session-results"')


def test_it_keeps_the_filters_in_links(team, monkeypatch):
    monkeypatch.setattr(views, "SESSIONS_PER_PAGE", 2)
    for i in range(3):
        make_session(team.project, title=f"s{i}")
    response = get(team, status="open", sort="created")
    next_query = response.context["next_query"]
    assert "status=open" in next_query and "sort=created" in next_query
    assert "cursor=" in next_query


def test_it_escapes_user_content(team):
    make_session(team.project, title="<script>alert(1)</script>", external_id="<b>x</b>")
    page = get(team).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page


def test_it_shows_empty_states_that_say_what_to_do(team):
    assert "No sessions yet" in get(team).content.decode()
    make_session(team.project)
    assert "No session matches these filters" in get(team, status="closed").content.decode()


def test_it_keeps_the_list_cheap(team, django_assert_max_num_queries):
    for i in range(30):
        append(make_session(team.project, agent=f"agent-{i % 3}"), message("hi"))
    client = team.client("viewer")
    url = reverse("dashboard:session_list", args=[team.project.pk])
    client.get(url)
    # Sign-in (2), membership (1), projects menu (1), agents for the filter (1), the page (1),
    # the navigation's handoff count (1), the standing legal holds (1: the rows' badges).
    with django_assert_max_num_queries(8):
        response = client.get(url, {"status": "open", "sort": "-updated"})
    assert len(response.context["sessions"]) == 30


def test_a_paused_row_shows_its_pause_reason_and_how_long_it_has_waited(team, session):
    paused = make_session(team.project, title="Paused one")
    with time_machine.travel(timezone.now() - timedelta(minutes=42), tick=False):
        pause_session(paused, actor=Actor.system("t"), reason="Over budget: ask finance")
    page = get(team).content.decode()
    row = page[page.index(f'id="session-row-{paused.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "Over budget: ask finance · waiting 42\xa0minutes" in row
    other = page[page.index(f'id="session-row-{session.pk}"') :]
    assert "waiting" not in other[: other.index("</tr>")]  # only paused rows
