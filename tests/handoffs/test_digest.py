"""The digest of waiting handoffs (issue 26 §4): what it says, when it goes, where (e-mail through
Django's e-mail API, a Slack-compatible chat webhook on a real loopback server), that a failure
is retried at the next interval, and that two workers never send one digest twice."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from core.errors import InvalidInput, PermissionDeniedError
from core.models import AuditEntry, Role
from handoffs_app.models import Handoff, HandoffSettings
from handoffs_app.services.digest import send_due_digests, update_digest_settings
from handoffs_app.services.handoffs import claim_handoff, request_handoff
from tests.factories import make_member
from tests.multiproc import ProcessPool
from tests.webhooks.receiver import receiver

from .digest_racers import send_digests
from .helpers import AGENT, APPROVAL, QUESTION, make_session, operator

HOUR = 3600


def ask(session, kind="approval", reason="need a person"):
    payload = APPROVAL if kind == "approval" else QUESTION
    return request_handoff(session, kind=kind, reason=reason, payload=payload, actor=AGENT).handoff


def admin_of(project):
    return make_member(project, Role.ADMIN)


def enable(project, *, emails=(), chat_url="", interval=HOUR):
    return update_digest_settings(
        project.pk,
        user=admin_of(project),
        emails=list(emails),
        chat_url=chat_url,
        interval_seconds=interval,
    )


def next_interval(project):
    """The clock at the project's next due time (the job is given `now`)."""
    row = HandoffSettings.objects.get(project=project)
    return row.digest_due_at + timedelta(seconds=1)


def test_it_emails_the_waiting_handoffs_with_links_to_their_workspaces(db, project, settings):
    settings.SWITCHBOARD_PUBLIC_URL = "https://switchboard.example.com/"
    enable(project, emails=["ops@example.com", "lead@example.com"])
    late = ask(make_session(project, agent="refunds"), reason="Refund <120 EUR>?")
    Handoff.objects.filter(pk=late.pk).update(due_at=timezone.now() - timedelta(minutes=5))
    fresh = ask(make_session(project, agent="shipping"), kind="question", reason="Which address?")
    held = ask(make_session(project, agent="billing"), reason="Held by someone")
    claim_handoff(held, user=operator(project))

    run = send_due_digests()

    assert run.sent == 1 and run.failed == 0
    [message] = mail.outbox
    assert message.to == ["ops@example.com", "lead@example.com"]
    assert message.subject == f"[Switchboard] 2 handoffs waiting in {project.name}, 1 overdue"
    body = message.body
    assert f"2 handoffs are waiting for a person in {project.name} (1 overdue)." in body
    assert "The oldest has waited" in body
    assert "OVERDUE · approval from refunds: Refund <120 EUR>?" in body
    assert "question from shipping: Which address?" in body
    assert "Held by someone" not in body  # claimed: somebody is on it
    assert f"https://switchboard.example.com/handoffs/{late.pk}/" in body
    assert f"https://switchboard.example.com/handoffs/{fresh.pk}/" in body
    assert f"https://switchboard.example.com/p/{project.pk}/handoffs/" in body
    row = HandoffSettings.objects.get(project=project)
    assert row.digest_sent_at is not None and row.digest_last_error == ""


def test_it_sends_only_when_something_waits_and_changed_and_the_interval_came(db, project):
    enable(project, emails=["ops@example.com"])
    assert send_due_digests().looked_at == 1 and mail.outbox == []  # nothing waits
    ask(make_session(project))
    # Not yet: the project was looked at, its next look is an interval away.
    assert send_due_digests().looked_at == 0 and mail.outbox == []
    assert send_due_digests(now=next_interval(project)).sent == 1
    assert len(mail.outbox) == 1
    # The same waiting list at the next interval: nothing new to say.
    assert send_due_digests(now=next_interval(project)).sent == 0
    assert len(mail.outbox) == 1
    ask(make_session(project), kind="question")
    assert send_due_digests(now=next_interval(project)).sent == 1
    assert len(mail.outbox) == 2
    assert "2 handoffs" in mail.outbox[1].subject


def test_it_posts_slack_text_to_the_chat_webhook(db, project):
    with receiver() as chat:
        enable(project, chat_url=chat.url)
        handoff = ask(make_session(project, agent="refunds"), reason="Refund <@channel> & more")
        assert send_due_digests().sent == 1
        [request] = chat.wait_for(1)
    assert request.headers["content-type"] == "application/json"
    text = request.json["text"]
    assert set(request.json) == {"text"}
    assert text.startswith(f"1 handoff is waiting for a person in {project.name}.")
    # What the agent typed cannot make a link or a mention in Slack's mrkdwn.
    assert "Refund &lt;@channel&gt; &amp; more" in text and "<@channel>" not in text
    assert f"/handoffs/{handoff.pk}/|approval from refunds" in text
    assert mail.outbox == []


