"""The tasks list and the task page (and the task panel the session page shows): members read,
everyone else gets a sign-in redirect or a 404, bad filters a 400; the diagram marks the current
state; errors, waits and outputs are shown, escaped."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from core.actors import Actor
from tasks_app import dashboard as task_dashboard
from tasks_app.services.links import link_sessions
from tasks_app.services.signals import deliver_signal
from tasks_app.services.steps import update_step
from tasks_app.services.transitions import transition_task
from tests.factories import make_session, make_task

AGENT = Actor.system("agent")
HTMX = {"HX-Request": "true"}
SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def list_url(team):
    return reverse("tasks:list", args=[team.project.pk])


def detail_url(task):
    return reverse("tasks:detail", args=[task.pk])


def get_list(team, who="viewer", headers=None, **params):
    return team.client(who).get(list_url(team), params, headers=headers or {})


def get_detail(team, task, who="viewer", headers=None, **params):
    return team.client(who).get(detail_url(task), params, headers=headers or {})


def listed(response):
    return [str(t.pk) for t in response.context["tasks"]]


@pytest.fixture
def task(team):
    return make_task(team.project, params={"document": "Refund policy"})


# --- Access -----------------------------------------------------------------------------------


def test_it_sends_anonymous_visitors_to_sign_in(team, task):
    client = Client()
    for url in [list_url(team), detail_url(task)]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login")), url


@pytest.mark.parametrize("who", ["viewer", "operator", "admin"])
def test_it_lets_every_member_read_the_list_and_the_task(team, task, who):
    assert get_list(team, who).status_code == 200
    response = get_detail(team, task, who)
    assert response.status_code == 200
    assert response.context["task"].pk == task.pk


def test_it_answers_404_to_members_of_another_project(team, task):
    client = team.client("outsider")
    assert client.get(list_url(team)).status_code == 404
    response = client.get(detail_url(task))
    assert response.status_code == 404
    assert b"Not found" in response.content
    # An id that exists nowhere looks the same.
    assert client.get("/tasks/00000000-0000-0000-0000-000000000000/").status_code == 404
    # The outsider's own project list does not show this project's task.
    own = client.get(reverse("tasks:list", args=[team.other_project.pk]))
    assert own.status_code == 200 and str(task.pk) not in own.content.decode()


def test_it_refuses_other_methods(team, task):
    client = team.client("admin")
    assert client.post(list_url(team)).status_code == 405
    assert client.post(detail_url(task)).status_code == 405


# --- Tasks list -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"state": "no_such_state"},
        {"step_status": "exploded"},
        {"workflow": "nope"},
        {"session": "not-a-uuid"},
        {"cursor": "not-a-cursor"},
    ],
)
def test_it_answers_400_with_what_to_fix_for_bad_filters(team, task, params):
    response = get_list(team, **params)
    assert response.status_code == 400
    page = response.content.decode()
    assert "These filters cannot be used." in page
    assert "start again with no filters" in page
    assert "task-row-" not in page
    # The same for the htmx swap of the results.
    partial = get_list(team, headers={**HTMX, "HX-Target": "task-results"}, **params)
    assert partial.status_code == 400 and b"<html" not in partial.content


def test_it_filters_by_workflow_state_step_status_and_session(team, task):
    session = make_session(team.project, title="Linked one")
    report = make_task(team.project, workflow="research_report", session_ids=[str(session.pk)])
    transition_task(task, "sent_for_review", actor=AGENT)
    update_step(report, "research", status="running", actor=AGENT)
    update_step(
        report,
        "research",
        status="failed",
        actor=AGENT,
        error={"type": "http_error", "message": "503"},
    )

    assert listed(get_list(team)) == [str(report.pk), str(task.pk)]  # newest first
    assert listed(get_list(team, workflow="document_approval")) == [str(task.pk)]
    assert listed(get_list(team, state="sent_for_review")) == [str(task.pk)]
    assert listed(get_list(team, state=["sent_for_review", "researching"])) == [
        str(report.pk),
        str(task.pk),
    ]
    assert listed(get_list(team, step_status="pending")) == [str(report.pk), str(task.pk)]
    assert listed(get_list(team, step_status="succeeded")) == []
    response = get_list(team, session=str(session.pk))
    assert listed(response) == [str(report.pk)]
    assert "Tasks linked to the session" in response.content.decode()
    assert "Linked one" in response.content.decode()
    # A retry is due on the report: the row says so.
    row = re.search(
        rf'<tr id="task-row-{report.pk}".*?</tr>', get_list(team).content.decode(), re.S
    ).group(0)
    assert "retry due" in row and "http_error" in row


def test_it_paginates_with_a_keyset_cursor(team, monkeypatch):
    monkeypatch.setattr(task_dashboard, "TASKS_PER_PAGE", 2)
    tasks = [make_task(team.project) for _ in range(3)]
    first = get_list(team)
    assert listed(first) == [str(tasks[2].pk), str(tasks[1].pk)]
    next_query = first.context["next_query"]
    assert "cursor=" in next_query
    second = team.client("viewer").get(f"{list_url(team)}?{next_query}")
    assert listed(second) == [str(tasks[0].pk)]
    assert second.context["next_query"] == ""
    assert "First page" in second.content.decode()


def test_it_says_what_to_do_when_there_are_no_tasks(team):
    page = get_list(team).content.decode()
    assert "No tasks yet." in page and "POST /api/v1/tasks" in page
    page = get_list(team, state="published").content.decode()
    assert "No task matches these filters." in page


def test_it_renders_only_the_results_for_htmx(team, task):
    response = get_list(team, headers={**HTMX, "HX-Target": "task-results"})
    page = response.content.decode()
    assert response.status_code == 200
    assert page.lstrip().startswith('<section id="task-results"')
    assert "<html" not in page and f'id="task-row-{task.pk}"' in page
    assert 'ws-connect="/ws/projects/' in page and "/tasks/?" in page
    assert response["Vary"] and "HX-Request" in response["Vary"]


# --- Task page --------------------------------------------------------------------------------


def test_it_marks_the_current_state_in_the_diagram(team, task):
    transition_task(task, "sent_for_review", actor=AGENT)
    page = get_detail(team, task).content.decode()
    current = re.findall(r'<g class="node current[^"]*" data-state="([a-z_]+)"', page)
    assert current == ["sent_for_review"]
    # The states it can move to next are marked too; every state is drawn.
    nexts = set(re.findall(r'<g class="node next[^"]*" data-state="([a-z_]+)"', page))
    assert nexts == {"approved", "changes_requested", "rejected"}
    assert len(re.findall(r'<g class="node[ "]', page)) == 6
    assert "Current state: sent for review." in page  # readable (issue 13)
    assert ">sent for review</span>" in page and ">sent_for_review<" not in page
    # Drawn in the page (inline SVG), nothing fetched from elsewhere.
    assert "<svg" in page and '<script src="http' not in page


def test_it_shows_a_failed_steps_error_in_the_panel_and_the_history(team, task):
    for attempt in (1, 2, 3):
        update_step(task, "draft", status="running", actor=AGENT)
        update_step(
            task,
            "draft",
            status="failed",
            actor=AGENT,
            error={
                "type": "llm_timeout",
                "message": f"no answer (try {attempt})",
                "detail": {"seconds": 30},
            },
        )
    page = get_detail(team, task).content.decode()
    assert "Stuck:" in page and "failed after 3 attempts" in page
    assert "llm_timeout" in page and "no answer (try 3)" in page
    assert "attempt 3 of 3" in page
    # The history keeps every attempt's error, newest first.
    history = page[page.index('id="history-rows"') :]
    assert history.index("no answer (try 3)") < history.index("no answer (try 1)")
    assert "attempts exhausted (3 of 3): step failed" in history
    assert "&quot;seconds&quot;: 30" in page  # error detail, pretty JSON


def test_it_shows_steps_outputs_branch_and_waits(team, task):
    update_step(task, "draft", status="running", actor=AGENT, agent_name="writer")
    update_step(
        task,
        "draft",
        status="succeeded",
        actor=AGENT,
        branch="short",
        outputs={"uri": "s3://docs/a.md", "words": 1200},
    )
    transition_task(task, "sent_for_review", actor=AGENT)
    deadline = timezone.now() + timedelta(days=2)
    update_step(
        task,
        "review",
        status="waiting",
        actor=AGENT,
        waiting_on="review_decision",
        wait_deadline=deadline,
    )
    page = get_detail(team, task).content.decode()
    assert "Outputs (2 keys)" in page and "s3://docs/a.md" in page
    assert "<code>short</code>" in page and "writer" in page
    assert "waits on the signal <code>review_decision</code>" in page
    assert f'datetime="{deadline.strftime("%Y-%m-%dT%H:%M")}' in page
    # "due in 2 days", not "until in 2 days" (issue 13).
    assert re.search(r"<code>review_decision</code>, due <time[^>]*data-relative", page)
    assert re.search(r"signal <code>review_decision</code> due <time[^>]*data-relative", page)
    deliver_signal(task, "review_decision", actor=AGENT, payload={"decision": "approve"})
    page = get_detail(team, task).content.decode()
    assert "Waiting:" not in page
    assert "Signal payload" in page and "&quot;decision&quot;: &quot;approve&quot;" in page


def test_it_escapes_everything_agents_write(team):
    task = make_task(
        team.project, params={"title": SCRIPT}, metadata={"m": SCRIPT}, external_id=SCRIPT
    )
    update_step(task, "draft", status="running", actor=AGENT, inputs={"prompt": SCRIPT})
    update_step(
        task,
        "draft",
        status="failed",
        actor=AGENT,
        error={"type": SCRIPT, "message": SCRIPT, "detail": {"html": SCRIPT}},
    )
    update_step(task, "draft", status="running", actor=AGENT)
    update_step(
        task, "draft", status="succeeded", actor=AGENT, outputs={"html": SCRIPT}, branch="b"
    )
    for response in [get_detail(team, task), get_list(team)]:
        page = response.content.decode()
        assert SCRIPT not in page
        assert ESCAPED in page


def test_it_lists_linked_sessions_with_links(team, task):
    page = get_detail(team, task).content.decode()
    assert "No session is linked to this task." in page
    session = make_session(team.project, title="Drafting chat")
    link_sessions(task, [session.pk], actor=AGENT)
    page = get_detail(team, task).content.decode()
    assert f'href="/sessions/{session.pk}/"' in page and "Drafting chat" in page


def test_it_filters_and_pages_the_history_through_htmx(team, task, monkeypatch):
    monkeypatch.setattr(task_dashboard, "HISTORY_PER_PAGE", 3)
    update_step(task, "draft", status="running", actor=AGENT)
    update_step(task, "draft", status="succeeded", actor=AGENT)
    transition_task(task, "sent_for_review", actor=AGENT)
    update_step(task, "review", status="running", actor=AGENT)
    response = get_detail(team, task, headers={**HTMX, "HX-Target": "task-history"}, step="draft")
    page = response.content.decode()
    assert page.lstrip().startswith('<section id="task-history"') and "<html" not in page
    rows = response.context["history"].rows
    assert [r.step_key for r in rows] == ["draft", "draft"]
    assert 'ws-connect="/ws/tasks/' in page and "step=draft" in page
    # Unfiltered: 3 of 5 rows, then "show older" fetches the rest as rows only.
    first = get_detail(team, task)
    assert len(first.context["history"].rows) == 3 and first.context["history"].has_more
    more = get_detail(
        team,
        task,
        headers={**HTMX, "HX-Target": "history-more"},
        before=first.context["history"].rows[-1].pk,
    )
    assert [r.kind for r in more.context["history"].rows] == ["step", "created"]
    assert not more.content.decode().lstrip().startswith("<section")


@pytest.mark.parametrize("params", [{"kind": "explosion"}, {"step": "nope"}, {"before": "0"}])
def test_it_answers_400_for_bad_history_settings(team, task, params):
    response = get_detail(team, task, **params)
    assert response.status_code == 400
    assert "This history cannot be shown with these settings." in response.content.decode()


def test_it_keeps_the_task_page_to_a_few_queries(team, task, django_assert_max_num_queries):
    session = make_session(team.project)
    link_sessions(task, [session.pk], actor=AGENT)
    for _ in range(3):
        update_step(task, "draft", status="running", actor=AGENT)
        update_step(
            task, "draft", status="failed", actor=AGENT, error={"type": "x", "message": "y"}
        )
    client = team.client("viewer")
    client.get(detail_url(task))
    # Sign-in (2), task + membership (2), projects menu (1), newest history id (1), history
    # slice (1), steps (1), linked sessions (1).
    with django_assert_max_num_queries(10):
        assert client.get(detail_url(task)).status_code == 200


# --- The session page's task panel ------------------------------------------------------------


def test_the_session_page_shows_the_linked_tasks_state(team):
    session = make_session(team.project, title="Chat")
    task = make_task(team.project, session_ids=[str(session.pk)])
    update_step(task, "draft", status="running", actor=AGENT)
    update_step(
        task, "draft", status="failed", actor=AGENT, error={"type": "quota", "message": SCRIPT}
    )
    transition_task(task, "sent_for_review", actor=AGENT)
    page = (
        team.client("viewer")
        .get(reverse("dashboard:session_detail", args=[session.pk]))
        .content.decode()
    )
    slot = page[page.index(f'id="task-slot-{task.pk}"') :]
    assert '<article class="task-panel"' in slot
    assert re.search(r'<g class="node current[^"]*" data-state="sent_for_review"', slot)
    assert "The last attempt failed" in slot and "quota" in slot
    assert SCRIPT not in page and ESCAPED in slot
    assert f'href="/tasks/{task.pk}/"' in slot
