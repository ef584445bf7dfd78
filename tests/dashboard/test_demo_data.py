"""The demo data makes sense to a newcomer (issue 13): the session titled "Budget exceeded" is
over its budget (red on its page) and "Budget nearly spent" near it (a warning); titles are
capitalised as written; facts have values that fit their key; tasks have titles of their own."""

import io

import pytest
from django.core.management import call_command

from core.models import Project
from sessions_app.models import Event, Session
from sessions_app.queries import session_at
from switchboard.management.commands.seed_demo import FACT_VALUES
from switchboard.sessions.context import budget_bars
from tasks_app.models import Task
from tasks_app.queries import tasks_as_of, tasks_for_session
from tests.dashboard.conftest import Team, team  # noqa: F401  (personas)
from tests.factories import make_member

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings):
    settings.DEBUG = True  # seed_demo refuses with DEBUG off (published passwords)
    call_command("seed_demo", "--long-log", "30", stdout=io.StringIO())
    return Project.objects.get(name="demo")


def test_the_exceeded_and_the_nearly_spent_budgets(demo, client):
    over = Session.objects.get(project=demo, title="Budget exceeded")
    assert over.budget_max_tokens is not None
    assert over.tokens_used > over.budget_max_tokens
    assert over.status == "paused"  # the store paused it when it went over
    assert [bar.level for bar in budget_bars(over)] == ["over"]

    near = Session.objects.get(project=demo, title="Budget nearly spent")
    assert near.tokens_used <= near.budget_max_tokens
    assert near.cost_used <= near.budget_max_cost
    assert {bar.level for bar in budget_bars(near)} == {"near"}
    assert near.status == "open"

    # On the page: the over-budget bar says so, the nearly spent one warns.
    admin = make_member(demo, "admin")
    client.force_login(admin)
    page = client.get(f"/sessions/{over.pk}/").content.decode()
    assert "over budget" in page
    page = client.get(f"/sessions/{near.pk}/").content.decode()
    assert "nearly spent" in page and "over budget" not in page


def test_titles_are_capitalised_as_written(demo):
    titles = set(Session.objects.filter(project=demo).values_list("title", flat=True))
    assert {"PR #982 review", "GDPR data export", "Refund for order #4411"} <= titles
    assert not {"Pr #982 review", "Gdpr data export"} & titles
    seeded = Session.objects.filter(project=demo, external_id__startswith="demo-")
    assert len(set(seeded.values_list("title", flat=True))) == seeded.count()  # no two alike


def test_facts_have_values_that_fit_their_key(demo):
    facts = Event.objects.filter(session__project=demo, kind="fact")
    assert facts.exists()
    for fact in facts:
        assert fact.content["value"] in FACT_VALUES[fact.content["key"]], fact.content


def test_tasks_have_titles_of_their_own(demo, client):
    tasks = Task.objects.filter(project=demo).select_related("workflow")
    titles = {task.display_title for task in tasks}
    assert "Refund policy v3" in titles and "GDPR data export notice" in titles
    assert not titles & {task.workflow.name for task in tasks}
    assert not titles & {task.workflow.title for task in tasks}

    admin = make_member(demo, "admin")
    client.force_login(admin)
    page = client.get(f"/p/{demo.pk}/tasks/").content.decode()
    assert "Refund policy v3" in page and "document_approval" in page


@pytest.mark.parametrize(
    "title, early_state",
    [("Refund for order #4411", "draft_created"), ("Quarterly market report", "researching")],
)
def test_a_linked_task_moves_with_its_sessions_log(demo, title, early_state):
    """The seeded task moved on between its session's events: time travel to an early seq
    shows it as it was then (created, still in its first state), at the head as it is now; at
    seq 1 it did not exist yet."""
    session = Session.objects.get(project=demo, title=title)
    tasks = list(tasks_for_session(session))
    assert len(tasks) == 1
    live_state = tasks[0].state

    def state_at(seq: int) -> str | None:
        [past] = tasks_as_of(tasks, session_at(session, seq).time)
        return past.task.state if past.existed else None

    assert state_at(session.head_seq) == live_state
    assert state_at(1) is None  # created a little into the conversation
    states = [state_at(seq) for seq in range(1, session.head_seq + 1)]
    early = next(state for state in states if state is not None)
    assert early == early_state != live_state
    # The states along the log follow the task's history, not only its two ends.
    assert len({state for state in states if state is not None}) >= 3
