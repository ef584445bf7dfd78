"""A task handed along between agents: A (one key) starts it and finishes step 1, B (another key
of the same project) reads it cold and finishes step 2; C (another project) sees nothing."""

from sessions_app.models import Agent
from tasks_app.models import HistoryKind, Step, TaskHistory
from tests.conftest import ApiClient
from tests.factories import make_api_key

from .helpers import assert_error


def test_it_hands_a_task_from_agent_a_to_agent_b_and_hides_it_from_c(project, other_project):
    key_a, raw_a = make_api_key(project, name="agent-a")
    key_b, raw_b = make_api_key(project, name="agent-b")
    agent_a, agent_b, agent_c = (
        ApiClient(raw_a),
        ApiClient(raw_b),
        ApiClient(make_api_key(other_project, name="agent-c")[1]),
    )

    # A starts the task and finishes step 1 (research), then moves it on.
    created = agent_a.post(
        "/tasks",
        {"workflow": "research_report", "params": {"question": "heat pumps in cold climates"}},
    )
    assert created.status_code == 201
    task_id = created.json()["id"]
    research = f"/tasks/{task_id}/steps/research"
    agent_a.put(
        research,
        {
            "status": "running",
            "attempt": 1,
            "agent": "researcher",
            "inputs": {"question": "heat pumps in cold climates"},
        },
    )
    sources = {"sources": [{"url": "https://example.org/cop", "claim": "COP 2.1 at -15°C"}]}
    agent_a.put(research, {"status": "succeeded", "attempt": 1, "outputs": sources})
    moved = agent_a.post(f"/tasks/{task_id}/transitions", {"to": "drafting", "expected_version": 3})
    assert moved.status_code == 200

    # B knows only the task id: everything it needs is on the task, no conversation read.
    seen = agent_b.get(f"/tasks/{task_id}").json()
    assert seen["state"] == "drafting"
    assert seen["params"] == {"question": "heat pumps in cold climates"}
    step1 = next(s for s in seen["steps"] if s["key"] == "research")
    assert (step1["status"], step1["outputs"], step1["agent"]) == (
        "succeeded",
        sources,
        "researcher",
    )
    draft = f"/tasks/{task_id}/steps/draft"
    agent_b.put(
        draft,
        {
            "status": "running",
            "attempt": 1,
            "agent": "writer",
            "inputs": {"sources": step1["outputs"]["sources"]},
        },
    )
    done = agent_b.put(
        draft,
        {
            "status": "succeeded",
            "attempt": 1,
            "outputs": {"draft_uri": "s3://reports/hp.md", "words": 1800},
        },
    )
    assert done.status_code == 200
    moved = agent_b.post(
        f"/tasks/{task_id}/transitions",
        {"to": "reviewing", "expected_version": done.json()["task"]["version"]},
    )
    assert moved.json()["state"] == "reviewing"

    # C, from another project, cannot see or touch it.
    assert_error(agent_c.get(f"/tasks/{task_id}"), 404, "not_found")
    assert agent_c.get("/tasks").json()["tasks"] == []
    assert_error(agent_c.put(f"/tasks/{task_id}/steps/review", {"status": "running"}), 404)
    assert_error(agent_c.post(f"/tasks/{task_id}/transitions", {"to": "publishing"}), 404)
    assert_error(agent_c.post(f"/tasks/{task_id}/signals/anything"), 404)
    assert_error(agent_c.get(f"/tasks/{task_id}/history"), 404)

    # The database holds who did what.
    steps = {s.key: s for s in Step.objects.filter(task_id=task_id).select_related("agent")}
    assert (steps["research"].actor, steps["research"].agent.name) == (
        f"key:{key_a.prefix}",
        "researcher",
    )
    assert (steps["draft"].actor, steps["draft"].agent.name) == (f"key:{key_b.prefix}", "writer")
    assert steps["review"].status == "pending"
    assert set(Agent.objects.filter(project=project).values_list("name", flat=True)) == {
        "researcher",
        "writer",
    }
    transitions = TaskHistory.objects.filter(task_id=task_id, kind=HistoryKind.TRANSITION)
    assert [(h.actor, h.to_state) for h in transitions] == [
        (f"key:{key_a.prefix}", "drafting"),
        (f"key:{key_b.prefix}", "reviewing"),
    ]
