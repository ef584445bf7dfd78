"""Every bench in bench/ runs in its smoke mode (`--smoke`: tiny sizes, one round, figures
printed, nothing asserted), so a change that breaks a bench fails the build instead of the next
measurement.

The scripts are found, not listed: every bench/*.py and bench/*.sh but the helpers (`_*`). One
that has no smoke mode fails here. Each run gets this run's environment (DATABASE_URL's server,
REDIS_URL) and SWITCHBOARD_TEST_DB, from which the benches name their scratch databases
(bench/_common.py: scratch_name), so suites running side by side never drop each other's; and
BENCH_TEMPLATE_DB, a database migrated once here that each bench copies instead of migrating.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
BENCHES = sorted(
    path for path in [*BENCH.glob("*.py"), *BENCH.glob("*.sh")] if not path.name.startswith("_")
)
# A bench's smoke run is a few seconds to a minute; past this it is broken (or not smoke).
TIMEOUT = 300
PARALLEL = 3
# Started first: a fresh clone's first start; the dashboard at its smallest still loads, signs in
# and renders every page once; the API against itself.
LONGEST = ("first_run.sh", "dashboard.py", "api_ab.py")

pytestmark = pytest.mark.slow


def _bench_common(env: dict[str, str]) -> ModuleType:
    """bench/_common.py, read with `env` (its PostgreSQL server comes from DATABASE_URL)."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        spec = importlib.util.spec_from_file_location("bench_common", BENCH / "_common.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return module


@pytest.fixture(scope="module")
def bench_env() -> Iterator[dict[str, str]]:
    env = dict(os.environ)
    # As a developer runs them: the benches choose their own settings (not the tests').
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env["SWITCHBOARD_TEST_DB"] = run = env.get("SWITCHBOARD_TEST_DB") or "test_switchboard"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    common = _bench_common(env)
    template = f"switchboard_bench_template_{run}"[:63]  # (bench/_common.py: scratch_name)
    common.recreate_database(template)
    # Side by side: both are mostly Django starting up.
    with ThreadPoolExecutor(2) as pool:
        done = [
            pool.submit(common.migrate, template, env),
            pool.submit(common.collect_static, {**env, "DEBUG": "false"}),
        ]
    for future in done:
        future.result()
    env[common.TEMPLATE_ENV] = template
    env[common.STATIC_COLLECTED_ENV] = "1"
    yield env
    # The template and every bench's scratch database of this run (the benches leave theirs
    # for a look afterwards; here nobody looks).
    with common.pg_connect("postgres", autocommit=True) as conn:
        names = conn.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, 'switchboard_bench')"
        ).fetchall()
        for (db,) in names:
            if db.endswith(f"_{run}"):
                conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def test_it_finds_the_benches() -> None:
    assert {"ingest.py", "dashboard.py", "first_run.sh"} <= {p.name for p in BENCHES}


def _smoke(script: Path, env: dict[str, str]) -> tuple[int | None, str, str]:
    """Run `script --smoke`: (exit status or None on a timeout, stdout, stderr)."""
    command = ["bash" if script.suffix == ".sh" else sys.executable, str(script), "--smoke"]
    # Its own process group: on a timeout the servers and workers it started go with it.
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        return None, stdout, stderr
    return process.returncode, stdout, stderr


@pytest.fixture(scope="module")
def smoke_runs(
    request: pytest.FixtureRequest, bench_env: dict[str, str]
) -> Iterator[dict[Path, Future[tuple[int | None, str, str]]]]:
    """The selected benches' smoke runs, PARALLEL at a time: much of a run is waiting (servers
    starting, workers settling), and each has its own scratch database and ports."""
    selected = [
        script
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.module is sys.modules[__name__]
        for script in [getattr(item, "callspec", None) and item.callspec.params.get("script")]
        if isinstance(script, Path)
    ]
    # The longest first, so that they do not end the run alone.
    selected.sort(key=lambda script: script.name not in LONGEST)
    with ThreadPoolExecutor(PARALLEL) as pool:
        yield {script: pool.submit(_smoke, script, bench_env) for script in selected}


@pytest.mark.parametrize("script", BENCHES, ids=lambda path: path.name)
def test_it_runs_the_bench_in_smoke_mode(
    script: Path, smoke_runs: dict[Path, Future[tuple[int | None, str, str]]]
) -> None:
    name = f"bench/{script.name}"
    text = script.read_text()
    assert "--smoke" in text or "add_smoke_flag" in text, (
        f"{name} has no smoke mode (--smoke: tiny sizes, one round; bench/_common.py)"
    )
    status, stdout, stderr = smoke_runs[script].result()
    tail = f"stderr tail:\n{stderr[-3000:]}\nstdout tail:\n{stdout[-1000:]}"
    assert status is not None, f"{name} --smoke ran over {TIMEOUT} s; {tail}"
    assert status == 0, f"{name} --smoke exited {status}; {tail}"
    assert re.search(r"\d\.\d", stdout), f"{name} --smoke printed no figures; {tail}"
