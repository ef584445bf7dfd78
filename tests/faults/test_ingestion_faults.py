"""Ingestion through faults: nothing acknowledged is lost, nothing is written twice, no gaps.

Several writer processes (tests/faults/writer.py) append keyed batches to one session through a
real uvicorn on a private PostgreSQL, retrying a batch on 503 or no answer with the same
idempotency keys. Mid-run the test restarts PostgreSQL, stops it for 10 s, stops the server's Redis,
or SIGKILLs one of uvicorn's two workers (its master starts another). Then, from the database:
every acknowledged key is there exactly once, and the session's seqs are exactly 1..head_seq.
"""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import psutil
import pytest

from tests.private_postgres import PrivatePostgres
from tests.private_redis import private_redis
from tests.servers import ROOT, asgi_server_process

pytestmark = [
    pytest.mark.requires_redis("ingestion under faults"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
]

WRITERS = 4
BATCHES = 40
BATCH_SIZE = 5
RUN_SECONDS = 20  # the writers give up (reporting what was never acknowledged) after this
STOP_SECONDS = 10  # how long PostgreSQL stays stopped in the stop test (added to RUN_SECONDS)


def new_session(base: str, key: str) -> str:
    import urllib.request

    request = urllib.request.Request(
        f"{base}/api/v1/sessions",
        data=json.dumps({"agent": "fault-writer"}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["id"]


def start_writers(
    base: str, key: str, session_id: str, run_seconds: float = RUN_SECONDS
) -> list[subprocess.Popen]:
    deadline = time.monotonic() + run_seconds
    return [
        subprocess.Popen(
            [sys.executable, str(ROOT / "tests/faults/writer.py"), base, key, session_id]
            + [str(w), str(BATCHES), str(BATCH_SIZE), str(deadline)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(WRITERS)
    ]


def stored_events(pg: PrivatePostgres, session_id: str) -> int:
    return int(
        pg.psql(f"SELECT count(*) FROM sessions_app_event WHERE session_id = '{session_id}'")
    )


def wait_for_events(pg: PrivatePostgres, session_id: str, at_least: int) -> None:
    deadline = time.monotonic() + RUN_SECONDS
    while stored_events(pg, session_id) < at_least:
        assert time.monotonic() < deadline, "the writers wrote nothing"
        time.sleep(0.05)


def check_and_report(
    pg: PrivatePostgres, session_id: str, writers, label: str, run_seconds: float = RUN_SECONDS
) -> Counter[str]:
    """Checks and prints what the writers were answered and what the database holds; returns
    the count of answers by status."""
    acked: list[str] = []
    unacked: list[str] = []
    statuses: Counter[str] = Counter()
    for writer in writers:
        out, _ = writer.communicate(timeout=run_seconds + 30)
        assert writer.returncode == 0, out
        result = json.loads(out.strip().splitlines()[-1])
        acked += result["acked"]
        unacked += result["unacked"]
        statuses.update(result["statuses"])

    rows = pg.psql(
        "SELECT idempotency_key, count(*) FROM sessions_app_event "
        f"WHERE session_id = '{session_id}' GROUP BY idempotency_key"
    ).splitlines()
    stored = Counter({k: int(n) for k, n in (row.split("|") for row in rows)})
    lost = [k for k in acked if k not in stored]
    duplicated = [k for k, n in stored.items() if n > 1]
    seqs = [
        int(s)
        for s in pg.psql(
            f"SELECT seq FROM sessions_app_event WHERE session_id = '{session_id}' ORDER BY seq"
        ).splitlines()
    ]
    head = int(pg.psql(f"SELECT head_seq FROM sessions_app_session WHERE id = '{session_id}'"))
    gaps = sorted(set(range(1, head + 1)) - set(seqs))
    print(
        f"\n{label}: events acknowledged {len(acked)}, never acknowledged {len(unacked)}, "
        f"stored {sum(stored.values())}, lost {len(lost)}, duplicated {len(duplicated)}, "
        f"gaps {len(gaps)}; requests by status {dict(sorted(statuses.items()))}"
    )
    assert unacked == [], f"not acknowledged within {run_seconds} s: {len(unacked)}"
    assert len(acked) == WRITERS * BATCHES * BATCH_SIZE
    assert lost == [] and duplicated == [] and gaps == []
    assert seqs == list(range(1, head + 1))
    return statuses


def test_a_postgresql_restart_under_ingestion_loses_and_duplicates_nothing(private_pg, fixtures):
    with asgi_server_process(**private_pg.env()) as (base, _):
        session_id = new_session(base, fixtures["key"])
        writers = start_writers(base, fixtures["key"], session_id)
        wait_for_events(private_pg, session_id, 100)
        private_pg.stop()
        time.sleep(0.5)
        private_pg.start()
        check_and_report(private_pg, session_id, writers, "PostgreSQL restart")


def test_a_ten_second_postgresql_stop_under_ingestion_loses_and_duplicates_nothing(
    private_pg, fixtures
):
    """The database away for STOP_SECONDS mid-run: the writers are answered 503 (or nothing)
    and send the same batches again until it is back (issue 23's fault probe)."""
    run_seconds = RUN_SECONDS + STOP_SECONDS
    with asgi_server_process(**private_pg.env()) as (base, _):
        session_id = new_session(base, fixtures["key"])
        writers = start_writers(base, fixtures["key"], session_id, run_seconds)
        wait_for_events(private_pg, session_id, 100)
        private_pg.stop()
        time.sleep(STOP_SECONDS)
        private_pg.start()
        statuses = check_and_report(
            private_pg, session_id, writers, "PostgreSQL stopped 10 s", run_seconds
        )
    # The stop was met: batches were refused or unanswered while it lasted, then sent again.
    assert statuses["503"] + statuses["error"] > 0, statuses


def test_a_redis_stop_under_ingestion_loses_and_duplicates_nothing(private_pg, fixtures, tmp_path):
    """The server's Redis (cache, rate limit, channel layer) stopped mid-run and started again:
    appends go on while it is down, each acknowledged once (issue 23's fault probe)."""
    with (
        private_redis(tmp_path) as redis,
        asgi_server_process(**private_pg.env(REDIS_URL=redis.url)) as (base, _),
    ):
        session_id = new_session(base, fixtures["key"])
        writers = start_writers(base, fixtures["key"], session_id)
        wait_for_events(private_pg, session_id, 100)
        redis.stop()
        down_at = stored_events(private_pg, session_id)
        # Appends acknowledged while Redis is down, not only before and after.
        wait_for_events(private_pg, session_id, down_at + 100)
        redis.start()
        check_and_report(private_pg, session_id, writers, "Redis stop")


def live_worker(process: psutil.Process) -> bool:
    """A running uvicorn worker; the killed one, not reaped yet, is a zombie whose command line
    psutil refuses to read (it may turn into one between two calls: hence the except)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(
            process.cmdline()
        )
    except (psutil.ZombieProcess, psutil.NoSuchProcess):
        return False


def test_a_killed_server_worker_loses_and_duplicates_nothing(private_pg, fixtures):
    with asgi_server_process(workers=2, **private_pg.env()) as (base, master):
        session_id = new_session(base, fixtures["key"])
        writers = start_writers(base, fixtures["key"], session_id)
        wait_for_events(private_pg, session_id, 100)
        workers = [
            p
            for p in psutil.Process(master.pid).children()
            if "spawn_main" in " ".join(p.cmdline())
        ]
        assert len(workers) == 2, [p.cmdline() for p in psutil.Process(master.pid).children()]
        os.kill(workers[0].pid, signal.SIGKILL)
        check_and_report(private_pg, session_id, writers, "worker SIGKILL")
        # uvicorn's master started a new worker in the killed one's place.
        deadline = time.monotonic() + 15
        while True:
            live = [p for p in psutil.Process(master.pid).children() if live_worker(p)]
            if len(live) == 2 and workers[0].pid not in {p.pid for p in live}:
                break
            assert time.monotonic() < deadline, "the master did not replace the killed worker"
            time.sleep(0.1)
