"""Two workers (OS processes) run compact_sessions on the same project at once: SKIP LOCKED
shares the sessions between them, and none is compacted twice."""

from retention_app.models import Compaction
from retention_app.services.policies import save_policy
from tests.factories import make_session
from tests.multiproc import run_in_processes
from tests.retention.children import compact_job
from tests.retention.helpers import SYSTEM, append, closed, conversation
from tests.retention.test_jobs_celery import QUICK

SESSIONS = 40


def test_two_workers_share_the_sessions_and_do_none_twice(transactional_db, project):
    save_policy(project, QUICK, actor=SYSTEM)
    import time

    time.sleep(1.1)  # compact_after is 1 s
    sessions = []
    for _ in range(SESSIONS):
        s = make_session(project)
        append(s, conversation(20))
        sessions.append(closed(s))
    time.sleep(1.1)
    results = run_in_processes(compact_job, [(project.pk, 3), (project.pk, 3)])
    assert sum(r["compacted"] for r in results) == SESSIONS
    compactions = list(Compaction.objects.values_list("session_id", flat=True))
    assert sorted(compactions) == sorted(s.pk for s in sessions)  # each exactly once
    print(f"\nshared: {[r['compacted'] for r in results]}")
