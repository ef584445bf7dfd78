"""Real processes for tests: an ASGI server (uvicorn), a WSGI server (granian), Celery worker
and beat, `bash scripts/run` itself, on the test DB.

Children get DJANGO_SETTINGS_MODULE=tests.settings and SWITCHBOARD_TEST_DB_NAME pointing at the
database pytest-django created, so they see what a `transactional_db` test commits.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # A real server or worker must refuse async-unsafe calls as in production, whatever the
    # test process allows itself (tests/browser/conftest.py).
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["PYTHONPATH"] = str(ROOT)
    env["SWITCHBOARD_TEST_DB_NAME"] = connection.settings_dict["NAME"]
    # DEBUG defaults off now; these servers speak plain HTTP to clients (httpx) that keep no
    # Secure cookie there, so they run as scripts/run does unless a test asks for DEBUG off.
    env.setdefault("DEBUG", "true")
    # The test process's key, whatever DEBUG gives each side: a session the test signs in with
    # its Django client is valid on these servers.
    env.setdefault("SECRET_KEY", settings.SECRET_KEY)
    env.update(extra)
    return env


def _bin(name: str) -> list[str]:
    """The command running a tool of this interpreter's environment, as `python -m tool`: the
    venv's script would carry the path of the venv it was installed in (a moved or copied
    venv's scripts name an interpreter that is not there)."""
    return [sys.executable, "-m", name]


def wait_for_http(url: str, timeout: float = 30.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before answering {url}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answered
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"no answer from {url} after {timeout}s")


@contextmanager
def asgi_server(*, workers: int = 1, **env: str) -> Iterator[str]:
    """Run uvicorn on a free port; yields its base URL. Stopped (and reaped) on exit."""
    with asgi_server_process(workers=workers, **env) as (base_url, _):
        yield base_url


@contextmanager
def asgi_server_process(*, workers: int = 1, **env: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """asgi_server(), yielding its process too (uvicorn's master when workers > 1)."""
    port = free_port()
    command = [
        *_bin("uvicorn"),
        "config.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--lifespan",
        "off",
        "--no-proxy-headers",  # as scripts/run and README start it: core.client_address decides
        "--log-level",
        "warning",
        "--workers",
        str(workers),
    ]
    with _serving(command, port, env) as served:
        yield served


@contextmanager
def wsgi_server(**env: str) -> Iterator[str]:
    """Run granian's WSGI server on config.wsgi:application as README's split layout starts it,
    on a free port; yields its base URL. Stopped (and reaped) on exit."""
    with wsgi_server_process(**env) as (base_url, _):
        yield base_url


@contextmanager
def wsgi_server_process(**env: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """wsgi_server(), yielding its process too (granian's main process; its worker is a child)."""
    port = free_port()
    command = [
        *_bin("granian"),
        "--interface",
        "wsgi",
        "config.wsgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--blocking-threads",
        "2",
        "--no-ws",
        "--log-level",
        "warning",
    ]
    with _serving(command, port, env) as served:
        yield served


@contextmanager
def _serving(
    command: list[str], port: int, env: dict[str, str]
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start the server `command` listening on `port`; yields its base URL once it answers, and
    its process. Stopped (and reaped) on exit."""
    process = subprocess.Popen(command, cwd=ROOT, env=child_env(**env))
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(base_url + "/accounts/login/", process=process)
        yield base_url, process
    finally:
        process.terminate()
        _reap(process, timeout=10)


def _reap(process: subprocess.Popen, *, timeout: float) -> None:
    """Wait for a process told to stop; killed if it has not after `timeout` seconds."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def celery_processes(
    queue: str,
    tmp_path: Path,
    *,
    beat: bool = False,
    app: str = "config",
    node: str | None = None,
    **env: str,
) -> Iterator[Path]:
    """A real Celery worker consuming only `queue` (and a beat process, if asked) against the
    test database; yields the log file both write to. Stopped (and reaped) on exit.

    Give every test its own queue name: the broker is a Redis other suites share, and a worker
    on the default queue would take (or be given) their jobs. Several workers on one queue
    need a `node` name each (the worker's name is `<node>@<host>`; the queue's by default).
    """
    log = tmp_path / "celery.log"
    commands = [
        [
            *_bin("celery"),
            "-A",
            app,
            "worker",
            "-Q",
            queue,
            "-n",
            f"{node or queue}@%h",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    ]
    if beat:
        commands.append(
            [
                *_bin("celery"),
                "-A",
                "config",
                "beat",
                "--loglevel",
                "INFO",
                "--scheduler",
                "django_celery_beat.schedulers:DatabaseScheduler",
                "--pidfile",
                str(tmp_path / "beat.pid"),
            ]
        )
    with log.open("w") as out:
        processes = [
            subprocess.Popen(
                c, cwd=ROOT, env=child_env(**env), stdout=out, stderr=subprocess.STDOUT
            )
            for c in commands
        ]
        try:
            yield log
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                _reap(process, timeout=15)


def scripts_run_process(log: Path, port: int, **env: str | None) -> subprocess.Popen:
    """Start `bash scripts/run` for real on `port` (without its bootstrap: this environment's
    python, celery and uvicorn), writing to `log`; `env` adds variables (None: removes one).

    It runs as a terminal runs a command: in its own process group (Ctrl-C is SIGINT to the
    group: `os.killpg(process.pid, signal.SIGINT)`), with Ctrl-C's default action. Under a shell
    that started this test run in the background SIGINT arrives ignored, and bash can neither
    trap nor reset a signal ignored on entry (the script would never hear Ctrl-C).
    """
    child = child_env(
        SWITCHBOARD_NO_BOOTSTRAP="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        PORT=str(port),
    )
    for name, value in env.items():
        if value is None:
            child.pop(name, None)
        else:
            child[name] = value
    with log.open("w") as out:
        return subprocess.Popen(
            ["bash", "scripts/run"],
            cwd=ROOT,
            env=child,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_default_interrupt,
        )


def _default_interrupt() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_until(predicate, log: Path, timeout: float = 45.0) -> None:
    """Poll `predicate` until true; on timeout fail with the tail of the Celery log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out; celery said:\n{log.read_text()[-4000:]}")
