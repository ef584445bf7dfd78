"""The project console in Chromium against a real uvicorn: an admin creates an API key (shown
once, copied with the button, then only its prefix), revokes it (the server's next API call
with it answers 401), adds a member who then signs in and sees the project, and filters the
audit log, which also shows new entries live. No page breaks the Content-Security-Policy."""

import re
import urllib.error
import urllib.request

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from core.actors import Actor
from core.models import ApiKey, Membership, Project
from core.services.audit import record_audit
from core.services.projects import revoke_api_key
from tests.browser.conftest import sign_in
from tests.browser.test_content_security_policy import RECORD_VIOLATIONS
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_api_key, make_session, make_user

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def browser_context_args(browser_context_args):
    # The copy button writes to the clipboard; the test reads it back.
    return {**browser_context_args, "permissions": ["clipboard-read", "clipboard-write"]}


@pytest.fixture
def console_page(page):
    """The page, failing the test on any CSP violation it reports."""
    complaints: list[str] = []
    page.on(
        "console",
        lambda msg: complaints.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    page.add_init_script(RECORD_VIOLATIONS)
    page.on("dialog", lambda dialog: dialog.accept())  # the revoke / remove confirmations

    def check() -> None:
        assert page.evaluate("window.__cspViolations || []") == [] and complaints == []

    page.check_policy = check
    return page


def api_status(live_url: str, raw_key: str, path: str = "/api/v1/project") -> int:
    request = urllib.request.Request(
        f"{live_url}{path}", headers={"Authorization": f"Bearer {raw_key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_an_admin_creates_a_key_sees_it_once_and_revokes_it(
    team: Team, live_url, console_page, screenshot
):
    page = console_page
    make_api_key(team.project, name="existing agent key")
    sign_in(page, live_url, team.admin.username)
    page.goto(f"{live_url}/p/{team.project.pk}/")
    page.get_by_role("link", name="Settings", exact=True).click()
    page.locator(".console-nav").get_by_role("link", name="API keys").click()
    expect(page).to_have_url(f"{live_url}/p/{team.project.pk}/keys/")

    page.get_by_label("Name").fill("support-bot production")
    page.get_by_label("Scope").select_option("admin")
    page.get_by_role("button", name="Create key").click()

    secret_box = page.locator("#new-key-secret")
    expect(secret_box).to_be_visible()
    secret = secret_box.inner_text().strip()
    key = ApiKey.objects.get(project=team.project, name="support-bot production")
    assert secret.startswith(f"sb_{key.prefix}_") and key.scope == "admin"
    expect(page.locator("#new-key")).to_contain_text("the only time it is shown")
    copy = page.get_by_role("button", name="Copy")
    copy.click()
    expect(page.locator("button[data-copy]")).to_have_attribute("data-copied", "true")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    screenshot("admin-keys-created")
    page.check_policy()

    # The key works against the server.
    assert api_status(live_url, secret) == 200

    # Seen once: the list shows only the prefix from now on.
    page.goto(f"{live_url}/p/{team.project.pk}/keys/")
    expect(page.locator("#new-key-secret")).to_have_count(0)
    assert secret not in page.content()
    row = page.locator(f"#key-{key.pk}")
    expect(row.locator(".key-prefix")).to_have_text(f"sb_{key.prefix}_…")
    expect(row).to_contain_text("admin")
    expect(row).to_contain_text(team.admin.username)
    expect(row.locator(".key-status")).to_have_text("active")

    row.get_by_role("button", name="Revoke").click()
    expect(page.locator(".messages")).to_contain_text(f"Key {key.prefix} revoked")
    expect(page.locator(f"#key-{key.pk} .key-status")).to_have_text("revoked")
    expect(page.locator(f"#key-{key.pk}").get_by_role("button", name="Revoke")).to_have_count(0)
    screenshot("admin-keys")
    page.check_policy()

    # The very next API call with it, on the server process that served it a moment ago.
    assert api_status(live_url, secret) == 401
    assert api_status(live_url, secret, "/api/v1/sessions") == 401

    # An expiry in the past is refused in words, and nothing is created.
    page.get_by_label("Name").fill("too late")
    page.get_by_label("Expires (UTC, optional)").fill("2020-01-01T00:00")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_role("alert")).to_contain_text("The expiry must be in the future.")
    expect(page.locator("#new-key-secret")).to_have_count(0)
    assert not ApiKey.objects.filter(name="too late").exists()
    screenshot("admin-keys-refused")


def test_an_admin_adds_a_member_who_then_signs_in_and_sees_the_project(
    team: Team, live_url, console_page, browser, screenshot
):
    page = console_page
    newcomer = make_user("newcomer")
    newcomer.email = "newcomer@example.com"
    newcomer.save()
    make_session(team.project, title="Refund for order 4411")

    sign_in(page, live_url, team.admin.username)
    page.goto(f"{live_url}/p/{team.project.pk}/members/")
    page.get_by_label("Username or e-mail").fill("newcomer@example.com")
    page.locator("#id_role").select_option("operator")
    page.get_by_role("button", name="Add or invite").click()
    expect(page.locator(".messages")).to_contain_text("newcomer added as operator.")
    member = Membership.objects.get(project=team.project, user=newcomer)
    expect(page.locator(f"#member-{member.pk}")).to_contain_text("newcomer@example.com")

    # A duplicate is refused on the page, in words.
    page.get_by_label("Username or e-mail").fill("newcomer")
    page.get_by_role("button", name="Add or invite").click()
    expect(page.get_by_role("alert")).to_contain_text("newcomer is already a member")
    screenshot("admin-members")
    page.check_policy()

    # The newcomer, in a browser of their own.
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    theirs = context.new_page()
    sign_in(theirs, live_url, "newcomer")
    expect(theirs).to_have_url(f"{live_url}/p/{team.project.pk}/")
    expect(theirs.get_by_role("heading", name=team.project.name, exact=True)).to_be_visible()
    expect(theirs.locator(".role-badge")).to_have_text("operator")
    theirs.locator(".mainnav").get_by_role("link", name="Sessions").click()
    expect(theirs.locator("#session-rows")).to_contain_text("Refund for order 4411")
    context.close()


def test_an_admin_filters_the_audit_log_and_sees_new_entries_live(
    team: Team, live_url, console_page, screenshot
):
    page = console_page
    session = make_session(team.project, title="Refund for order 4411")
    key, _ = make_api_key(team.project, name="ci")
    for i in range(3):
        record_audit(
            team.project,
            actor=Actor.for_user(team.operator),
            action="session.export",
            target_type="session",
            target_id=session.pk,
            detail={"n": i},
        )

    sign_in(page, live_url, team.admin.username)
    page.goto(f"{live_url}/p/{team.project.pk}/audit/")
    rows = page.locator("#audit-rows tr.audit-row")
    expect(rows).to_have_count(5)  # session.open, api_key.create, 3 exports

    page.get_by_label("Action").fill("session.export")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"/audit/\?.*action=session\.export"))
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text(f"user:{team.operator.username}")
    screenshot("admin-audit")
    page.check_policy()

    # An entry links to its target.
    rows.first.locator("a.target-link").click()
    expect(page).to_have_url(f"{live_url}/sessions/{session.pk}/")
    page.go_back()
    expect(rows).to_have_count(3)

    # Clicking an actor narrows to that actor (the filters stay in the URL).
    page.goto(f"{live_url}/p/{team.project.pk}/audit/")
    page.locator("#audit-rows tr.audit-row a.filter-link", has_text="api_key.create").click()
    expect(page).to_have_url(re.compile(r"\?action=api_key\.create$"))
    expect(rows).to_have_count(1)
    expect(rows.first.locator("a.target-link")).to_have_attribute(
        "href", f"/p/{team.project.pk}/keys/#key-{key.pk}"
    )