def test_a_failed_send_is_logged_and_tried_again_at_the_next_interval(db, project, caplog):
    with receiver([500]) as chat:
        enable(project, chat_url=chat.url, emails=["ops@example.com"])
        waiting = ask(make_session(project))
        # Not overdue by the next interval (that would be news for the e-mail too).
        Handoff.objects.filter(pk=waiting.pk).update(due_at=timezone.now() + timedelta(days=1))
        run = send_due_digests()
        assert (run.sent, run.failed) == (1, 1)  # the e-mail went, the chat post did not
        row = HandoffSettings.objects.get(project=project)
        assert row.digest_last_error == "Chat webhook answered 500."
        assert "retried next interval" in caplog.text
        # Next interval: only the channel that failed is tried again, and now it works.
        run = send_due_digests(now=next_interval(project))
        assert (run.sent, run.failed) == (1, 0)
        assert len(chat.wait_for(2)) == 2
    assert len(mail.outbox) == 1
    assert HandoffSettings.objects.get(project=project).digest_last_error == ""


def test_the_chat_url_passes_the_webhooks_target_check_when_saved_and_when_sent(
    db, project, settings
):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    with pytest.raises(InvalidInput) as refused:
        enable(project, chat_url="http://127.0.0.1:9/hooks")
    assert "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS" in refused.value.message
    assert not HandoffSettings.objects.filter(project=project).exists()
    with receiver() as chat:
        settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = True
        enable(project, chat_url=chat.url)  # allowed in development, then the switch goes off
        settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = False
        ask(make_session(project))
        run = send_due_digests()
        assert (run.sent, run.failed) == (0, 1)
        assert chat.requests == []  # refused before any connection
    row = HandoffSettings.objects.get(project=project)
    assert row.digest_last_error.startswith("Chat webhook refused: Webhooks cannot be sent")


def test_only_admins_set_it_and_bad_values_save_nothing(db, project):
    with pytest.raises(PermissionDeniedError):
        update_digest_settings(
            project.pk,
            user=operator(project),
            emails=["ops@example.com"],
            chat_url="",
            interval_seconds=HOUR,
        )
    for emails, interval in [(["not an address"], HOUR), (["a@example.com"], 7), ([], HOUR)]:
        with pytest.raises(InvalidInput):
            enable(project, emails=emails, interval=interval)
    assert not HandoffSettings.objects.filter(project=project).exists()
    enable(project, emails=["ops@example.com"])
    entry = AuditEntry.objects.get(project=project, action="handoff.digest")
    assert entry.detail["after"]["emails"] == ["ops@example.com"]


def test_beat_declares_the_digest_job(settings):
    jobs = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "handoffs_app.send_digests" in jobs


@pytest.mark.slow
def test_two_workers_at_once_send_each_digest_once(transactional_db, project):
    with receiver() as chat:
        enable(project, chat_url=chat.url, interval=15 * 60)
        with ProcessPool(3) as workers:
            for round_ in range(4):
                ask(make_session(project), kind="question")  # news for each round
                # Due now, for every worker at once.
                HandoffSettings.objects.filter(project=project).update(digest_due_at=timezone.now())
                sent = workers.run(send_digests, [(), (), ()])
                assert sorted(sent) == [0, 0, 1], f"round {round_}: {sent}"
        assert len(chat.wait_for(4)) == 4
        assert len(chat.requests) == 4


def test_one_project_that_cannot_be_composed_holds_up_no_other(db, monkeypatch, caplog):
    from handoffs_app.services import digest as digest_service
    from tests.factories import make_project

    broken, fine = make_project(), make_project()
    for project in (broken, fine):
        enable(project, emails=[f"ops-{project.pk}@example.com"])
        ask(make_session(project))
    real = digest_service.waiting_digest

    def fails_for_broken(project, **kwargs):
        if project.pk == broken.pk:
            raise RuntimeError("a fault injected for the test")
        return real(project, **kwargs)

    monkeypatch.setattr(digest_service, "waiting_digest", fails_for_broken)
    run = send_due_digests()
    assert (run.looked_at, run.sent) == (2, 1)
    assert [m.to for m in mail.outbox] == [[f"ops-{fine.pk}@example.com"]]
    assert "handoff digest of project" in caplog.text
    # Its next look moved on like the others': tried again at its next interval.
    assert HandoffSettings.objects.get(project=broken).digest_due_at > timezone.now()
