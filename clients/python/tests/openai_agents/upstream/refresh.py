"""Rewrites sdk/ from an openai-agents sdist: the SDK's session tests, as they ship, with the
imports that must change changed (README.md says what, and why).

    python3 -m pip download openai-agents==0.24.0 --no-deps --no-binary :all: -d /tmp/oa
    tar xzf /tmp/oa/openai_agents-0.24.0.tar.gz -C /tmp/oa
    python clients/python/tests/openai_agents/upstream/refresh.py /tmp/oa/openai_agents-0.24.0

Copies tests/memory/, the runner test modules that build a SQLiteSession (RUNNER_MODULES), the
upstream conftest.py and every module of tests/ they import (followed transitively).
"""

import ast
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE / "sdk"
PACKAGE = "openai_agents.upstream.sdk"
RUNNER_MODULES = [
    "test_agent_runner.py",
    "test_agent_runner_streamed.py",
    "test_max_turns.py",
    "test_native_tool_failure_history.py",
    "test_programmatic_tool_calling.py",
    "test_run_impl_resume_paths.py",
    "test_soft_cancel.py",
    "test_tool_batch_failure_history.py",
    "test_tool_failure_boundaries.py",
]
SWAPPED_FROM = {"agents", "agents.memory", "agents.memory.sqlite_session"}
SHIM_IMPORT = "from openai_agents.upstream.shim import SQLiteSession  # swapped: see README.md"


def wanted(tests: Path) -> list[str]:
    """The files to copy (relative to tests/): the seeds and what they import."""
    seeds = [f"memory/{p.name}" for p in sorted((tests / "memory").glob("*.py"))]
    seeds += [*RUNNER_MODULES, "conftest.py"]
    seen: set[str] = set()
    todo = list(seeds)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        package = Path(name).parent.parts
        tree = ast.parse((tests / name).read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                parts = [*package[: len(package) - (node.level - 1)]]
                parts += (node.module or "").split(".") if node.module else []
            elif node.module and node.module.startswith("tests."):
                parts = node.module.split(".")[1:]
            else:
                continue
            path = "/".join(parts)
            if (tests / f"{path}.py").is_file():
                todo.append(f"{path}.py")
            elif (tests / path / "__init__.py").is_file():
                todo.append(f"{path}/__init__.py")
    return sorted(seen)


def swap_sqlite_session(source: str) -> str:
    """Imports of SQLiteSession from the SDK import the shim instead (nothing else changes)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.module in SWAPPED_FROM):
            continue
        names = [a for a in node.names if a.name == "SQLiteSession" and a.asname is None]
        if not names:
            continue
        kept = [a for a in node.names if a.name != "SQLiteSession"]
        text = ""
        if kept:
            listed = ",\n".join(
                f"    {a.name}" + (f" as {a.asname}" if a.asname else "") for a in kept
            )
            text = f"from {node.module} import (\n{listed},\n)\n"
        edits.append((node.lineno - 1, node.end_lineno or node.lineno, text + SHIM_IMPORT + "\n"))
    for start, end, text in reversed(edits):
        lines[start:end] = [text]
    return "".join(lines)


def rewrite(source: str) -> str:
    source = re.sub(r"\bfrom tests\.", f"from {PACKAGE}.", source)
    source = re.sub(r"\bimport tests\.", f"import {PACKAGE}.", source)
    return swap_sqlite_session(source)


def main(sdist: Path) -> None:
    tests = sdist / "tests"
    if TARGET.exists():
        shutil.rmtree(TARGET)
    for name in wanted(tests):
        target = TARGET / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rewrite((tests / name).read_text()))
    for directory in [TARGET, *(p for p in TARGET.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    shutil.copy(sdist / "LICENSE", TARGET / "LICENSE")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
