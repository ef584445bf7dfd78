"""PUT /tasks/{id}/steps/{key}: attempts, retries, outputs, errors, idempotent replays."""

from tasks_app.models import Agent, HistoryKind, Step, StepStatus, TaskHistory
from tests.factories import make_task

from .helpers import assert_error, history_count

E1 = {"type": "http_error", "message": "search API answered 503", "detail": {"status": 503}}
E2 = {"type": "rate_limited", "message": "429 from search API", "detail": {"retry_after": 30}}


def step_history(task, key):
    return list(TaskHistory.objects.filter(task=task, kind=HistoryKind.STEP, step_key=key))


def test_it_starts_and_succeeds_a_step_with_structured_outputs(api, project, api_key):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/research"
    started = api.put(
        url,
        {
            "status": "running",
            "attempt": 1,
            "agent": "researcher",
            "inputs": {"question": "solar capacity 2025"},
        },
    )
    assert started.status_code == 200
    assert started.json()["step"]["status"] == "running"
    assert started.json()["task"]["version"] == 2
    done = api.put(
        url,
        {
            "status": "succeeded",
            "attempt": 1,
            "outputs": {"sources": [{"url": "https://a.example", "score": 0.9}]},
        },
    )
    assert done.status_code == 200
    step = Step.objects.get(task=task, key="research")
    assert step.status == StepStatus.SUCCEEDED and step.attempts == 1
    assert step.inputs == {"question": "solar capacity 2025"}
    assert step.outputs == {"sources": [{"url": "https://a.example", "score": 0.9}]}
    assert step.agent == Agent.objects.get(project=project, name="researcher")
    assert step.actor == f"key:{api_key[0].prefix}"
    assert step.started_at <= step.finished_at
    assert [(h.from_state, h.to_state, h.attempt) for h in step_history(task, "research")] == [
        ("pending", "running", 1),
        ("running", "succeeded", 1),
    ]
    task.refresh_from_db()
    assert task.version == 3


def test_it_records_three_attempts_and_two_errors_when_failing_twice_then_succeeding(api, project):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/research"
    for attempt, error in ((1, E1), (2, E2)):
        api.put(url, {"status": "running", "attempt": attempt, "inputs": {"q": attempt}})
        failed = api.put(url, {"status": "failed", "attempt": attempt, "error": error})
        assert failed.status_code == 200
        assert failed.json()["step"]["status"] == "pending"  # a retry is due
        assert failed.json()["step"]["last_error"] == error
    api.put(url, {"status": "running", "attempt": 3})
    api.put(url, {"status": "succeeded", "attempt": 3, "outputs": {"sources": 4}})

    step = Step.objects.get(task=task, key="research")
    assert (step.status, step.attempts, step.max_attempts) == ("succeeded", 3, 3)
    assert step.last_error == E2  # the last error is kept after the success
    history = step_history(task, "research")
    assert sorted({h.attempt for h in history}) == [1, 2, 3]
    errors = [(h.attempt, h.error) for h in history if h.error]
    assert errors == [(1, E1), (2, E2)]
    assert [h.data.get("inputs") for h in history if h.to_state == "running"] == [
        {"q": 1},
        {"q": 2},
        None,
    ]
    assert "attempt 1 of 3 failed; a retry is due" in history[1].reason


def test_it_fails_a_step_for_good_past_max_attempts_and_the_task_shows_why(api, project):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/review"  # max_attempts 2
    for attempt in (1, 2):
        api.put(url, {"status": "running", "attempt": attempt})
        api.put(
            url,
            {
                "status": "failed",
                "attempt": attempt,
                "error": {"type": "llm_refusal", "message": f"no ({attempt})"},
            },
        )
    step = Step.objects.get(task=task, key="review")
    assert (step.status, step.attempts) == ("failed", 2)
    assert step.finished_at is not None

    body = api.get(f"/tasks/{task.pk}").json()
    assert body["failed_steps"] == [
        {
            "key": "review",
            "attempts": 2,
            "max_attempts": 2,
            "error": {"type": "llm_refusal", "message": "no (2)", "detail": {}},
        }
    ]
    last = body["history"][-1]
    assert last["step"] == "review" and last["attempt"] == 2
    assert "attempts exhausted (2 of 2)" in last["reason"]

    before = history_count(task)
    error = assert_error(api.put(url, {"status": "running", "attempt": 3}), 409, "step_not_active")
    assert error["detail"]["status"] == "failed"
    assert history_count(task) == before
    assert [t["id"] for t in api.get("/tasks", {"step_status": "failed"}).json()["tasks"]] == [
        str(task.pk)
    ]


def test_it_treats_a_repeated_update_with_the_same_attempt_as_a_replay(api, project):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/research"
    api.put(url, {"status": "running", "attempt": 1})
    api.put(url, {"status": "failed", "attempt": 1, "error": E1})
    api.put(url, {"status": "running", "attempt": 2})
    task.refresh_from_db()
    before = (task.version, history_count(task))
    for payload in (
        {"status": "running", "attempt": 1},
        {"status": "failed", "attempt": 1, "error": E1},
        {"status": "running", "attempt": 2},
        {"status": "running"},  # no number: the current attempt, already running
    ):
        response = api.put(url, payload)
        assert response.status_code == 200, payload
        assert response.json()["replayed"] is True
        assert response.json()["step"]["attempts"] == 2
    task.refresh_from_db()
    assert (task.version, history_count(task)) == before


