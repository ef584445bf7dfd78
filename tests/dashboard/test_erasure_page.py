"""The erasure page (issue 28 §2): an admin previews what a subject's erasure would remove,
confirms it, and downloads the receipt; holds refuse it; CSRF is required; an erased session's
page is a friendly 410 naming the receipt."""

import json
from unittest import mock

import pytest
from django.test import Client
from django.urls import reverse

from core.actors import Actor
from retention_app.models import ErasureRequest
from retention_app.services.erasure import run_erasure
from retention_app.services.holds import place_hold
from sessions_app.models import Event, Session
from tests.dashboard.conftest import Team, append, message
from tests.factories import make_session

pytestmark = pytest.mark.django_db
SUBJECT = {"metadata_key": "user", "metadata_value": "u-42"}


@pytest.fixture(autouse=True)
def _no_broker():
    with mock.patch("retention_app.services.erasure.current_app.send_task") as send:
        yield send


def subject(team: Team) -> Session:
    session = make_session(team.project, metadata={"user": "u-42"}, external_id="u-42/a")
    append(session, message("my address is 1 Main St"), message("thanks"))
    return session


def url(team: Team, name: str) -> str:
    return reverse(f"dashboard:{name}", args=[team.project.pk])


def test_the_preview_shows_the_counts_and_a_confirm_form_and_erases_nothing(team):
    session = subject(team)
    response = team.client("admin").post(url(team, "erasure_preview"), SUBJECT)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="erasure-preview"' in html and 'id="confirm-form"' in html
    assert "<td>Events</td><td>2</td>" in html.replace("\n", "")
    assert str(session.pk) in html
    assert not ErasureRequest.objects.exists()
    assert Event.objects.filter(session=session).count() == 2


def test_confirming_queues_the_erasure_and_the_receipt_downloads(team, _no_broker):
    session = subject(team)
    admin = team.client("admin")
    refused = admin.post(url(team, "erasure_confirm"), SUBJECT)  # the box not ticked
    assert refused.status_code == 400 and not ErasureRequest.objects.exists()

    response = admin.post(url(team, "erasure_confirm"), {**SUBJECT, "confirm": "yes"})
    assert response.status_code == 302
    erasure = ErasureRequest.objects.get()
    assert erasure.selectors == {"metadata": {"key": "user", "value": "u-42"}}
    assert erasure.requested_by == f"user:{team.admin.get_username()}"
    assert _no_broker.call_args.kwargs["kwargs"] == {"erasure_id": str(erasure.pk)}
    run_erasure(erasure.pk)
    listing = admin.get(url(team, "erasure")).content.decode()
    assert f'id="erasure-{erasure.pk}"' in listing and "done" in listing
    download = admin.get(reverse("dashboard:erasure_receipt", args=[team.project.pk, erasure.pk]))
    assert "attachment" in download["Content-Disposition"]
    receipt = json.loads(b"".join(download.streaming_content))
    assert receipt["session_ids"] == [str(session.pk)]
    assert receipt["counts"]["events"] == 2

    page = admin.get(reverse("dashboard:session_detail", args=[session.pk]))
    assert page.status_code == 410
    assert "Erased" in page.content.decode() and str(erasure.pk) in page.content.decode()
    # Someone outside the project still learns nothing.
    assert (
        team.client("outsider")
        .get(reverse("dashboard:session_detail", args=[session.pk]))
        .status_code
        == 404
    )


def test_a_hold_refuses_it_with_the_holds_listed(team):
    session = subject(team)
    hold, _ = place_hold(
        team.project, session=session, reason="court order 7", actor=Actor.system("t")
    )
    admin = team.client("admin")
    preview = admin.post(url(team, "erasure_preview"), SUBJECT).content.decode()
    assert "court order 7" in preview and 'id="confirm-form"' not in preview
    response = admin.post(url(team, "erasure_confirm"), {**SUBJECT, "confirm": "yes"})
    assert response.status_code == 409
    assert f"Hold #{hold.pk}" in response.content.decode()
    assert not ErasureRequest.objects.exists()


def test_it_needs_the_csrf_token(team):
    subject(team)
    client = Client(enforce_csrf_checks=True)
    client.force_login(team.admin)
    response = client.post(url(team, "erasure_confirm"), {**SUBJECT, "confirm": "yes"})
    assert response.status_code == 403
    assert not ErasureRequest.objects.exists()


def test_bad_selectors_are_refused_in_words(team):
    subject(team)
    admin = team.client("admin")
    response = admin.post(url(team, "erasure_preview"), {"agent": "test-agent"})
    assert response.status_code == 400
    assert "an agent only narrows them" in response.content.decode()
    response = admin.post(url(team, "erasure_preview"), {"metadata_key": "user"})
    assert response.status_code == 400
    assert "Give both the key and the value." in response.content.decode()
