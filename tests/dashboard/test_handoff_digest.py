"""The handoff digest page (issue 26 §4): a console section for admins; others get 403 (404
outside the project), a refused value re-renders the form with the reason and saves nothing."""

from django.urls import reverse

from core.models import AuditEntry
from handoffs_app.models import HandoffSettings


def url(team):
    return reverse("dashboard:handoff_digest", args=[team.project.pk])


def test_it_shows_admins_the_form_in_the_console(team):
    response = team.client("admin").get(url(team))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'aria-current="page">Handoff digest</a>' in body
    assert 'name="emails"' in body and 'name="chat_url"' in body and 'name="interval"' in body
    assert "Last sent</dt><dd>never" in body


def test_it_is_refused_below_admin_and_outside_the_project(team):
    for who in ("operator", "viewer"):
        client = team.client(who)
        assert client.get(url(team)).status_code == 403
        response = client.post(url(team), {"emails": "a@example.com", "interval": "3600"})
        assert response.status_code == 403
    assert team.client("outsider").get(url(team)).status_code == 404
    assert not HandoffSettings.objects.filter(project=team.project).exists()
    # Only admins see the section in the console's navigation.
    nav = team.client("operator").get(reverse("dashboard:project_settings", args=[team.project.pk]))
    assert b"Handoff digest" not in nav.content


def test_it_saves_then_redirects_and_shows_what_was_saved(team):
    client = team.client("admin")
    response = client.post(
        url(team),
        {"emails": "ops@example.com,\nlead@example.com", "chat_url": "", "interval": "900"},
    )
    assert response.status_code == 302 and response["Location"] == url(team)
    row = HandoffSettings.objects.get(project=team.project)
    assert (row.digest_emails, row.digest_interval_seconds) == (
        ["ops@example.com", "lead@example.com"],
        900,
    )
    page = client.get(url(team)).content.decode()
    assert "ops@example.com\nlead@example.com</textarea>" in page
    assert '<option value="900" selected>Every 15 minutes</option>' in page


def test_a_refused_value_says_why_and_saves_nothing(team, settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    client = team.client("admin")
    cases = [
        ({"emails": "ops@", "interval": "3600"}, "is not an e-mail address"),
        (
            {"chat_url": "http://127.0.0.1:8080/hook", "interval": "3600"},
            "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
        ),
        ({"emails": "ops@example.com", "interval": "5"}, "Select a valid choice"),
        ({"interval": "3600"}, "at least one e-mail address or a chat webhook URL"),
    ]
    for data, reason in cases:
        response = client.post(url(team), data)
        assert response.status_code == 400, data
        assert "Nothing was saved." in response.content.decode()
        assert reason in response.content.decode(), data
    assert not HandoffSettings.objects.filter(project=team.project).exists()
    assert not AuditEntry.objects.filter(action="handoff.digest").exists()


def test_it_answers_405_to_other_methods(team):
    assert team.client("admin").put(url(team)).status_code == 405
