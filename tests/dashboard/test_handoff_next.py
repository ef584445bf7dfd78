"""GET /p/<id>/handoffs/next/?after=<handoff>: the keyboard's "n" (issue 26 §4) through Django's
test client: the next waiting handoff's workspace, the queue when nobody else waits, a friendly
400 for a malformed id, 404 for another project's handoff, 403 for a viewer; nothing changes."""

import pytest
from django.urls import reverse

from core.models import Role
from core.services.projects import add_member
from handoffs_app.models import Handoff
from handoffs_app.services.handoffs import claim_handoff
from tests.dashboard.conftest import Team
from tests.factories import make_session
from tests.handoffs.helpers import ask

pytestmark = pytest.mark.django_db


def next_url(team: Team, after=None) -> str:
    url = reverse("dashboard:handoff_next", args=[team.project.pk])
    return url if after is None else f"{url}?after={after}"


def detail(handoff: Handoff) -> str:
    return reverse("dashboard:handoff_detail", args=[handoff.pk])


def test_it_goes_to_the_next_waiting_handoff_then_back_to_the_queue(team: Team):
    first = ask(make_session(team.project), "approval", priority="high")
    second = ask(make_session(team.project), "question")
    held = ask(make_session(team.project), "question", priority="urgent")
    claim_handoff(held, user=team.admin)
    client = team.client("operator")
    assert client.get(next_url(team))["Location"] == detail(first)
    assert client.get(next_url(team, first.pk))["Location"] == detail(second)
    assert client.get(next_url(team, second.pk))["Location"] == detail(first)  # from the top
    claim_handoff(first, user=team.operator)
    response = client.get(next_url(team, second.pk), follow=True)
    assert response.redirect_chain[-1][0] == reverse(
        "dashboard:handoff_queue", args=[team.project.pk]
    )
    assert "Nobody else is waiting" in response.content.decode()


def test_bad_input_is_a_friendly_400_and_other_projects_stay_hidden(team: Team):
    client = team.client("operator")
    response = client.get(next_url(team, "not-a-uuid"))
    assert response.status_code == 400
    assert "Enter a valid UUID" in response.content.decode()
    elsewhere = ask(make_session(team.other_project), "question")
    assert client.get(next_url(team, elsewhere.pk)).status_code == 404
    # A member of both projects: the handoff is visible, but not this queue's.
    add_member(team.other_project, team.operator, Role.OPERATOR)
    response = client.get(next_url(team, elsewhere.pk))
    assert response.status_code == 400
    assert "another project" in response.content.decode()


def test_a_viewer_is_refused(team: Team):
    ask(make_session(team.project), "question")
    assert team.client("viewer").get(next_url(team)).status_code == 403
