"""Google ADK's shared session-service contract (google/adk-python,
tests/unittests/sessions/test_session_service.py: the tests that take the `session_service`
fixture), run on SwitchboardSessionService against the live test server. README.md says where
the copy comes from and why it is not committed.

This conftest is upstream's `_conformance.py` for this project: one backend, Switchboard, each
test on a fresh namespace of one project, with the divergences it records. Upstream marks its
async tests `@pytest.mark.asyncio` (pytest-asyncio); they are run here with asyncio.run, the
service's client closed in the same loop. The counts are asserted at the end of the run.
"""

import uuid
from pathlib import Path

import pytest
from switchboard_client import AsyncClient, RetryPolicy
from switchboard_client.adk import SwitchboardSessionService
from upstream_runner import run_coroutine_test

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "test_session_service.py"
# Upstream's shared contract (31 tests on its `session_service` fixture) and the four the copy
# also runs on the fixture (two dedup tests upstream pins to InMemorySessionService, two
# stale-writer tests it runs on DatabaseSessionService only).
CONTRACT = 31
EXTRA = 4
# Contract test name -> why SwitchboardSessionService fails it by design (strict xfail, as
# upstream's _conformance.py records a backend's divergences). None today.
DIVERGENCES: dict[str, str] = {}

FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)
_outcomes: dict[str, str] = {}


def pytest_configure(config):
    config.addinivalue_line("markers", "asyncio: an async test (run here with asyncio.run)")


@pytest.fixture
def session_service(request, server_url, api_key):
    divergence = DIVERGENCES.get(request.node.originalname)
    if divergence is not None:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=divergence))
    client = AsyncClient(server_url, api_key, retry=FAST)
    return SwitchboardSessionService(client, namespace=f"upstream-{uuid.uuid4().hex[:8]}:")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    return run_coroutine_test(
        pyfuncitem,
        lambda arguments: [
            service
            for service in [arguments.get("session_service")]
            if isinstance(service, SwitchboardSessionService)
        ],
    )


def pytest_runtest_logreport(report):
    if report.nodeid.split("::")[0].endswith("adk/upstream/test_session_service.py") and (
        report.when == "call" or report.outcome != "passed"
    ):
        _outcomes[report.nodeid] = report.outcome


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _outcomes:
        return
    passed = sum(outcome == "passed" for outcome in _outcomes.values())
    terminalreporter.write_line(
        f"ADK session-service contract on Switchboard: {passed} of {len(_outcomes)} passed "
        f"({CONTRACT} upstream contract tests + {EXTRA} more on the fixture; "
        f"{len(DIVERGENCES)} recorded divergences)"
    )


def pytest_sessionfinish(session, exitstatus):
    """The whole copy ran: every test passed (a recorded divergence xfails) or the run fails."""
    if len(_outcomes) == CONTRACT + EXTRA:
        expected = CONTRACT + EXTRA - len(DIVERGENCES)
        if sum(outcome == "passed" for outcome in _outcomes.values()) != expected:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
