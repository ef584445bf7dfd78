"""The webhooks page: admins manage endpoints and redeliver; operators, viewers and outsiders
cannot (403 / 404); bad URLs are refused in words, nothing saved; user content is escaped."""

import re
import socket

import pytest
from django.test import override_settings
from django.urls import reverse

from core.actors import Actor
from core.errors import InvalidInput
from core.models import AuditEntry, DeliveryStatus, WebhookDelivery, WebhookEndpoint
from core.services.webhooks import create_endpoint, deliver_due
from tests.dashboard.conftest import Team, _fresh_cache, team  # noqa: F401

from .conftest import paused_session, resolving
from .receiver import receiver

pytestmark = pytest.mark.django_db


def url(name, *args):
    return reverse(f"dashboard:{name}", args=args)


def make_endpoint(project, address="https://hooks.example.com/in", events=("session.paused",)):
    return create_endpoint(project, url=address, events=list(events), actor=Actor.system("t"))


def test_it_shows_the_admin_the_page_and_a_nav_link(team: Team):
    endpoint, secret = make_endpoint(team.project)
    response = team.client("admin").get(url("webhooks", team.project.pk))
    assert response.status_code == 200
    html = response.content.decode()
    assert "https://hooks.example.com/in" in html and "session.paused" in html
    assert endpoint.secret_hint in html
    assert secret not in html  # shown once, at creation only
    assert f'href="{url("webhooks", team.project.pk)}"' in html


@pytest.mark.parametrize("who", ["operator", "viewer"])
def test_operators_and_viewers_get_403_and_no_nav_link(team: Team, who):
    make_endpoint(team.project)
    client = team.client(who)
    assert client.get(url("webhooks", team.project.pk)).status_code == 403
    overview = client.get(url("overview", team.project.pk)).content.decode()
    assert url("webhooks", team.project.pk) not in overview


@pytest.mark.parametrize("who", ["operator", "viewer"])
def test_operators_and_viewers_cannot_create_toggle_delete_or_redeliver(team: Team, who):
    endpoint, _ = make_endpoint(team.project)
    paused_session(team.project)
    delivery = WebhookDelivery.objects.get()
    client = team.client(who)
    pid = team.project.pk
    posts = [
        (url("webhook_create", pid), {"url": "https://x.example.com/", "events": "session.paused"}),
        (url("webhook_toggle", pid, endpoint.pk), {"active": "false"}),
        (url("webhook_delete", pid, endpoint.pk), {}),
        (url("webhook_redeliver", pid, delivery.pk), {}),
    ]
    for path, data in posts:
        assert client.post(path, data).status_code == 403, path
    assert list(WebhookEndpoint.objects.values_list("url", "active")) == [(endpoint.url, True)]
    delivery.refresh_from_db()
    assert delivery.attempts == 0


def test_another_projects_endpoint_and_delivery_answer_404(team: Team):
    theirs, _ = make_endpoint(team.other_project)
    paused_session(team.other_project)
    delivery = WebhookDelivery.objects.get()
    admin = team.client("admin")  # an admin here, not there
    pid = team.project.pk
    assert admin.post(url("webhook_toggle", pid, theirs.pk), {"active": "false"}).status_code == 404
    assert admin.post(url("webhook_delete", pid, theirs.pk)).status_code == 404
    assert admin.post(url("webhook_redeliver", pid, delivery.pk)).status_code == 404
    # And the outsider (admin of the other project) cannot open this project's page.
    assert team.client("outsider").get(url("webhooks", pid)).status_code == 404
    theirs.refresh_from_db()
    assert theirs.active and WebhookEndpoint.objects.filter(pk=theirs.pk).exists()


def test_an_admin_creates_an_endpoint_and_sees_its_secret_once(team: Team):
    client = team.client("admin")
    response = client.post(
        url("webhook_create", team.project.pk),
        {"url": "https://hooks.example.com/sb", "events": ["session.paused", "handoff.created"]},
    )
    assert response.status_code == 201
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.events == ["handoff.created", "session.paused"]
    assert endpoint.created_by == team.admin and endpoint.active
    assert endpoint.secret.startswith("whsec_")
    assert endpoint.secret in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    assert endpoint.secret not in client.get(url("webhooks", team.project.pk)).content.decode()
    assert AuditEntry.objects.filter(action="webhook.created", target_id=str(endpoint.pk)).exists()


