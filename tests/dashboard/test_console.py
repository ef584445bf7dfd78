"""The project console through the dashboard: what each page shows, and bad input refused with
a clear message and nothing changed (duplicate member, unknown user, the last admin, an expiry
in the past, a taken name, unusable audit filters)."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.forms.models import model_to_dict
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.actors import Actor
from core.models import ApiKey, AuditEntry, Membership, Project, Role
from core.services.audit import record_audit
from tests.factories import make_api_key, make_project, make_session, make_user


def world() -> tuple:
    return (
        sorted(Membership.objects.values_list("project_id", "user_id", "role")),
        [model_to_dict(k) for k in ApiKey.objects.order_by("pk")],
        sorted(Project.objects.values_list("pk", "name")),
        AuditEntry.objects.count(),
    )


def url(name: str, team, *args) -> str:
    return reverse(f"dashboard:{name}", args=[team.project.pk, *args])


def membership(team, user) -> Membership:
    return Membership.objects.get(project=team.project, user=user)


# --- Members ----------------------------------------------------------------------------------


def test_an_admin_adds_a_member_by_email_and_they_see_the_project(team):
    newcomer = make_user("newcomer")
    newcomer.email = "new@example.com"
    newcomer.save()
    client = team.client("admin")
    response = client.post(url("member_add", team), {"user": "NEW@example.com", "role": "viewer"})
    assert response.status_code == 302
    assert membership(team, newcomer).role == Role.VIEWER
    page = client.get(url("members", team))
    assert b"newcomer added as viewer." in page.content
    assert b"new@example.com" in page.content
    mine = team.client("admin")
    mine.force_login(newcomer)
    assert mine.get(reverse("dashboard:home"))["Location"] == url("overview", team)


@pytest.mark.parametrize(
    ("data", "status", "message"),
    [
        (
            {"user": "nobody-here", "role": "viewer"},
            400,
            "To invite someone without an account, enter",
        ),
        ({"user": "", "role": "viewer"}, 400, "Username or e-mail: This field is required."),
        ({"user": "x", "role": "owner"}, 400, "Select a valid choice"),
    ],
)
def test_adding_a_member_refuses_bad_input(team, data, status, message):
    before = world()
    response = team.client("admin").post(url("member_add", team), data)
    assert response.status_code == status
    assert message.encode() in response.content
    assert b"Nothing was changed." in response.content
    assert world() == before


def test_adding_someone_who_is_already_a_member_is_a_conflict(team):
    before = world()
    response = team.client("admin").post(
        url("member_add", team), {"user": team.viewer.username, "role": "admin"}
    )
    assert response.status_code == 409
    assert f"{team.viewer.username} is already a member".encode() in response.content
    assert world() == before
    assert membership(team, team.viewer).role == Role.VIEWER


def test_the_last_admin_can_be_neither_demoted_nor_removed(team):
    mine = membership(team, team.admin)
    client = team.client("admin")
    before = world()
    response = client.post(url("member_role", team, mine.pk), {"role": "operator"})
    assert response.status_code == 409
    assert b"is the last admin" in response.content
    response = client.post(url("member_remove", team, mine.pk))
    assert response.status_code == 409
    assert b"cannot be removed" in response.content
    assert world() == before


def test_an_admin_changes_a_role_and_removes_a_member(team):
    client = team.client("admin")
    viewer = membership(team, team.viewer)
    assert client.post(url("member_role", team, viewer.pk), {"role": "operator"}).status_code == 302
    assert membership(team, team.viewer).role == Role.OPERATOR
    assert client.post(url("member_remove", team, viewer.pk)).status_code == 302
    assert not Membership.objects.filter(project=team.project, user=team.viewer).exists()
    # The removed member no longer sees the project.
    assert team.client("viewer").get(url("overview", team)).status_code == 404
    actions = list(
        AuditEntry.objects.filter(project=team.project, target_type="membership")
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == ["member.role", "member.remove"]


def test_another_projects_member_id_is_not_found(team):
    outsider = Membership.objects.get(user=team.outsider)
    before = world()
    response = team.client("admin").post(url("member_remove", team, outsider.pk))
    assert response.status_code == 404
    assert world() == before


def test_viewers_see_the_members_but_no_forms(team):
    page = team.client("viewer").get(url("members", team)).content
    assert team.admin.username.encode() in page
    assert b"Add a member" not in page and b"Remove" not in page
    assert b"API keys" not in page  # the admin-only sections are not offered


# --- API keys ---------------------------------------------------------------------------------


def test_a_new_key_is_shown_once_then_only_its_prefix(team):
    client = team.client("admin")
    expiry = (timezone.now() + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M")
    response = client.post(
        url("api_key_create", team), {"name": "bot", "scope": "admin", "expires_at": expiry}
    )
    # POST, redirect, GET: a reload of the page that shows the key creates no second one.
    assert response.status_code == 302
    assert response["Location"] == url("api_keys", team)
    assert b"sb_" not in response.content
    key = ApiKey.objects.get(project=team.project, name="bot")
    assert key.scope == "admin" and key.created_by == team.admin
    assert key.expires_at is not None
    response = client.get(response["Location"])
    body = response.content.decode()
    secret = body.split('id="new-key-secret" class="secret">')[1].split("<")[0]
    assert secret.startswith(f"sb_{key.prefix}_") and len(secret) > 30
    assert "no-store" in response["Cache-Control"]
    later = client.get(url("api_keys", team)).content.decode()  # the reload
    assert secret not in later and "new-key-secret" not in later
    assert f"sb_{key.prefix}_…" in later
    assert ApiKey.objects.filter(project=team.project).count() == 1


def test_a_new_key_is_shown_only_on_its_own_projects_page(team):
    """The secret waiting in the session is for the project it was made in: another
    project's keys page neither shows it nor loses it."""
    client = team.client("admin")
    client.post(url("api_key_create", team), {"name": "bot", "scope": "agent"})
    other = Project.objects.create(name="elsewhere")
    Membership.objects.create(project=other, user=team.admin, role=Role.ADMIN)
    elsewhere = client.get(reverse("dashboard:api_keys", args=[other.pk])).content
    assert b"new-key-secret" not in elsewhere
    assert b"new-key-secret" in client.get(url("api_keys", team)).content


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"name": "old", "scope": "agent", "expires_at": "2020-01-01T00:00"},
            "must be in the future",
        ),
        ({"name": "", "scope": "agent"}, "Name: This field is required."),
        ({"name": "k", "scope": "root"}, "Select a valid choice"),
        ({"name": "k", "scope": "agent", "expires_at": "soon"}, "Enter a valid date/time."),
    ],
)
def test_creating_a_key_refuses_bad_input(team, data, message):
    before = world()
    response = team.client("admin").post(url("api_key_create", team), data)
    assert response.status_code == 400
    assert message.encode() in response.content
    assert b"new-key-secret" not in response.content
    assert world() == before


