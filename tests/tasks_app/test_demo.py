"""The demo tasks seed_demo can create: every example workflow state worth showing, made
through the services; a second run creates nothing."""

from tasks_app.demo import build_demo_tasks
from tasks_app.models import Step, Task, TaskSession
from tests.factories import make_session


def test_it_builds_the_demo_tasks_once(project):
    session = make_session(project, external_id="demo-1")
    created = build_demo_tasks(project)
    states = {t.external_id: t.state for t in Task.objects.filter(project=project)}
    assert states == {
        "demo-task-refund-policy": "published",
        "demo-task-gdpr-notice": "sent_for_review",
        "demo-task-promo-terms": "rejected",
        "demo-task-market-report": "reviewing",
        "demo-task-competitor-scan": "researching",
        "demo-task-churn-study": "published",
    }
    assert len(created) == 6
    market = Task.objects.get(external_id="demo-task-market-report")
    assert Step.objects.get(task=market, key="research").attempts == 3
    assert TaskSession.objects.get(task=market).session == session
    stuck = Step.objects.get(task__external_id="demo-task-competitor-scan", key="research")
    assert (stuck.status, stuck.last_error["type"]) == ("failed", "source_unavailable")
    waiting = Step.objects.get(task__external_id="demo-task-gdpr-notice", key="review")
    assert waiting.status == "waiting" and waiting.wait_deadline is not None
    assert build_demo_tasks(project) == []
    assert Task.objects.filter(project=project).count() == 6
