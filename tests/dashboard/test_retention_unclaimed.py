"""A run queued from the retention page that no worker takes: after
SWITCHBOARD_RETENTION_UNCLAIMED_SECONDS the page says so and names the queue, and while any run
is queued the runs card polls itself (the warning comes by the clock, with no change to push)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from retention_app.models import RetentionRun, RunStatus
from tests.dashboard.conftest import Team

pytestmark = pytest.mark.django_db

WARNING = "No worker has taken it for"


def queued(team: Team, *, minutes_ago: float) -> RetentionRun:
    run = RetentionRun.objects.create(
        project=team.project, job="enforce_retention", trigger="user:ann", status=RunStatus.QUEUED
    )
    RetentionRun.objects.filter(pk=run.pk).update(
        started_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    return run


def page(team: Team, who: str = "viewer", **headers: str) -> str:
    url = reverse("dashboard:retention", args=[team.project.pk])
    response = team.client(who).get(url, **headers)
    assert response.status_code == 200
    return response.content.decode()


def test_a_run_queued_long_ago_is_flagged_with_the_queue_and_a_fresh_one_is_not(team, settings):
    settings.SWITCHBOARD_RETENTION_UNCLAIMED_SECONDS = 120
    settings.SWITCHBOARD_RETENTION_QUEUE = "retention-q"
    fresh = queued(team, minutes_ago=0.5)
    html = page(team)
    assert f'id="run-{fresh.pk}"' in html and WARNING not in html

    stale = queued(team, minutes_ago=5)
    html = page(team)
    row = html[html.index(f'id="run-{stale.pk}"') :]
    row = row[: row.index("</tr>")]
    assert WARNING in row and "5\xa0minutes" in row and "“retention-q” queue" in row
    fresh_row = html[html.index(f'id="run-{fresh.pk}"') :]
    assert WARNING not in fresh_row[: fresh_row.index("</tr>")]


def test_a_taken_or_finished_run_is_never_flagged(team):
    for status in (RunStatus.RUNNING, RunStatus.SUCCEEDED, RunStatus.FAILED):
        run = queued(team, minutes_ago=60)
        RetentionRun.objects.filter(pk=run.pk).update(status=status)
    assert WARNING not in page(team)


def test_the_runs_card_polls_only_while_a_run_is_queued(team):
    assert 'hx-trigger="every 30s"' not in page(team)
    run = queued(team, minutes_ago=0)
    assert 'hx-trigger="every 30s"' in page(team)
    RetentionRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    assert 'hx-trigger="every 30s"' not in page(team)


def test_the_poll_answers_the_runs_card_alone_and_only_to_members(team):
    queued(team, minutes_ago=10)
    html = page(team, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="retention-runs")
    assert html.lstrip().startswith('<section class="card" aria-labelledby="runs-title"')
    assert WARNING in html and "<html" not in html
    url = reverse("dashboard:retention", args=[team.project.pk])
    outsider = team.client("outsider").get(
        url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="retention-runs"
    )
    assert outsider.status_code == 404 and WARNING not in outsider.content.decode()
