"""The handoff queue and workspace through Django's test client: what each role sees, the
actions of the lease holder, previews that change nothing, bad input that changes nothing."""

import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from handoffs_app.models import Handoff, HandoffStatus
from handoffs_app.services.handoffs import claim_handoff
from sessions_app.models import Event, Session
from sessions_app.services.state import state_at
from tests.dashboard.conftest import Team, append, fact, message, state
from tests.factories import make_session
from tests.handoffs.helpers import ask

HTMX = {"HX-Request": "true"}


@pytest.fixture
def approval(team: Team):
    session = make_session(team.project, agent="refunds", title="Refund for order A-1001")
    append(
        session, message("I want my money back."), state({"stage": "refund"}), fact("tier", "gold")
    )
    return ask(session, "approval")


@pytest.fixture
def question(team: Team):
    session = make_session(team.project, agent="shipping", title="Address change")
    append(session, message("Please ship to my new address."))
    return ask(session, "question", priority="high")


def url(name, handoff):
    return reverse(f"dashboard:{name}", args=[handoff.pk])


def test_the_queue_lists_active_handoffs_by_priority_then_wait_with_filters(
    team, approval, question
):
    other = ask(make_session(team.other_project), "question")
    client = team.client("viewer")
    page = client.get(reverse("dashboard:handoff_queue", args=[team.project.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    # The high-priority question comes first, though it was asked later.
    assert body.index(str(question.pk)) < body.index(str(approval.pk))
    assert str(other.pk) not in body
    # Counts in the navigation and above the table.
    assert re.search(r'id="nav-handoff-count"[^>]*>2<', body)
    assert "<strong>2</strong> waiting" in body

    page = client.get(
        reverse("dashboard:handoff_queue", args=[team.project.pk]), {"kind": "approval"}
    )
    assert str(approval.pk) in page.content.decode()
    assert str(question.pk) not in page.content.decode()

    claim_handoff(question, user=team.operator)
    page = client.get(
        reverse("dashboard:handoff_queue", args=[team.project.pk]), {"unclaimed": "on"}
    )
    assert str(question.pk) not in page.content.decode()
    mine = team.client("operator").get(
        reverse("dashboard:handoff_queue", args=[team.project.pk]), {"mine": "on"}
    )
    assert str(question.pk) in mine.content.decode()
    assert str(approval.pk) not in mine.content.decode()
    assert team.operator.username in mine.content.decode()  # the holder column

    bad = client.get(reverse("dashboard:handoff_queue", args=[team.project.pk]), {"kind": "nope"})
    assert bad.status_code == 400
    assert "cannot be used" in bad.content.decode()


def test_the_overview_counts_waiting_handoffs(team, approval, question):
    body = team.client("viewer").get(reverse("dashboard:overview", args=[team.project.pk])).content
    text = body.decode()
    assert 'id="handoffs-waiting"' in text
    assert re.search(r'class="stat[^"]*">2<', text)


def test_the_workspace_shows_the_request_and_context_read_only_to_a_viewer(team, approval):
    body = team.client("viewer").get(url("handoff_detail", approval)).content.decode()
    assert "refund" in body and "A-1001" in body  # the proposed action and its args
    assert "I want my money back." in body  # the conversation
    assert "tier" in body and "gold" in body  # facts
    assert "&quot;stage&quot;: &quot;refund&quot;" in body  # working state
    assert "You can read this handoff" in body
    assert 'id="claim-button"' not in body
    assert "asked for a person" in body  # the records


def test_another_projects_handoff_is_a_404(team, approval):
    assert team.client("outsider").get(url("handoff_detail", approval)).status_code == 404
    other = ask(make_session(team.other_project), "question")
    assert team.client("admin").get(url("handoff_detail", other)).status_code == 404
    assert team.client("admin").post(url("handoff_claim", other)).status_code == 404


def test_a_superuser_opens_any_projects_handoff_as_an_admin(team, approval):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(root)
    page = client.get(url("handoff_detail", approval))
    assert page.status_code == 200
    assert 'id="claim-button"' in page.content.decode()  # an admin's actions
    assert client.post(url("handoff_claim", approval), headers=HTMX).status_code == 200
    assert Handoff.objects.get(pk=approval.pk).lease_holder == root


def test_claim_then_someone_else_sees_who_holds_it_and_cannot_act(team, approval):
    op = team.client("operator")
    response = op.post(url("handoff_claim", approval), headers=HTMX)
    assert response.status_code == 200
    assert "You hold this handoff" in response.content.decode()
    admin = team.client("admin")
    body = admin.get(url("handoff_detail", approval)).content.decode()
    assert f"Held by <strong>{team.operator.username}</strong>" in body
    assert 'id="accept-button"' not in body
    refused = admin.post(url("handoff_accept", approval), headers=HTMX)
    assert refused.status_code == 409
    assert "Only the person holding" in refused.content.decode()
    assert Handoff.objects.get(pk=approval.pk).status == HandoffStatus.CLAIMED


def test_edit_is_previewed_as_a_diff_then_sent(team, approval):
    op = team.client("operator")
    op.post(url("handoff_claim", approval))
    edited = {"order": "A-1001", "amount": "80.00"}
    before = Event.objects.count()
    preview = op.post(url("handoff_edit", approval), {"args": json.dumps(edited)}, headers=HTMX)
    assert preview.status_code == 200
    text = preview.content.decode()
    assert 'class="diff-del"' in text and "120.00" in text
    assert 'class="diff-add"' in text and "80.00" in text
    assert Handoff.objects.get(pk=approval.pk).status == HandoffStatus.CLAIMED  # nothing sent
    assert Event.objects.count() == before
    done = op.post(
        url("handoff_edit", approval), {"args": json.dumps(edited), "confirm": "on"}, headers=HTMX
    )
    assert done.status_code == 200
    h = Handoff.objects.get(pk=approval.pk)
    assert h.status == HandoffStatus.ANSWERED
    assert h.answer["type"] == "edit" and h.answer["args"] == edited
    back = op.post(url("handoff_hand_back", approval), {"reason": "go ahead"})
    assert back.status_code == 302
    assert Session.objects.get(pk=approval.session_id).status == "resumed"


def test_bad_input_is_a_friendly_message_and_changes_nothing(team, approval, question):
    op = team.client("operator")
    op.post(url("handoff_claim", approval))
    op.post(url("handoff_claim", question))
    before = Event.objects.count()
    bad_json = op.post(
        url("handoff_edit", approval), {"args": "{not json", "confirm": "on"}, headers=HTMX
    )
    assert bad_json.status_code == 400
    assert "not valid JSON" in bad_json.content.decode()
    not_object = op.post(url("handoff_state", approval), {"patch": "[1, 2]"}, headers=HTMX)
    assert not_object.status_code == 400
    assert "must be a JSON object" in not_object.content.decode()
    # Budget answers are not allowed on an approval: the service's 422, in words.
    not_allowed = op.post(url("handoff_budget", approval), {"max_tokens": "10"}, headers=HTMX)
    assert not_allowed.status_code == 422
    assert "does not accept the answer" in not_allowed.content.decode()
    wrong_choice = op.post(url("handoff_respond", question), {"choice": "maybe"}, headers=HTMX)
    assert wrong_choice.status_code == 400
    assert "not one of the question" in wrong_choice.content.decode()
    # Without htmx: the same sentence on a page.
    page = op.post(url("handoff_edit", approval), {"args": "{", "confirm": "on"})
    assert page.status_code == 400 and "not valid JSON" in page.content.decode()
    assert Event.objects.count() == before
    assert {h.status for h in Handoff.objects.all()} == {HandoffStatus.CLAIMED}


def test_state_patch_preview_then_apply_and_facts(team, approval):
    op = team.client("operator")
    op.post(url("handoff_claim", approval))
    preview = op.post(
        url("handoff_state", approval), {"patch": '{"stage": "approved", "x": 1}'}, headers=HTMX
    )
    text = preview.content.decode()
    assert 'class="diff-del"' in text and "refund" in text
    assert 'class="diff-add"' in text and "approved" in text
    session = Session.objects.get(pk=approval.session_id)
    assert state_at(session).state == {"stage": "refund"}
    op.post(url("handoff_state", approval), {"patch": '{"stage": "approved"}', "confirm": "on"})
    op.post(url("handoff_facts", approval), {"key": "verified", "value": "true"})
    folded = state_at(Session.objects.get(pk=approval.session_id))
    assert folded.state == {"stage": "approved"}
    assert folded.facts["verified"]["value"] is True


def test_question_answered_by_a_choice(team, question):
    op = team.client("operator")
    op.post(url("handoff_claim", question))
    op.post(url("handoff_respond", question), {"choice": "yes"})
    h = Handoff.objects.get(pk=question.pk)
    assert h.answer["choice"] == "yes" and h.answer["text"] == "yes"


def test_takeover_messages_then_close(team, approval):
    op = team.client("operator")
    op.post(url("handoff_claim", approval))
    op.post(url("handoff_take_over", approval))
    body = op.get(url("handoff_detail", approval)).content.decode()
    assert 'id="human-message"' in body
    op.post(url("handoff_message", approval), {"text": "Hello, a person here."})
    op.post(url("handoff_close", approval), {"reason": "done"})
    session = Session.objects.get(pk=approval.session_id)
    assert session.status == "closed"
    humans = Event.objects.filter(session_id=session.pk, kind="message", role="human")
    assert [e.content["text"] for e in humans] == ["Hello, a person here."]


def test_admin_reassigns(team, approval):
    team.client("operator").post(url("handoff_claim", approval))
    response = team.client("admin").post(
        url("handoff_reassign", approval), {"to_user": team.admin.pk}
    )
    assert response.status_code == 302
    assert Handoff.objects.get(pk=approval.pk).lease_holder_id == team.admin.pk


def test_the_session_page_shows_handoff_steps_in_its_timeline(team, approval):
    team.client("operator").post(url("handoff_claim", approval))
    body = (
        team.client("viewer")
        .get(reverse("dashboard:session_detail", args=[approval.session_id]))
        .content.decode()
    )
    assert "approval: asked for a person" in body
    assert f"approval: claimed by {team.operator.username}" in body
    assert reverse("dashboard:handoff_detail", args=[approval.pk]) in body


def test_sessions_list_filters_by_pending_handoff(team, approval):
    plain = make_session(team.project, title="No handoff here")
    body = (
        team.client("viewer")
        .get(reverse("dashboard:session_list", args=[team.project.pk]), {"has_handoff": "yes"})
        .content.decode()
    )
    assert str(approval.session_id) in body
    assert str(plain.pk) not in body


def test_the_holders_page_renews_the_lease_and_renew_extends_it(team, approval):
    from datetime import timedelta

    from django.utils import timezone

    op = team.client("operator")
    op.post(url("handoff_claim", approval))
    body = op.get(url("handoff_detail", approval)).content.decode()
    renew = url("handoff_renew", approval)
    # The keeper fires at a third of the project's lease (15 minutes by default).
    assert f'id="lease-keeper" hidden hx-post="{renew}" hx-trigger="lease-renew"' in body
    assert 'data-renew-every="300"' in body
    assert 'data-lease-mine="true"' in body
    # Other operators are not counting down a lease of theirs.
    assert (
        "data-lease-mine"
        not in team.client("admin").get(url("handoff_detail", approval)).content.decode()
    )
    Handoff.objects.filter(pk=approval.pk).update(
        lease_expires_at=timezone.now() + timedelta(seconds=30)
    )
    renewed = op.post(renew, headers=HTMX)
    # The header with the lease's new end, swapped out of band; nothing else on the page moves.
    assert renewed.status_code == 200 and renewed["HX-Reswap"] == "none"
    assert 'id="handoff-header" hx-swap-oob="true"' in renewed.content.decode()
    left = Handoff.objects.get(pk=approval.pk).lease_expires_at - timezone.now()
    assert left > timedelta(minutes=14)
    # Someone else's heartbeat is refused and changes nothing.
    assert team.client("admin").post(renew, headers=HTMX).status_code == 409


def test_it_renews_at_a_third_of_the_projects_lease(team, approval):
    from handoffs_app.models import HandoffSettings

    HandoffSettings.objects.create(project=team.project, lease_seconds=60)
    op = team.client("operator")
    op.post(url("handoff_claim", approval))
    assert 'data-renew-every="20"' in op.get(url("handoff_detail", approval)).content.decode()


def test_a_lapsed_claim_shows_claim_and_a_refused_answer_says_why(team, question):
    from datetime import timedelta

    from django.utils import timezone

    op = team.client("operator")
    op.post(url("handoff_claim", question))
    Handoff.objects.filter(pk=question.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    # The renewal is refused with the page as it is: the claim is lost, Claim is offered.
    refused = op.post(url("handoff_renew", question), headers=HTMX)
    body = refused.content.decode()
    assert refused.status_code == 409
    assert 'id="claim-button"' in body and "Your claim has lapsed" in body
    assert "what you typed is kept" in body
    # So is a send: nothing written, the same page.
    sent = op.post(url("handoff_respond", question), {"text": "Yes"}, headers=HTMX)
    assert sent.status_code == 409 and 'id="claim-button"' in sent.content.decode()
    assert Handoff.objects.get(pk=question.pk).answer is None
    # Claim again (before the lease job swept it): held anew, and the answer goes through.
    op.post(url("handoff_claim", question), headers=HTMX)
    assert op.post(url("handoff_respond", question), {"text": "Yes"}).status_code == 302
    assert Handoff.objects.get(pk=question.pk).status == HandoffStatus.ANSWERED


def test_release_and_hand_back_say_what_they_do(team, approval):
    op = team.client("operator")
    op.post(url("handoff_claim", approval))
    body = op.get(url("handoff_detail", approval)).content.decode()
    assert ">Hand back to the agent</button>" in body and ">Release the claim</button>" in body
    assert "nothing is sent to the agent" in body
    op.post(url("handoff_take_over", approval))
    body = op.get(url("handoff_detail", approval)).content.decode()
    assert "Your take-over ends with it: the agent may write in the session again" in body


def test_release_puts_it_back_in_the_queue(team, approval):
    op = team.client("operator")
    op.post(url("handoff_claim", approval))
    op.post(url("handoff_release", approval), {"reason": "wrong desk"})
    h = Handoff.objects.get(pk=approval.pk)
    assert h.status == HandoffStatus.OPEN and h.lease_holder_id is None


def test_a_cursor_the_server_did_not_issue_is_a_friendly_400(team, approval):
    response = team.client("viewer").get(
        reverse("dashboard:handoff_queue", args=[team.project.pk]), {"cursor": "bogus"}
    )
    assert response.status_code == 400
    assert "not one this server issued" in response.content.decode()