@pytest.mark.requires_redis("the audit log's live update from another process")
def test_new_audit_entries_appear_live_on_the_first_page(team: Team, live_url, console_page):
    page = console_page
    sign_in(page, live_url, team.admin.username)
    page.goto(f"{live_url}/p/{team.project.pk}/audit/?action=api_key.revoke")
    expect(page.locator(".live-dot.on")).to_be_attached()
    rows = page.locator("#audit-rows tr.audit-row")
    expect(rows).to_have_count(0)
    key, _ = make_api_key(team.project, name="temporary")  # api_key.create: filtered out
    revoke_api_key(key, actor=Actor.for_user(team.admin))
    expect(rows).to_have_count(1, timeout=5_000)
    expect(rows.first).to_contain_text("api_key.revoke")
    page.check_policy()


def test_the_settings_page(team: Team, live_url, console_page, screenshot):
    page = console_page
    sign_in(page, live_url, team.admin.username)
    page.goto(f"{live_url}/p/{team.project.pk}/settings/")
    page.get_by_label("Project name").fill("Acme support")
    page.get_by_role("button", name="Rename").click()
    expect(page.locator(".messages")).to_contain_text("Project renamed.")
    expect(page.locator("#project-switch")).to_contain_text("Acme support")
    screenshot("admin-settings")
    page.check_policy()
    assert Project.objects.get(pk=team.project.pk).name == "Acme support"
    # A viewer sees the name, and no form.
    page.context.clear_cookies()
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/settings/")
    expect(page.get_by_role("button", name="Rename")).to_have_count(0)
    # The viewer's console has no keys or audit sections.
    expect(page.locator(".console-nav a")).to_have_count(2)
    expect(page.locator(".console-nav")).to_have_text(re.compile(r"^\s*General\s+Members\s*$"))


