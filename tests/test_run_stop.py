"""Ctrl-C on `bash scripts/run` stops everything it started, by itself and cleanly (issue 13,
defect 5): the Celery worker (with beat), the ASGI server and the simulated agents, on the
default setup without services (filesystem broker, in-memory channel layer).

The real script runs (without its bootstrap: this environment's python, celery and uvicorn) on a
free port against the test database, with a signed-in websocket on the sessions list receiving
the agents' writes (a delayed flush pending, as in a browser left open). SIGINT goes to the
script's whole process group, as a terminal's Ctrl-C does. How long the stop took is printed,
not asserted (bench/run_stop.py measures the worker); the script kills, and names, a process
still running STOP_SECONDS after it was asked to stop.
"""

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from websockets.sync.client import connect

from core.models import Project
from tests.servers import free_port, scripts_run_process, wait_for_http

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def group_members(pgid: int) -> dict[int, str]:
    out = subprocess.run(
        ["ps", "-ww", "-o", "pid=,args=", "-g", str(pgid)], capture_output=True, text=True
    ).stdout
    members = {}
    for line in out.strip().splitlines():
        pid, _, args = line.strip().partition(" ")
        members[int(pid)] = args
    return members


def wait_for(predicate, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not within {timeout}s; the run said:\n{log.read_text()[-4000:]}")


def signed_in_cookie(base_url: str, username: str, password: str) -> str:
    with httpx.Client(base_url=base_url, timeout=10) as client:
        form = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        response = client.post(
            "/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        )
        assert response.status_code == 302, response.text[:500]
        return client.cookies[django_settings.SESSION_COOKIE_NAME]


def test_ctrl_c_stops_the_server_the_worker_and_the_agents_cleanly(tmp_path):
    port = free_port()
    log = tmp_path / "run.log"
    run = scripts_run_process(
        log,
        port,
        # No services: the filesystem broker (in a folder of this test's) and the in-memory
        # channel layer, scripts/run's default. DATABASE_URL stays set: no embedded PostgreSQL.
        REDIS_URL="",
        CELERY_FILESYSTEM_BROKER_DIR=str(tmp_path / "broker"),
        SWITCHBOARD_DEADLINE_CHECK_SECONDS="1",
        SWITCHBOARD_OUTBOX_RELAY_SECONDS="1",
    )
    try:
        base_url = f"http://127.0.0.1:{port}"
        wait_for_http(base_url + "/accounts/login/", timeout=180, process=run)
        wait_for(lambda: " ready." in log.read_text(), 60, "the Celery worker ready", log)
        wait_for(lambda: "Task core." in log.read_text(), 30, "a beat job run", log)

        project = Project.objects.get(name="demo")
        cookie = signed_in_cookie(base_url, "admin", "switchboard-admin")
        with connect(
            f"ws://127.0.0.1:{port}/ws/projects/{project.pk}/?view=sessions",
            origin=base_url,
            additional_headers={"Cookie": f"{django_settings.SESSION_COOKIE_NAME}={cookie}"},
            proxy=None,
            open_timeout=10,
        ) as ws:
            # The agents write about once a second: a frame of the list arrives, and the next
            # change's flush is pending most of the time from then on.
            assert ws.recv(timeout=30)

            members = group_members(run.pid)
            assert any("celery" in args and " worker " in args for args in members.values()), (
                members
            )
            assert any("uvicorn" in args for args in members.values()), members
            assert any("simulate_agents" in args for args in members.values()), members

            started = time.monotonic()
            os.killpg(run.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
            # When each process went (printed, not asserted).
            alive, gone = dict(members), []
            while alive and time.monotonic() - started < 60:
                run.poll()  # reaps the script once it exits: a zombie stays listed in its group
                now = group_members(run.pid)
                for pid in [pid for pid in alive if pid not in now]:
                    gone.append(f"{time.monotonic() - started:5.1f}s {alive.pop(pid)[:90]}")
                time.sleep(0.05)
            run.wait(timeout=10)
            assert not group_members(run.pid), group_members(run.pid)
            print("after SIGINT:", *gone, sep="\n  ")
    finally:
        if run.poll() is None or group_members(run.pid):
            with_children = group_members(run.pid)
            for pid in with_children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            run.wait(timeout=10)

    text = log.read_text()
    assert "Switchboard stopped." in text, text[-4000:]
    # Nothing had to be killed: every process exited by itself within STOP_SECONDS.
    assert "did not stop" not in text, text[-4000:]
    assert "Traceback" not in text, text
    assert "ERROR" not in text, text
    assert "worker: Warm shutdown" in text
    assert "Finished server process" in text
