"""The retention page's agent overrides form: an agent picked from the project's agents, each
duration in hours or days (or "never"), only the fields filled in apply; add, change and remove
an override; bad input refused with a friendly error and nothing saved; the preview covers the
overrides being edited."""

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from retention_app.models import DURATION_FIELDS, RetentionPolicy
from retention_app.services.policies import project_policies, save_policy
from tests.dashboard.conftest import Team
from tests.factories import make_session
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
    assert "compact_after: 36 hours; delete_after: never" in body
