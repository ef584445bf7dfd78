"""Functions run in child processes by the SKIP LOCKED test (importable by name)."""


def compact_job(project_id: int, limit: int) -> dict:
    from retention_app.services.jobs import run_job
    from tests.multiproc import barrier

    barrier().wait()
    runs = run_job("compact_sessions", trigger="worker", limit=limit, project_ids=[project_id])
    return {"compacted": sum(r.compacted for r in runs), "examined": sum(r.examined for r in runs)}


def compact_now(session_id: str) -> int:
    """Compact one session now (the admin's 'compact now'); the seq it compacted through."""
    from retention_app.services.compaction import compact_session
    from sessions_app.models import Session
    from tests.retention.helpers import SYSTEM

    done = compact_session(Session.objects.get(pk=session_id), actor=SYSTEM)
    return done.compaction.boundary_seq if done.compaction else 0
