from datetime import timedelta

import time_machine
from django.urls import reverse
from django.utils import timezone

from core.actors import Actor
from sessions_app.queries import events_per_minute
from sessions_app.services.lifecycle import close_session, pause_session
from tests.caching import clear_cache
from tests.factories import make_session

from .conftest import append, message


def overview(team, who="viewer", **headers):
    return team.client(who).get(reverse("dashboard:overview", args=[team.project.pk]), **headers)


def test_it_counts_sessions_by_status_and_lists_the_longest_waits(team, session):
    first = make_session(team.project, title="Waiting since long")
    second = make_session(team.project, title="Waiting since now")
    pause_session(first, actor=Actor.system("t"), reason="need approval")
    pause_session(second, actor=Actor.system("t"))
    close_session(make_session(team.project), actor=Actor.system("t"))
    make_session(team.other_project)  # not counted
    response = overview(team)
    assert response.status_code == 200
    counts = {status: n for status, _, n in response.context["status_counts"]}
    assert counts == {"open": 1, "paused": 2, "resumed": 0, "closed": 1, "archived": 0}
    assert response.context["total_sessions"] == 4
    assert [s.title for s in response.context["waiting"]] == [
        "Waiting since long",
        "Waiting since now",
    ]
    assert response.context["oldest_wait"] == response.context["waiting"][0].paused_since
    page = response.content.decode()
    assert "Waiting since long" in page
    assert "data-relative" in page  # times are relative, exact on hover


def test_it_lists_recent_lifecycle_changes_of_this_project_only(team, session):
    pause_session(session, actor=Actor.system("t"), reason="<i>ask</i> a human")
    make_session(team.other_project, title="Elsewhere")
    changes = overview(team).context["recent_changes"]
    assert [c.verb for c in changes] == ["paused", "opened"]
    assert changes[0].reason == "<i>ask</i> a human"
    page = overview(team).content.decode()
    assert "&lt;i&gt;ask&lt;/i&gt; a human" in page
    assert "Elsewhere" not in page


def test_it_shows_friendly_empty_states(team):
    page = overview(team).content.decode()
    assert "No session is waiting for a human" in page
    assert "No events in the last hour" in page


def test_it_counts_events_per_minute_of_the_last_hour_only(team, session):
    other = make_session(team.other_project)
    append(other, message("not ours"))
    now = timezone.now()
    counts = events_per_minute(team.project, now=now)
    assert len(counts) == 60
    assert counts[-1] == 6  # the fixture's six events, this minute
    assert sum(counts) == 6
    assert sum(events_per_minute(team.project, now=now + timedelta(hours=2))) == 0


def test_it_renders_the_chart_as_inline_svg_and_serves_it_to_htmx_polls(team, session):
    clear_cache()
    response = overview(team, headers={"HX-Request": "true", "HX-Target": "events-chart"})
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="events-chart"')
    assert "<svg" in body and "<rect" in body and "6 events in the last hour" in body
    assert "<html" not in body
    assert response["Vary"].count("HX-Request")
    # A y-axis scale (issue 13): the peak (6 events this minute), its half, and 0.
    assert '<div class="chart-y muted" aria-hidden="true" title="events per minute">' in body
    assert "<span>6</span><span>3</span><span>0</span>" in body


def test_it_keeps_the_overview_cheap(team, session, django_assert_max_num_queries):
    for _ in range(5):
        make_session(team.project)
    clear_cache()
    client = team.client("viewer")
    url = reverse("dashboard:overview", args=[team.project.pk])
    client.get(url)  # the first visit remembers the project in the session (one write)
    clear_cache()
    # Sign-in (2), membership (1), projects menu (1), GROUP BY status (1), waiting (1),
    # recent changes (2), events per minute (1), handoff counts (1, shared with the
    # navigation), tasks waiting and stuck (3: counts, each list): nothing grows with the data.
    with django_assert_max_num_queries(13):
        assert client.get(url).status_code == 200


def test_waiting_for_a_human_shows_each_pause_reason_and_how_long_it_has_waited(team, session):
    asked = make_session(team.project, title="Asked")
    silent = make_session(team.project, title="Silent")
    now = timezone.now()
    with time_machine.travel(now - timedelta(hours=3, minutes=5), tick=False):
        pause_session(asked, actor=Actor.system("t"), reason="<b>needs</b> a refund approval")
    with time_machine.travel(now - timedelta(minutes=7), tick=False):
        pause_session(silent, actor=Actor.system("t"))
    page = overview(team).content.decode()
    waiting = page[page.index('<section id="waiting"') :]
    waiting = waiting[: waiting.index("</section>")]
    rows = waiting.split("<tr>")[2:]  # after the header row
    assert "Asked" in rows[0] and "Silent" in rows[1]  # longest wait first
    assert "&lt;b&gt;needs&lt;/b&gt; a refund approval" in rows[0]
    assert "3\xa0hours, 5\xa0minutes" in rows[0]
    assert "No reason given" in rows[1] and "7\xa0minutes" in rows[1]


def test_it_shows_waiting_and_stuck_tasks_next_to_the_waiting_sessions(team):
    from tasks_app.services.steps import update_step
    from tests.factories import make_task

    ops = Actor.system("t")
    waits = make_task(
        team.project, external_id="<i>doc-7</i>", metadata={"title": "Refund <b>policy</b> v3"}
    )
    update_step(waits, "review", status="waiting", actor=ops, waiting_on="review_decision")
    stuck = make_task(team.project, "research_report", external_id="scan-1")
    for _ in range(3):
        update_step(stuck, "research", status="running", actor=ops)
        update_step(
            stuck, "research", status="failed", actor=ops, error={"type": "paywall", "message": ""}
        )
    page = overview(team).content.decode()
    grid = page[page.index('<div class="grid cols-2">') :]
    assert grid.index('<section id="waiting"') < grid.index('<section id="tasks-attention"')
    card = grid[grid.index('<section id="tasks-attention"') :]
    card = card[: card.index("</section>")]
    assert '<strong class="warn">1</strong> waiting on a signal' in card
    assert '<strong class="bad">1</strong> stuck' in card
    waiting = card[card.index('class="data attention-table waiting-tasks"') :]
    assert f'href="/tasks/{waits.pk}/"' in waiting and "&lt;i&gt;doc-7&lt;/i&gt;" in waiting
    assert "<code>review_decision</code>" in waiting
    # Named as everywhere else on the dashboard: the agent's title, escaped; else the workflow's.
    assert "Refund &lt;b&gt;policy&lt;/b&gt; v3</a>" in waiting
    assert f"{stuck.workflow.title or stuck.workflow.name}</a>" in card
    assert '<span class="status task-state">draft created</span>' in waiting
    stuck_rows = card[card.index('class="data attention-table stuck-tasks"') :]
    stuck_rows = stuck_rows[: stuck_rows.index("</table>")]
    assert f'href="/tasks/{stuck.pk}/"' in stuck_rows
    assert "failed after 3 attempts: paywall" in stuck_rows
    assert str(waits.pk) not in stuck_rows


def test_the_tasks_card_polls_itself_as_a_partial(team):
    page = overview(team).content.decode()
    assert "No task is waiting or stuck." in page
    response = overview(team, headers={"HX-Request": "true", "HX-Target": "tasks-attention"})
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="tasks-attention"')
    assert 'hx-trigger="every 60s"' in body and "<h1>" not in body