@pytest.mark.parametrize(
    "data, message",
    [
        ({"url": "ftp://example.com/", "events": "session.paused"}, "must start with http"),
        ({"url": "http://10.0.0.5/hook", "events": "session.paused"}, "loopback, private"),
        ({"url": "http://localhost:8000/", "events": "session.paused"}, "this machine"),
        ({"url": "https://example.com/"}, "Choose at least one event."),
        ({"url": "https://example.com/", "events": "session.exploded"}, "valid choice"),
        ({"url": "", "events": "session.paused"}, "required"),
    ],
)
def test_bad_input_is_refused_in_words_and_nothing_is_saved(team: Team, settings, data, message):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    response = team.client("admin").post(url("webhook_create", team.project.pk), data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert "Nothing was saved." in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


# The loopback spelled as the resolver (or the HTTP client) reads it but a plain look at the
# URL does not (issue 23): numeric forms inet_aton takes, IDNA's dots and digits, percent-escapes,
# IPv6 forms carrying 127.0.0.1, a fully qualified localhost, this machine's name, a space.
LOOPBACK_SPELLINGS = [
    ("http://2130706433/h", "loopback, private"),
    ("http://0x7f000001/h", "loopback, private"),
    ("http://0177.0.0.1/h", "loopback, private"),
    ("http://127.1/h", "loopback, private"),
    ("http://0x7f.1/h", "loopback, private"),
    ("http://0/h", "loopback, private"),
    ("http://127.0.0.1./h", "loopback, private"),
    ("http://127\u30020\u30020\u30021/h", "loopback, private"),
    ("http://\u2460\u2461\u2466.0.0.1/h", "loopback, private"),
    ("http://%31%32%37.0.0.1/h", "loopback, private"),
    ("http://[::127.0.0.1]/h", "loopback, private"),
    ("http://[2002:7f00:1::]/h", "loopback, private"),
    ("http://localhost./h", "this machine"),
    ("http://LOCALHOST./h", "this machine"),
    ("http://%6c%6f%63%61%6c%68%6f%73%74:8000/h", "this machine"),
    (f"http://{socket.gethostname()}:8000/h", "this machine"),
    ("http://127.0.0.1 /h", "host name is not valid"),
]


@pytest.mark.parametrize("address, message", LOOPBACK_SPELLINGS)
@override_settings(SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS=False)
def test_every_spelling_of_the_loopback_is_refused_when_saved(team: Team, address, message):
    response = team.client("admin").post(
        url("webhook_create", team.project.pk), {"url": address, "events": "session.paused"}
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "Nothing was saved." in html and re.search(f"<li>URL: [^<]*{message}", html)
    assert not WebhookEndpoint.objects.exists()
    # The service refuses it the same way for any other caller.
    with pytest.raises(InvalidInput, match=message):
        make_endpoint(team.project, address)


@override_settings(SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS=False)
def test_public_targets_are_saved_and_a_name_that_does_not_resolve_yet_is_saved_with_a_note(
    team: Team, monkeypatch
):
    resolving(
        monkeypatch,
        {
            "hooks.example.com": "93.184.216.34",
            "new.example.com": None,
            "evil.example.com": "10.0.0.1",
        },
    )
    client = team.client("admin")
    create = url("webhook_create", team.project.pk)
    for address in ("https://93.184.216.34/in", "https://hooks.example.com/in"):
        response = client.post(create, {"url": address, "events": "session.paused"})
        assert response.status_code == 201, address
        assert 'id="webhook-unresolved"' not in response.content.decode()
    # Delivery lets a name that does not resolve through to a connection failure that is
    # retried (it may resolve later): saving does the same, and says so.
    response = client.post(
        create, {"url": "https://new.example.com/in", "events": "session.paused"}
    )
    assert response.status_code == 201
    assert "new.example.com</span> does not resolve from here" in response.content.decode()
    response = client.post(
        create, {"url": "https://evil.example.com/in", "events": "session.paused"}
    )
    assert response.status_code == 400
    assert (
        "URL: The host name points to a private or reserved address." in response.content.decode()
    )
    assert sorted(WebhookEndpoint.objects.values_list("url", flat=True)) == [
        "https://93.184.216.34/in",
        "https://hooks.example.com/in",
        "https://new.example.com/in",
    ]


def test_an_admin_disables_enables_and_deletes(team: Team):
    endpoint, _ = make_endpoint(team.project)
    paused_session(team.project)
    client = team.client("admin")
    pid = team.project.pk
    assert (
        client.post(url("webhook_toggle", pid, endpoint.pk), {"active": "false"}).status_code == 302
    )
    endpoint.refresh_from_db()
    assert not endpoint.active
    assert (
        client.post(url("webhook_toggle", pid, endpoint.pk), {"active": "maybe"}).status_code == 400
    )
    assert (
        client.post(url("webhook_toggle", pid, endpoint.pk), {"active": "true"}).status_code == 302
    )
    endpoint.refresh_from_db()
    assert endpoint.active
    assert client.post(url("webhook_delete", pid, endpoint.pk)).status_code == 302
    assert not WebhookEndpoint.objects.exists() and not WebhookDelivery.objects.exists()
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"webhook.disabled", "webhook.enabled", "webhook.deleted"} <= actions


def test_writes_refuse_get(team: Team):
    endpoint, _ = make_endpoint(team.project)
    client = team.client("admin")
    pid = team.project.pk
    assert client.get(url("webhook_create", pid)).status_code == 405
    assert client.get(url("webhook_delete", pid, endpoint.pk)).status_code == 405


def test_the_redeliver_button_sends_it_again_under_the_same_id(team: Team):
    with receiver([500]) as recv:
        make_endpoint(team.project, recv.url)
        paused_session(team.project)
        deliver_due()
        delivery = WebhookDelivery.objects.get()
        page = team.client("admin").get(url("webhooks", team.project.pk)).content.decode()
        assert str(delivery.pk) in page and "The receiver answered 500." in page
        response = team.client("admin").post(
            url("webhook_redeliver", team.project.pk, delivery.pk), follow=True
        )
        assert "Redelivered: the receiver answered 200." in response.content.decode()
        assert [r.headers["switchboard-delivery"] for r in recv.requests] == [str(delivery.pk)] * 2
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.SUCCEEDED


def test_user_content_is_escaped(team: Team):
    make_endpoint(team.project, 'https://hooks.example.com/in?q="><script>alert(1)</script>')
    html = team.client("admin").get(url("webhooks", team.project.pk)).content.decode()
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize("target", ["http://127.0.0.1:9000/hook", "http://localhost:8000/"])
def test_a_refused_local_target_names_the_setting_that_allows_it(team: Team, settings, target):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    data = {"url": target, "events": "session.paused"}
    response = team.client("admin").post(url("webhook_create", team.project.pk), data)
    assert response.status_code == 400
    assert "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS=true" in response.content.decode()
