"""Runs the OpenAI Agents SDK's own session tests (sdk/, copied by refresh.py) in this
project's pytest, with SQLiteSession swapped for SwitchboardSession on the live server
(shim.py). README.md lists what was copied and changed, and every test skipped by design.

- Async tests run on anyio's pytest plugin (installed with httpx) on asyncio, where upstream
  uses pytest-asyncio in auto mode: the project does not carry a second async plugin.
- Of the runner modules, only the tests that build a SQLiteSession (directly or through a
  helper of their module) are selected; the rest test the runner without a store.
- The counts are asserted when the whole directory runs (pytest_sessionfinish).
"""

import ast
import inspect
import re
import uuid
from pathlib import Path

import pytest

from . import shim
from .refresh import RUNNER_MODULES

HERE = Path(__file__).resolve().parent
SDK = HERE / "sdk"

# Imported by the copied tests as helpers, not among the tests this suite runs.
HELPER_MODULES = {
    SDK / "test_apply_patch_tool.py",
    SDK / "test_computer_tool_lifecycle.py",
    SDK / "test_tool_custom_data.py",
    SDK / "test_responses.py",
}

# Tests that cannot pass by design, with the reason (README.md has the same table).
_TABLES = "it drops SQLite's tables (or writes rows around the session) to fail a write inside"
_CONNECTIONS = (
    "it reaches into SQLiteSession's connections (_connections, _connections_lock, _lock): "
    "a Switchboard session holds no database connection"
)
_CORRUPT = (
    "it writes invalid JSON rows into the SQLite table (_locked_connection) to check they are "
    "skipped: the Switchboard API stores only JSON objects, so no such row can exist"
)
_INSERT = "it subclasses SQLiteSession and overrides its private _insert_items to fail a write"
BY_DESIGN: dict[str, str] = {
    "memory/test_compaction_suffix.py::test_suffix_transaction_rolls_back_failed_insert[sqlite]": _TABLES,
    "memory/test_compaction_suffix.py::test_cancelled_suffix_transaction_settles_before_newer_append[sqlite]": _INSERT,
    "memory/test_compaction_suffix.py::test_failed_encrypted_suffix_transaction_preserves_original_tokens[sqlite-False]": _TABLES,
    "memory/test_compaction_suffix.py::test_failed_encrypted_suffix_transaction_preserves_original_tokens[sqlite-True]": _TABLES,
    "memory/test_openai_responses_compaction_session.py::test_settled_pop_failure_invalidates_response_chain": _CONNECTIONS,
    "memory/test_openai_responses_compaction_session.py::test_settled_clear_failure_invalidates_response_chain": _CONNECTIONS,
    "memory/test_session.py::test_sqlite_session_close_closes_worker_thread_connections": _CONNECTIONS,
    "memory/test_session.py::test_sqlite_session_reaps_connections_from_exited_worker_threads": _CONNECTIONS,
    "memory/test_session.py::test_sqlite_session_closes_retired_connections_before_the_next_allocation": _CONNECTIONS,
    "memory/test_session.py::test_sqlite_session_keeps_connections_of_live_worker_threads": _CONNECTIONS,
    "memory/test_session.py::test_sqlite_session_file_lock_is_shared_across_instances": _CONNECTIONS,
    "memory/test_session.py::test_sqlite_session_rollback_failure_evicts_connection": _CONNECTIONS,
    "memory/test_session.py::test_sqlite_session_close_retries_quarantined_connection": _CONNECTIONS,
    "memory/test_session.py::test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": _CONNECTIONS,
    "memory/test_session.py::test_sqlite_session_closed_rejects_empty_add_items": (
        "it expects a closed SQLiteSession to refuse calls; close() on the shim closes nothing "
        "(a SwitchboardSession has no connection of its own to close)"
    ),
    "memory/test_session.py::test_sqlite_session_pop_item_skips_corrupt_most_recent": _CORRUPT,
    "memory/test_session.py::test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _CORRUPT,
    "memory/test_session.py::test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _CORRUPT,
    "memory/test_session.py::test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": _CORRUPT,
    "memory/test_session.py::test_sqlite_session_failed_add_items_releases_write_lock": _TABLES,
    "memory/test_session.py::test_sqlite_session_failed_clear_session_rolls_back": _TABLES,
    "memory/test_session.py::test_sqlite_session_failed_pop_item_releases_write_lock": _TABLES,
    "test_run_impl_resume_paths.py::test_handoff_resume_after_cancelled_compaction_commits": _INSERT,
}