def test_revoking_a_key_of_another_project_is_not_found(team):
    theirs, _ = make_api_key(team.other_project)
    before = world()
    response = team.client("admin").post(url("api_key_revoke", team, theirs.pk))
    assert response.status_code == 404
    assert world() == before


# --- Settings and new projects -------------------------------------------------------------


def test_renaming_to_a_taken_name_is_refused(team):
    before = world()
    response = team.client("admin").post(
        url("project_rename", team), {"name": team.other_project.name}
    )
    assert response.status_code == 409
    assert b"already exists" in response.content
    assert world() == before
    response = team.client("admin").post(url("project_rename", team), {"name": "  "})
    assert response.status_code == 400
    assert world() == before


def test_a_signed_in_person_starts_a_project_and_becomes_its_admin(db):
    founder = make_user("founder")
    client = Client()
    client.force_login(founder)
    assert b"start a project of your own" in client.get(reverse("dashboard:home")).content
    response = client.post(reverse("dashboard:new_project"), {"name": "Founders Inc"})
    project = Project.objects.get(name="Founders Inc")
    assert response["Location"] == reverse("dashboard:overview", args=[project.pk])
    assert Membership.objects.get(project=project).user == founder
    assert Membership.objects.get(project=project).role == Role.ADMIN
    again = client.post(reverse("dashboard:new_project"), {"name": "Founders Inc"})
    assert again.status_code == 409 and b"already exists" in again.content
    assert Project.objects.filter(name="Founders Inc").count() == 1


