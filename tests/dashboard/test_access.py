"""Every dashboard page and fragment: sign-in required, members only (404 for everyone else,
never revealing what exists), actions for operators and up."""

import pytest
from django.test import Client
from django.urls import reverse

from sessions_app.models import AuditEntry, Session

PROJECT_PAGES = ["dashboard:overview", "dashboard:session_list"]
SESSION_GETS = ["dashboard:session_detail", "dashboard:session_events",
                "dashboard:session_inspector", "dashboard:session_export"]
SESSION_POSTS = ["dashboard:session_pause", "dashboard:session_resume",
                 "dashboard:session_close", "dashboard:session_fork"]


def test_it_sends_anonymous_visitors_to_sign_in(team, session):
    client = Client()
    gets = ([reverse(name, args=[team.project.pk]) for name in PROJECT_PAGES]
            + [reverse(name, args=[session.pk]) for name in SESSION_GETS]
            + [reverse("dashboard:home"), reverse("dashboard:switch_project")])
    posts = [reverse(name, args=[session.pk]) for name in SESSION_POSTS]
    for url, response in [(u, client.get(u)) for u in gets] + [(u, client.post(u)) for u in posts]:
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login")), url
    session.refresh_from_db()
    assert session.status == "open"


def test_it_answers_404_to_members_of_another_project(team, session):
    client = team.client("outsider")
    for name in PROJECT_PAGES:
        response = client.get(reverse(name, args=[team.project.pk]))
        assert response.status_code == 404, name
        assert b"Not found" in response.content
    for name in SESSION_GETS:
        assert client.get(reverse(name, args=[session.pk])).status_code == 404, name
    for name in SESSION_POSTS:
        response = client.post(reverse(name, args=[session.pk]), {"at_seq": 1})
        assert response.status_code == 404, name
    session.refresh_from_db()
    assert session.status == "open"
    assert not Session.objects.filter(parent=session).exists()


def test_it_answers_404_for_an_unknown_session_like_for_a_hidden_one(team):
    client = team.client("viewer")
    response = client.get("/sessions/00000000-0000-0000-0000-000000000000/")
    assert response.status_code == 404


@pytest.mark.parametrize("who", ["viewer", "operator", "admin"])
def test_it_lets_every_member_read_every_page(team, session, who):
    client = team.client(who)
    for name in PROJECT_PAGES:
        assert client.get(reverse(name, args=[team.project.pk])).status_code == 200, name
    assert client.get(reverse("dashboard:session_detail", args=[session.pk])).status_code == 200
    assert client.get(reverse("dashboard:session_export", args=[session.pk])).status_code == 200


def test_it_refuses_actions_to_viewers_with_403_and_changes_nothing(team, session):
    client = team.client("viewer")
    for name in SESSION_POSTS:
        response = client.post(reverse(name, args=[session.pk]), {"at_seq": 1})
        assert response.status_code == 403, name
        assert b"Not allowed" in response.content
    session.refresh_from_db()
    assert session.status == "open"
    assert session.head_seq == 6
    assert not Session.objects.filter(parent=session).exists()
    assert not AuditEntry.objects.filter(action__in=["session.paused", "session.fork"]).exists()


def test_it_hides_actions_from_viewers_and_shows_them_to_operators(team, session):
    url = reverse("dashboard:session_detail", args=[session.pk])
    viewer_page = team.client("viewer").get(url).content.decode()
    operator_page = team.client("operator").get(url).content.decode()
    pause = reverse("dashboard:session_pause", args=[session.pk])
    assert pause not in viewer_page
    assert "Fork at seq" not in viewer_page
    assert pause in operator_page
    assert "Fork at seq 6" in operator_page
    assert "Export JSON Lines" in viewer_page


@pytest.mark.parametrize("name", SESSION_POSTS)
def test_it_refuses_get_on_actions(team, session, name):
    response = team.client("operator").get(reverse(name, args=[session.pk]))
    assert response.status_code == 405


@pytest.mark.parametrize("name", SESSION_GETS[:3])
def test_it_refuses_post_on_pages(team, session, name):
    response = team.client("operator").post(reverse(name, args=[session.pk]))
    assert response.status_code == 405


def test_it_remembers_the_project_and_switches_between_member_projects(team, session):
    client = team.client("viewer")
    assert client.get(reverse("dashboard:home"))["Location"] == reverse(
        "dashboard:overview", args=[team.project.pk])
    response = client.get(reverse("dashboard:switch_project"), {"project": team.other_project.pk})
    assert response.status_code == 404  # not a member there
