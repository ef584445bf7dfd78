"""The retention page's agent overrides form: an agent picked from the project's agents, each
duration in days, hours, minutes or seconds (or "never"), only the fields filled in apply; add,
change and remove an override; bad input refused with a friendly error and nothing saved; the
preview covers the overrides being edited; any duration the API stored shows exactly and saves
back unchanged."""

import json
import re
from datetime import timedelta
from html.parser import HTMLParser
from urllib.parse import urlencode

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from core.models import KeyScope
from retention_app.models import DURATION_FIELDS, RetentionPolicy
from retention_app.services.policies import project_policies, save_policy
from tests.dashboard.conftest import Team
from tests.factories import make_api_key, make_session
from tests.retention.helpers import SYSTEM, append, closed, conversation

pytestmark = pytest.mark.django_db

DAY = 86400
BASE = {
    "close_idle_after": "1",
    "close_paused_after": "3",
    "archive_closed_after": "7",
    "compact_after": "30",
    "delete_after": "",
    "outcome_compact_after": "",
    "outcome_delete_after": "",
    "keep_tags": "",
}


def post(team: Team, overrides: list[dict[str, str]], action: str = "save", initial: int = 0):
    data: dict[str, str] = {
        **BASE,
        "action": action,
        "agents-TOTAL_FORMS": str(len(overrides)),
        "agents-INITIAL_FORMS": str(initial),
        "agents-MIN_NUM_FORMS": "0",
        "agents-MAX_NUM_FORMS": "1000",
    }
    for i, form in enumerate(overrides):
        for name in DURATION_FIELDS:
            data[f"agents-{i}-{name}_unit"] = "days"
        data.update({f"agents-{i}-{key}": value for key, value in form.items()})
    url = reverse("dashboard:retention_policy", args=[team.project.pk])
    return team.client("admin").post(url, data)


@pytest.fixture
def agents(team: Team) -> None:
    make_session(team.project, agent="quick")
    make_session(team.project, agent="slow")
    make_session(team.other_project, agent="elsewhere")