def test_a_superuser_sees_a_project_made_without_members(db):
    project = make_project("made-through-the-api")
    session = make_session(project, title="from the tour")
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(root)
    assert client.get(reverse("dashboard:home"))["Location"] == reverse(
        "dashboard:overview", args=[project.pk]
    )
    assert client.get(reverse("dashboard:session_detail", args=[session.pk])).status_code == 200
    assert client.get(reverse("dashboard:api_keys", args=[project.pk])).status_code == 200
    members = client.get(reverse("dashboard:members", args=[project.pk])).content
    assert b"No members" in members


# --- Audit log --------------------------------------------------------------------------------


def _entries(team, n: int, **overrides) -> None:
    for i in range(n):
        record_audit(
            team.project,
            actor=overrides.get("actor", Actor.system("seed")),
            action=overrides.get("action", "session.export"),
            target_type=overrides.get("target_type", "session"),
            target_id=overrides.get("target_id", f"t-{i}"),
        )


def test_the_audit_log_filters_and_pages_by_keyset(team):
    _entries(team, 55)
    session = make_session(team.project)
    _entries(
        team, 3, actor=Actor.for_user(team.operator), action="session.paused", target_id=session.pk
    )
    client = team.client("admin")
    page = client.get(url("audit_log", team)).content.decode()
    assert page.count('class="audit-row"') == 50
    assert "Older →" in page
    next_href = page.split('class="button" href="?')[-1].split('"')[0]
    second = client.get(url("audit_log", team) + "?" + next_href.replace("&amp;", "&"))
    # 55 + 3 + the session's own "session.open" entry: 59 in all, 9 on the second page.
    assert second.content.decode().count('class="audit-row"') == 9

    filtered = client.get(
        url("audit_log", team),
        {"actor": f"user:{team.operator.username}", "action": "session.paused"},
    ).content.decode()
    assert filtered.count('class="audit-row"') == 3
    # Each entry links to what it is about.
    assert reverse("dashboard:session_detail", args=[session.pk]) in filtered

    by_type = client.get(url("audit_log", team), {"target_type": "api_key"}).content.decode()
    assert by_type.count('class="audit-row"') == 0 and "No entry matches these filters" in by_type


def test_the_audit_log_time_range(team):
    _entries(team, 2)
    AuditEntry.objects.filter(project=team.project).update(
        created_at=timezone.now() - timedelta(days=3)
    )
    _entries(team, 1, action="api_key.create", target_type="api_key")
    client = team.client("admin")
    since = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    recent = client.get(url("audit_log", team), {"after": since}).content.decode()
    assert recent.count('class="audit-row"') == 1
    older = client.get(url("audit_log", team), {"before": since}).content.decode()
    assert older.count('class="audit-row"') == 2


@pytest.mark.parametrize(
    "params",
    [
        {"after": "2026-01-02T00:00", "before": "2026-01-01T00:00"},
        {"after": "yesterday"},
        {"cursor": "abc"},
        {"cursor": str(2**64)},
    ],
)
def test_unusable_audit_filters_are_a_400_saying_why(team, params):
    response = team.client("admin").get(url("audit_log", team), params)
    assert response.status_code == 400
    assert b"These filters cannot be used." in response.content


# --- Handoff settings, webhooks link, audit links ---------------------------------------------


def handoff_settings(team) -> dict:
    from handoffs_app.services.records import sla_for
    from handoffs_app.services.sla import FIELDS

    current = sla_for(team.project.pk)
    return {name: getattr(current, name) for name in FIELDS} | {"saved": current.pk is not None}