def test_an_admin_changes_the_handoff_settings_and_a_viewer_reads_them(
    team: Team, live_url, console_page, screenshot
):
    from handoffs_app.services.records import sla_for

    page = console_page
    sign_in(page, live_url, team.admin.username)
    page.goto(f"{live_url}/p/{team.project.pk}/settings/")
    card = page.locator("#handoff-settings")
    card.get_by_label("Lease (a claim lasts, unless renewed)").fill("5")
    card.get_by_label("Question: due after").fill("45")
    card.get_by_role("button", name="Save handoff settings").click()
    expect(page.locator(".messages")).to_contain_text("Handoff settings saved.")
    expect(card.get_by_label("Lease (a claim lasts, unless renewed)")).to_have_value("5")
    screenshot("admin-handoff-settings")
    page.check_policy()
    saved = sla_for(team.project.pk)
    assert (saved.lease_seconds, saved.question_due_seconds) == (300, 45 * 60)
    # The webhooks page is a section of the settings, for admins.
    page.locator(".console-nav").get_by_role("link", name="Webhooks").click()
    expect(page.get_by_role("heading", name="Webhooks", level=1)).to_be_visible()
    page.context.clear_cookies()
    sign_in(page, live_url, team.viewer.username)
    page.goto(f"{live_url}/p/{team.project.pk}/settings/")
    expect(page.locator("#handoff-settings")).to_contain_text("45 minutes")
    expect(page.locator("#handoff-settings input")).to_have_count(0)


def test_the_django_admin_lists_keys_without_their_hash(
    team: Team, live_url, console_page, screenshot
):
    page = console_page
    key, _ = make_api_key(team.project, name="support-bot")
    get_user_model().objects.create_superuser("staff", "staff@example.com", "pw-for-tests-1")
    sign_in(page, live_url, "staff")
    page.goto(f"{live_url}/admin/core/apikey/")
    expect(page.locator("#result_list")).to_contain_text("support-bot")
    expect(page.locator("#changelist-filter")).to_contain_text("By scope")
    assert ApiKey.objects.get(pk=key.pk).hashed_secret not in page.content()
    screenshot("admin-django-apikeys")
    page.goto(f"{live_url}/admin/sessions_app/session/")
    expect(page.locator("#changelist-filter")).to_contain_text("By status")
    screenshot("admin-django-sessions")
    page.check_policy()


def test_a_person_in_no_project_starts_one(db, live_url, console_page, screenshot):
    page = console_page
    make_user("founder")
    sign_in(page, live_url, "founder")
    expect(page.get_by_role("heading", name="You are not in any project yet")).to_be_visible()
    page.get_by_role("link", name="start a project of your own").click()
    page.get_by_label("Project name").fill("Founders Inc")
    screenshot("admin-new-project")
    page.get_by_role("button", name="Create project").click()
    project = Project.objects.get(name="Founders Inc")
    expect(page).to_have_url(f"{live_url}/p/{project.pk}/")
    expect(page.locator(".role-badge")).to_have_text("admin")
    expect(page.locator(".messages")).to_contain_text("you are its admin")
    page.check_policy()