def test_it_numbers_attempts_itself_when_none_is_given(api, project):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/draft"
    assert api.put(url, {"status": "running"}).json()["step"]["attempts"] == 1
    api.put(url, {"status": "failed", "error": E1})
    assert (
        api.put(url, {"status": "succeeded", "outputs": {"words": 900}}).json()["step"]["attempts"]
        == 2
    )  # a pending step's success is its next attempt, done in one go


def test_it_refuses_stale_and_out_of_order_attempts(api, project):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/research"
    assert_error(api.put(url, {"status": "running", "attempt": 2}), 409, "attempt_conflict")
    api.put(url, {"status": "running", "attempt": 1})
    error = assert_error(api.put(url, {"status": "running", "attempt": 2}), 409, "attempt_conflict")
    assert "finish it" in error["message"]
    api.put(url, {"status": "failed", "attempt": 1, "error": E1})
    api.put(url, {"status": "running", "attempt": 2})
    error = assert_error(
        api.put(url, {"status": "succeeded", "attempt": 1}), 409, "attempt_conflict"
    )
    assert error["detail"]["attempts"] == 2
    assert Step.objects.get(task=task, key="research").status == "running"


def test_it_refuses_updates_to_a_finished_step(api, project):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/research"
    api.put(url, {"status": "succeeded"})
    assert_error(
        api.put(url, {"status": "failed", "attempt": 1, "error": E1}), 409, "step_not_active"
    )
    assert_error(api.put(url, {"status": "skipped"}), 409, "step_not_active")


def test_it_skips_a_step(api, project):
    task = make_task(project, "research_report")
    response = api.put(
        f"/tasks/{task.pk}/steps/review", {"status": "skipped", "reason": "trusted author"}
    )
    assert response.json()["step"]["status"] == "skipped"
    entry = step_history(task, "review")[0]
    assert (entry.to_state, entry.attempt, entry.reason) == ("skipped", None, "trusted author")
    assert api.put(f"/tasks/{task.pk}/steps/review", {"status": "skipped"}).json()["replayed"]


def test_it_checks_expected_version_on_step_updates(api, project):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/research"
    assert_error(
        api.put(url, {"status": "running", "expected_version": 7}), 409, "version_mismatch"
    )
    assert api.put(url, {"status": "running", "expected_version": 1}).status_code == 200


def test_it_refuses_bad_step_input_with_422_writing_nothing(api, project):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/research"
    for payload in (
        {"status": "pending"},
        {"status": "exploded"},
        {"status": "failed"},  # no error
        {"status": "failed", "error": {"message": "no type"}},
        {"status": "succeeded", "error": E1},
        {"status": "waiting"},  # waiting on nothing
        {"status": "waiting", "waiting_on": {"signal": "Not An Identifier"}},
        {"status": "running", "waiting_on": {"signal": "x"}},
        {"status": "running", "attempt": 0},
        {"status": "succeeded", "outputs": "a string, not an object"},
    ):
        assert_error(api.put(url, payload), 422, "invalid_input")
    assert history_count(task) == 1
    assert Step.objects.get(task=task, key="research").status == "pending"


def test_it_answers_404_for_an_unknown_step_or_another_projects_task(api, other_api, project):
    task = make_task(project, "research_report")
    error = assert_error(
        api.put(f"/tasks/{task.pk}/steps/nope", {"status": "running"}), 404, "not_found"
    )
    assert error["detail"]["steps"] == ["research", "draft", "review", "publish"]
    assert_error(
        other_api.put(f"/tasks/{task.pk}/steps/research", {"status": "running"}), 404, "not_found"
    )
    assert Step.objects.get(task=task, key="research").status == "pending"


def test_it_reads_one_step_with_every_attempt(api, project):
    task = make_task(project, "research_report")
    url = f"/tasks/{task.pk}/steps/research"
    api.put(url, {"status": "running"})
    api.put(url, {"status": "failed", "error": E1})
    body = api.get(url).json()
    assert body["status"] == "pending" and body["last_error"] == E1
    assert [(h["to"], h["attempt"], h["error"]) for h in body["history"]] == [
        ("running", 1, None),
        ("failed", 1, E1),
    ]
    assert [
        h["step"]
        for h in api.get(f"/tasks/{task.pk}/history", {"step": "research"}).json()["history"]
    ] == ["research", "research"]


def test_it_starts_no_new_attempt_on_a_finished_task(api, project):
    task = make_task(project)
    api.put(f"/tasks/{task.pk}/steps/publish", {"status": "running"})
    for target in ("sent_for_review", "rejected"):
        api.post(f"/tasks/{task.pk}/transitions", {"to": target})
    # The running attempt may still report; nothing new starts.
    done = api.put(f"/tasks/{task.pk}/steps/publish", {"status": "failed", "error": E1})
    assert done.status_code == 200
    assert_error(
        api.put(f"/tasks/{task.pk}/steps/publish", {"status": "running"}), 409, "task_finished"
    )