def settings_form(team, **minutes) -> dict:
    """The form as the page renders it (the current values), with `minutes` changed."""
    from handoffs_app.services.sla import FIELDS

    current = handoff_settings(team)
    data = {name.removesuffix("_seconds") + "_minutes": current[name] // 60 for name in FIELDS}
    return data | minutes


def test_an_admin_changes_the_handoff_settings_in_minutes(team):
    client = team.client("admin")
    before = handoff_settings(team)
    response = client.post(
        url("project_handoff_settings", team),
        settings_form(team, question_due_minutes=45, lease_minutes=5),
    )
    assert response.status_code == 302
    assert response["Location"] == url("project_settings", team) + "#handoff-settings"
    after = handoff_settings(team)
    assert after["question_due_seconds"] == 45 * 60 and after["lease_seconds"] == 300
    unchanged = {k for k in before if k not in ("question_due_seconds", "lease_seconds", "saved")}
    assert {k: after[k] for k in unchanged} == {k: before[k] for k in unchanged}
    entry = AuditEntry.objects.get(project=team.project, action="handoff.settings")
    assert entry.actor == f"user:{team.admin.username}"
    assert entry.detail["after"]["lease_seconds"] == 300
    page = client.get(url("project_settings", team)).content.decode()
    assert 'name="question_due_minutes"' in page and 'value="45"' in page
    # The audit log links the entry to the settings' card.
    log = client.get(url("audit_log", team)).content.decode()
    assert f'href="{url("project_settings", team)}#handoff-settings"' in log


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lease_minutes": 0}, "Ensure this value is greater than or equal to 1."),
        ({"lease_minutes": 24 * 60 + 1}, "Ensure this value is less than or equal to 1440."),
        ({"takeover_due_minutes": "soon"}, "Enter a whole number."),
        ({"budget_due_minutes": ""}, "This field is required."),
        ({"expire_after_overdue_minutes": 90 * 24 * 60 + 1}, "less than or equal to 129600"),
        ({"approval_due_minutes": "-5"}, "greater than or equal to 1"),
    ],
)
def test_bad_handoff_settings_are_refused_with_nothing_changed(team, change, message):
    before, counts = handoff_settings(team), world()
    response = team.client("admin").post(
        url("project_handoff_settings", team),
        settings_form(team, **{"lease_minutes": 10, **change}),
    )
    assert response.status_code == 400
    assert b"Nothing was saved." in response.content
    assert message in response.content.decode()
    assert handoff_settings(team) == before and world() == counts  # not even the valid field


def test_members_read_the_handoff_settings_and_only_admins_see_the_form_and_webhooks(team):
    from handoffs_app.services.sla import update_handoff_settings

    update_handoff_settings(team.project.pk, user=team.admin, approval_due_seconds=2 * 3600)
    for who in ("viewer", "operator"):
        page = team.client(who).get(url("project_settings", team)).content.decode()
        assert "Approval: due after" in page and "2 hours" in page and "15 minutes" in page
        assert 'name="approval_due_minutes"' not in page
        assert url("webhooks", team) not in page  # webhooks are the admins'
        response = team.client(who).post(
            url("project_handoff_settings", team), settings_form(team, lease_minutes=2)
        )
        assert response.status_code == 403
    assert handoff_settings(team)["lease_seconds"] == 15 * 60
    admin_page = team.client("admin").get(url("project_settings", team)).content.decode()
    assert 'name="approval_due_minutes"' in admin_page and 'value="120"' in admin_page
    assert f'href="{url("webhooks", team)}"' in admin_page
    assert "No endpoints yet." in admin_page


def test_an_unchanged_form_saves_nothing(team):
    response = team.client("admin").post(url("project_handoff_settings", team), settings_form(team))
    assert response.status_code == 302
    assert not handoff_settings(team)["saved"]
    assert not AuditEntry.objects.filter(action="handoff.settings").exists()


def test_the_audit_log_links_handoff_and_webhook_entries(team):
    from core.services.webhooks import create_endpoint
    from tests.handoffs.helpers import ask

    endpoint, _ = create_endpoint(
        team.project,
        url="https://hooks.example.com/in",
        events=["handoff.created"],
        actor=Actor.for_user(team.admin),
    )
    handoff = ask(make_session(team.project), kind="question")
    client = team.client("admin")
    page = client.get(url("audit_log", team)).content.decode()
    assert f'href="{reverse("dashboard:handoff_detail", args=[handoff.pk])}"' in page
    assert f'href="{url("webhooks", team)}#endpoint-{endpoint.pk}"' in page
    # The filters offer both (the datalists' options), and filtering by the action keeps only
    # its entries: the handoff's, not the endpoint's.
    assert '<option value="handoff.requested">' in page
    assert '<option value="webhook_delivery">' in page
    filtered = client.get(url("audit_log", team), {"action": "handoff.requested"})
    assert filtered.status_code == 200
    rows = filtered.content.decode().split('id="audit-rows"')[1]
    assert f'href="{reverse("dashboard:handoff_detail", args=[handoff.pk])}"' in rows
    assert f"#endpoint-{endpoint.pk}" not in rows
