"""Access details beyond the permission matrix (test_permission_matrix.py, which answers every
dashboard URL for every persona): unknown ids look like hidden ones, actions are hidden from
viewers, wrong methods, and the project switcher."""

import pytest
from django.urls import reverse

SESSION_GETS = [
    "dashboard:session_detail",
    "dashboard:session_events",
    "dashboard:session_inspector",
    "dashboard:session_export",
]
SESSION_POSTS = [
    "dashboard:session_pause",
    "dashboard:session_resume",
    "dashboard:session_close",
    "dashboard:session_fork",
]


def test_it_answers_404_for_an_unknown_session_like_for_a_hidden_one(team):
    client = team.client("viewer")
    response = client.get("/sessions/00000000-0000-0000-0000-000000000000/")
    assert response.status_code == 404


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
        "dashboard:overview", args=[team.project.pk]
    )
    response = client.get(reverse("dashboard:switch_project"), {"project": team.other_project.pk})
    assert response.status_code == 404  # not a member there
