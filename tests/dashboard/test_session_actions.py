from django.test import Client
from django.urls import reverse

from core.actors import Actor
from core.models import AuditEntry
from sessions_app.models import Event, Session
from sessions_app.services.lifecycle import close_session, pause_session

HTMX = {"HX-Request": "true"}


def post(team, name, session, who="operator", data=None, headers=None):
    return team.client(who).post(
        reverse(name, args=[session.pk]), data or {}, headers=headers or {}
    )


def test_it_pauses_resumes_and_closes_through_the_services(team, session):
    response = post(team, "dashboard:session_pause", session, data={"reason": "check refund"})
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:session_detail", args=[session.pk])
    session.refresh_from_db()
    assert session.status == "paused"
    lifecycle = Event.objects.get(session=session, kind="lifecycle")
    assert lifecycle.content == {
        "from": "open",
        "to": "paused",
        "reason": "check refund",
        "actor": f"user:{team.operator.username}",
    }
    audit = AuditEntry.objects.get(action="session.paused")
    assert audit.user == team.operator

    post(team, "dashboard:session_resume", session)
    session.refresh_from_db()
    assert session.status == "resumed"
    post(team, "dashboard:session_close", session, who="admin", data={"reason": "done"})
    session.refresh_from_db()
    assert session.status == "closed" and session.closed_at is not None


def test_it_answers_htmx_actions_with_a_message_and_fresh_panes(team, session):
    response = post(team, "dashboard:session_pause", session, headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "Session paused." in body
    assert '<div id="session-header" data-head-seq="7" hx-swap-oob="true">' in body
    assert 'id="session-actions" class="actions" hx-swap-oob="true"' in body
    assert 'id="timeline" class="card"' in body
    assert 'form="resume-form"' in body and 'form="pause-form"' not in body
    assert "<html" not in body


def test_it_refuses_a_move_the_lifecycle_does_not_allow_with_a_friendly_409(team, session):
    close_session(session, actor=Actor.system("t"))
    head = Session.objects.get(pk=session.pk).head_seq
    page = post(team, "dashboard:session_pause", session)
    assert page.status_code == 409
    assert "That cannot be done now" in page.content.decode()
    fragment = post(team, "dashboard:session_resume", session, headers=HTMX)
    assert fragment.status_code == 409
    assert fragment.content.decode().startswith('<div class="inline-error" role="alert">')
    assert Session.objects.get(pk=session.pk).head_seq == head


def test_it_refuses_bad_input_with_400_and_changes_nothing(team, session):
    response = post(team, "dashboard:session_pause", session, data={"reason": "x" * 1001})
    assert response.status_code == 400
    assert Session.objects.get(pk=session.pk).status == "open"
    for data in [{"at_seq": 99}, {"at_seq": -1}, {"at_seq": "three"}, {}]:
        response = post(team, "dashboard:session_fork", session, data=data, headers=HTMX)
        assert response.status_code == 400, data
    assert not Session.objects.filter(parent=session).exists()


def test_it_forks_at_a_seq_and_opens_the_fork(team, session):
    response = post(
        team, "dashboard:session_fork", session, data={"at_seq": 3, "title": "Try again"}
    )
    fork = Session.objects.get(parent=session)
    assert (fork.fork_seq, fork.title, fork.head_seq) == (3, "Try again", 3)
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:session_detail", args=[fork.pk])
    assert AuditEntry.objects.get(action="session.fork").user == team.operator
    htmx = post(team, "dashboard:session_fork", session, data={"at_seq": 0}, headers=HTMX)
    assert htmx.status_code == 200
    newest = Session.objects.filter(parent=session).order_by("-created_at").first()
    assert htmx["HX-Redirect"] == reverse("dashboard:session_detail", args=[newest.pk])


def test_it_enforces_csrf_on_every_action(team, session):
    client = Client(enforce_csrf_checks=True)
    client.force_login(team.operator)
    for name in [
        "dashboard:session_pause",
        "dashboard:session_resume",
        "dashboard:session_close",
        "dashboard:session_fork",
    ]:
        response = client.post(reverse(name, args=[session.pk]), {"at_seq": 1})
        assert response.status_code == 403, name
        assert b"Please reload the page" in response.content
    session.refresh_from_db()
    assert session.status == "open"
    assert not Session.objects.filter(parent=session).exists()
    # With the page's token (sent by htmx in a header) the same request goes through.
    page = client.get(reverse("dashboard:session_detail", args=[session.pk]))
    token = page.context["csrf_token"]
    response = client.post(
        reverse("dashboard:session_pause", args=[session.pk]),
        headers={"X-CSRFToken": str(token), **HTMX},
    )
    assert response.status_code == 200
    session.refresh_from_db()
    assert session.status == "paused"


def test_it_pauses_only_within_the_project(team, session):
    pause_session(session, actor=Actor.system("t"))
    response = post(team, "dashboard:session_resume", session, who="outsider")
    assert response.status_code == 404
    assert Session.objects.get(pk=session.pk).status == "paused"