def test_the_form_lists_the_projects_agents_and_saves_only_the_fields_set(team: Team, agents):
    page = team.client("admin").get(reverse("dashboard:retention", args=[team.project.pk]))
    body = page.content.decode()
    assert '<option value="quick">quick</option>' in body
    assert "elsewhere" not in body  # another project's agent is not offered

    response = post(
        team,
        [
            {
                "agent": "quick",
                "compact_after": "12",
                "compact_after_unit": "hours",
                "archive_closed_after": "2",
                "delete_after_unit": "never",
            },
            {},  # the blank form for a new override, left blank: ignored
        ],
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    document = project_policies(team.project)
    (agent_id,) = document.overrides
    assert document.overrides[agent_id] == {
        "archive_closed_after": 2 * DAY,
        "compact_after": 12 * 3600,
        "delete_after": None,
    }
    effective = document.effective[agent_id]
    assert effective.close_idle_after == timedelta(days=1)  # the project's, not overridden

    # Shown again as entered: 12 hours, 2 days, never.
    body = team.client("admin").get(reverse("dashboard:retention", args=[team.project.pk]))
    html = body.content.decode()
    assert 'name="agents-0-compact_after" value="12"' in html
    assert 'name="agents-0-archive_closed_after" value="2"' in html


def test_removing_an_override_deletes_it_and_keeps_the_others(team: Team, agents):
    save_policy(
        team.project,
        {
            **dict.fromkeys(DURATION_FIELDS),
            "keep_outcomes": [],
            "keep_tags": [],
            "agents": {"quick": {"compact_after": DAY}, "slow": {"keep_tags": ["vip"]}},
        },
        actor=SYSTEM,
    )
    response = post(
        team,
        [
            {"agent": "quick", "compact_after": "1", "DELETE": "on"},
            # An override of fields this form does not edit (keep_tags) keeps them.
            {"agent": "slow", "kept": '{"keep_tags": ["vip"]}', "delete_after": "40"},
        ],
        initial=2,
    )
    assert response.status_code == 302
    saved = {r.agent.name: r for r in RetentionPolicy.objects.filter(agent__isnull=False)}
    assert set(saved) == {"slow"}
    assert saved["slow"].keep_tags == ["vip"]
    assert saved["slow"].delete_after == timedelta(days=40)
    assert sorted(saved["slow"].overrides) == ["delete_after", "keep_tags"]


@pytest.mark.parametrize(
    "override, message",
    [
        ({"agent": "quick", "compact_after": "-2"}, "must be more than 0"),
        ({"agent": "quick", "compact_after": "abc"}, "Enter a number"),
        ({"agent": "nobody", "compact_after": "1"}, "nobody is not an agent of this project"),
        ({"agent": "elsewhere", "compact_after": "1"}, "elsewhere is not an agent of this project"),
        ({"agent": "", "compact_after": "1"}, "Choose the agent this override is for"),
        ({"agent": "quick"}, "Set at least one duration"),
        (
            {"agent": "quick", "compact_after": "10", "delete_after": "5"},
            "Override for quick: Delete archived sessions after: must not be shorter than",
        ),
        ({"agent": "quick", "compact_after": "999999"}, "100 years"),
        ({"agent": "quick", "compact_after": "1", "kept": "{nope"}, "altered"),
    ],
)
def test_bad_override_input_is_refused_with_a_clear_error_and_nothing_saved(
    team: Team, agents, override, message
):
    response = post(team, [override])
    assert response.status_code == 400
    body = response.content.decode()
    assert "Nothing was saved." in body
    assert message in body, body[body.find("inline-error") :][:800]
    assert not RetentionPolicy.objects.exists()
    # In words: each problem said once, and no internal field name (issue 26).
    summary = body[body.find('class="inline-error"') :]
    summary = summary[: summary.find("</ul>")]
    items = re.findall(r"<li>(.*?)</li>", summary)
    assert items and len(items) == len(set(items)), items
    assert not any("_after" in item for item in items), items
    # What was typed stays in the form.
    if override.get("compact_after"):
        assert f'value="{override["compact_after"]}"' in body


def test_two_overrides_of_one_agent_are_refused(team: Team, agents):
    response = post(
        team,
        [{"agent": "quick", "compact_after": "1"}, {"agent": "quick", "delete_after": "9"}],
    )
    assert response.status_code == 400
    assert "Agent quick has two overrides" in response.content.decode()
    assert not RetentionPolicy.objects.exists()


def test_the_preview_covers_the_overrides_being_edited(team: Team, agents):
    with time_machine.travel(timezone.now() - timedelta(days=3)):
        for agent in ("quick", "slow"):
            session = make_session(team.project, agent=agent)
            append(session, conversation(20))
            closed(session)
    # The project compacts after 30 days: nothing yet. quick's override: after 1 day.
    plain = post(team, [], action="preview")
    assert plain.status_code == 200
    assert '<td class="count">0</td>' in plain.content.decode().split('id="preview-compact"')[1]

    response = post(team, [{"agent": "quick", "compact_after": "1"}], action="preview")
    assert response.status_code == 200
    body = response.content.decode()
    row = body.split('id="preview-compact"')[1].split("</tr>")[0]
    assert '<td class="count">1</td>' in row
    assert "Includes the overrides for quick." in body
    assert not RetentionPolicy.objects.exists()  # a preview saves nothing


def test_a_viewer_reads_the_overrides_in_human_units(team: Team, agents):
    save_policy(
        team.project,
        {
            **dict.fromkeys(DURATION_FIELDS),
            "keep_outcomes": [],
            "keep_tags": [],
            "agents": {"quick": {"compact_after": 36 * 3600, "delete_after": None}},
        },
        actor=SYSTEM,
    )
    page = team.client("viewer").get(reverse("dashboard:retention", args=[team.project.pk]))
    body = page.content.decode()
    assert 'id="policy-form"' not in body
    assert "Compact closed sessions after: 36 hours; Delete archived sessions after: never" in body


class FormData(HTMLParser):
    """What a browser submits from the page's policy form, left as the page shows it: each
    input's value (checked boxes only), each select's selected option (else its first)."""

    def __init__(self) -> None:
        super().__init__()
        self.data: list[tuple[str, str]] = []
        self.inside = self.in_template = False
        self.select: str | None = None
        self.first: str | None = None
        self.chosen = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.inside = a.get("id") == "policy-form"
        elif tag == "template":
            self.in_template = True  # the blank form the button copies: not submitted
        if not self.inside or self.in_template:
            return
        if tag == "input" and a.get("name") and a.get("type") != "submit":
            if a.get("type") != "checkbox" or "checked" in a:
                self.data.append((a["name"], a.get("value") or ""))
        elif tag == "select":
            self.select, self.first, self.chosen = a["name"], None, False
        elif tag == "option" and self.select:
            if self.first is None:
                self.first = a.get("value", "")
            if "selected" in a:
                self.data.append((self.select, a.get("value", "")))
                self.chosen = True

    def handle_endtag(self, tag):
        if tag == "template":
            self.in_template = False
        elif tag == "form":
            self.inside = False
        elif tag == "select" and self.select:
            if not self.chosen:
                self.data.append((self.select, self.first or ""))
            self.select = None


def test_durations_set_through_the_api_show_exactly_and_save_back_unchanged(
    team: Team, agents, client
):
    """Any whole number of seconds the API stores shows in a unit it is whole in, and saving
    the page untouched stores the same seconds (an override of 1 second showed as "0 hours",
    and the save was refused; a project's hour showed as 0.042 days and saved as 3628 s)."""
    _, secret = make_api_key(team.project, scope=KeyScope.ADMIN)
    policy = {
        "close_idle_after": 3600,
        "close_paused_after": 90,
        "archive_closed_after": 7 * DAY,
        "compact_after": 36 * 3600,
        "delete_after": 100 * DAY + 1,
        "outcome_compact_after": None,
        "outcome_delete_after": None,
        "keep_outcomes": ["error"],
        "keep_tags": ["vip"],
        "agents": {
            "quick": {
                "close_idle_after": 1,
                "compact_after": 5000,
                "archive_closed_after": 120,
                "delete_after": None,
            },
            "slow": {"compact_after": 2 * DAY, "keep_tags": ["gold"]},
        },
    }
    response = client.put(
        "/api/v1/retention/policy",
        json.dumps(policy),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert response.status_code == 200, response.content
    stored = response.json()

    admin = team.client("admin")
    page = admin.get(reverse("dashboard:retention", args=[team.project.pk])).content.decode()
    form = FormData()
    form.feed(page)
    shown = dict(form.data)
    for prefix, name, number, unit in [
        ("", "close_idle_after", "1", "hours"),
        ("", "close_paused_after", "90", "seconds"),
        ("", "compact_after", "36", "hours"),
        ("", "delete_after", "8640001", "seconds"),
        ("agents-0-", "close_idle_after", "1", "seconds"),
        ("agents-0-", "compact_after", "5000", "seconds"),
        ("agents-0-", "archive_closed_after", "2", "minutes"),
        ("agents-1-", "compact_after", "2", "days"),
    ]:
        assert (shown[f"{prefix}{name}"], shown[f"{prefix}{name}_unit"]) == (number, unit), name
    assert shown["agents-0-agent"] == "quick" and shown["agents-0-delete_after_unit"] == "never"

    saved = admin.post(
        reverse("dashboard:retention_policy", args=[team.project.pk]),
        urlencode([*form.data, ("action", "save")]),
        content_type="application/x-www-form-urlencoded",
    )
    assert saved.status_code == 302, saved.content.decode()[:3000]
    again = client.get("/api/v1/retention/policy", HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert again == stored


@pytest.mark.parametrize(
    "changes",
    [
        {"compact_after": "30", "delete_after": "5"},
        {"compact_after": "abc", "compact_after_unit": "fortnights"},
        {"outcome_compact_after": "9", "outcome_delete_after": "2", "close_idle_after": "-1"},
    ],
)
def test_the_projects_policy_errors_are_in_words_and_said_once(team: Team, changes):
    data = {**BASE, "action": "save", "agents-TOTAL_FORMS": "0", "agents-INITIAL_FORMS": "0"}
    data.update({f"{name}_unit": "days" for name in DURATION_FIELDS})
    data.update(changes)
    response = team.client("admin").post(
        reverse("dashboard:retention_policy", args=[team.project.pk]), data
    )
    assert response.status_code == 400
    body = response.content.decode()
    summary = body[body.find('class="inline-error"') :]
    items = re.findall(r"<li>(.*?)</li>", summary[: summary.find("</ul>")])
    assert items and len(items) == len(set(items)), items
    assert not any("_after" in item or "_unit" in item for item in items), items