VERSION = "0.24.0"
# What the whole directory must give: tests selected, passed (of them, against the live
# server), skipped by design.
EXPECTED = {"selected": 578, "passed": 548, "against_switchboard": 283, "skipped": 30}


def pytest_configure(config):
    for marker in (
        "asyncio: an async test (upstream runs them on pytest-asyncio; here on anyio)",
        "allow_call_model_methods: upstream: the test may call real model methods",
        "requires_native_macos_sandbox: upstream: needs a macOS sandbox",
        "review_optional: upstream: slow subsystem test",
        "serial: upstream: run after the xdist workers",
    ):
        config.addinivalue_line("markers", marker)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    if (
        Path(str(collector.path)).is_relative_to(SDK)
        and collector.istestfunction(obj, name)
        and inspect.iscoroutinefunction(obj)
    ):
        pytest.mark.usefixtures("anyio_backend")(obj)


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


def _session_builders(path: Path) -> set[str]:
    """Names of the module's top-level functions and classes that build a SQLiteSession,
    directly or through another such name."""
    tree = ast.parse(path.read_text())
    sources = {
        node.name: ast.get_source_segment(path.read_text(), node) or ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not node.name.startswith("test_")
    }
    builders = {"SQLiteSession"}
    while True:
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(builders))) + r")\b")
        more = {name for name, source in sources.items() if pattern.search(source)} - builders
        if not more:
            return builders
        builders |= more


def _builds_a_session(item, builders: dict[Path, set[str]]) -> bool:
    path = Path(str(item.path))
    if path not in builders:
        builders[path] = _session_builders(path)
    names = builders[path]
    source = inspect.getsource(item.function)
    return re.search(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b", source) is not None


def _by_design(item) -> str | None:
    """Why the test cannot pass by design (BY_DESIGN names it with or without its params)."""
    module = str(Path(str(item.path)).relative_to(SDK))
    return BY_DESIGN.get(f"{module}::{item.name}", BY_DESIGN.get(f"{module}::{item.originalname}"))


def pytest_ignore_collect(collection_path, config):
    return True if collection_path in HELPER_MODULES else None


def pytest_collection_modifyitems(config, items):
    builders: dict[Path, set[str]] = {}
    kept, dropped = [], []
    for item in items:
        path = Path(str(item.path))
        if not path.is_relative_to(SDK):
            kept.append(item)
            continue
        if path.name in RUNNER_MODULES and not _builds_a_session(item, builders):
            dropped.append(item)
            continue
        reason = _by_design(item)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"by design: {reason}"))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(autouse=True)
def switchboard_store(request, server_url, oa_key):
    """Sessions of this test live under a namespace of its own on the live server. (Asked for
    by every test, so that the package's project is made, and committed, before the test's
    transaction opens.) Notes the tests that built a session (they ran against the server)."""
    shim.use(server_url, oa_key, f"oa-upstream/{uuid.uuid4().hex[:12]}/")
    yield
    if shim.built():
        _against_switchboard.add(request.node.nodeid)
    shim.use("", "", "")


# Node ids of the tests that built a SQLiteSession (the shim): those ran against the live
# server; the others (the SDK's other stores and session helpers, tested as upstream ships
# them) needed no store.
_against_switchboard: set[str] = set()
_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report):
    if "openai_agents/upstream/sdk/" not in report.nodeid.replace("\\", "/"):
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _outcomes[report.nodeid] = report.outcome


def _count(outcome: str, against: bool | None = None) -> int:
    return sum(
        1
        for nodeid, o in _outcomes.items()
        if o == outcome and against in (None, nodeid in _against_switchboard)
    )


def pytest_terminal_summary(terminalreporter):
    if not _outcomes:
        return
    terminalreporter.write_line(
        f"openai-agents {VERSION} upstream session tests: {_count('passed')} passed "
        f"({_count('passed', True)} against Switchboard), {_count('skipped')} skipped by "
        f"design, {_count('failed')} failed"
    )


def pytest_sessionfinish(session, exitstatus):
    """When every upstream test ran, the counts must be EXPECTED's."""
    if len(_outcomes) != EXPECTED["selected"]:
        return
    got = {
        "selected": EXPECTED["selected"],
        "passed": _count("passed"),
        "against_switchboard": _count("passed", True),
        "skipped": _count("skipped"),
    }
    if got != EXPECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nupstream openai-agents counts changed: expected {EXPECTED}, got {got}")
