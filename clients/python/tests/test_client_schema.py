"""The client cannot drift from the server: every operation it makes, every field it sends and
reads, against the OpenAPI document a live server serves (client_schema.Drift). Prints the
coverage: operations the client calls / operations the schema serves. Also: the sync client is
what unasync.py writes, and the client imports nothing of the server."""

import ast
import copy
import subprocess
import sys
from pathlib import Path

import pytest
from client_schema import Drift
from switchboard_client import operations

CLIENT = Path(__file__).resolve().parent.parent
PACKAGE = CLIENT / "src" / "switchboard_client"


def test_the_client_matches_the_served_schema(served_schema, capsys):
    drift = Drift(served_schema)
    problems = drift.check()
    covered, served = drift.coverage()
    with capsys.disabled():
        print(
            f"\nswitchboard-client covers {len(covered)}/{len(served)} operations of the served "
            f"schema ({100 * len(covered) / len(served):.0f}%)"
        )
        for method, path in sorted(served - covered, key=lambda op: (op[1], op[0])):
            print(f"  not called by the client: {method} {path}")
        for field in sorted(drift.unread):
            print(f"  served, not read by the client: {field}")
    assert problems == []
    assert len(covered) == len(operations.OPERATIONS)


def test_the_check_finds_drift(served_schema):
    """Each kind of drift the check is for, made in a copy of the served schema, is reported."""
    schemas = served_schema["components"]["schemas"]
    cases = {
        "a field the client reads is gone": lambda s: s["SessionOut"]["properties"].pop("head_seq"),
        "a field the client reads became nullable": lambda s: s["EventOut"]["properties"].update(
            seq={"anyOf": [{"type": "integer"}, {"type": "null"}]}
        ),
        "a field the client reads changed type": lambda s: s["UsageOut"]["properties"].update(
            tokens={"type": "string"}
        ),
        "a field the client requires is optional": lambda s: s["HandoffOut"]["required"].remove(
            "answer"
        ),
        "a field the client sends is gone": lambda s: s["TaskIn"]["properties"].pop("metadata"),
        "a field the client may omit is required": lambda s: s["SessionIn"]["required"].append(
            "title"
        ),
        "an enum lost a value the client sends": lambda s: s["HandoffIn"]["properties"][
            "kind"
        ].update(enum=["approval", "question"]),
    }
    assert {"SessionOut", "EventOut", "UsageOut", "HandoffOut", "TaskIn", "SessionIn"} <= set(
        schemas
    )
    for what, change in cases.items():
        changed = copy.deepcopy(served_schema)
        change(changed["components"]["schemas"])
        assert Drift(changed).check(), what
    # An operation, a query parameter, a success status the client cannot read.
    changed = copy.deepcopy(served_schema)
    del changed["paths"]["/api/v1/tasks/{task_id}/transitions"]
    assert any("no such operation" in p for p in Drift(changed).check())
    changed = copy.deepcopy(served_schema)
    read = changed["paths"]["/api/v1/tasks/{task_id}"]["get"]
    read["parameters"] = [p for p in read["parameters"] if p["name"] != "history_limit"]
    assert any("history_limit" in p for p in Drift(changed).check())
    changed = copy.deepcopy(served_schema)
    responses = changed["paths"]["/api/v1/sessions/{session_id}/pause"]["post"]["responses"]
    responses["202"] = responses["200"]
    assert any("may answer 202" in p for p in Drift(changed).check())


def test_every_operation_is_called_by_the_client():
    source = (PACKAGE / "_async_client.py").read_text()
    unused = [name for name in operations.OPERATIONS if f"ops.{name}" not in source]
    assert unused == []


def test_the_sync_client_is_generated_from_the_async_one():
    check = subprocess.run(
        [sys.executable, str(CLIENT / "unasync.py"), "--check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr


# The framework adapters (optional extras) and the one framework each may import besides.
ADAPTERS = {
    "adk.py": {"google"},
    "adk_artifacts.py": {"google"},
    "langgraph.py": {"langgraph", "langchain_core"},
    "openai_agents.py": {"agents", "openai"},
}


def test_the_client_imports_nothing_but_the_standard_library_and_httpx():
    imported = set()
    for path in PACKAGE.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
        imported.update(found - ADAPTERS.get(path.name, set()))
    assert imported - sys.stdlib_module_names == {"httpx"}


def test_the_client_imports_without_the_frameworks():
    """`import switchboard_client` works where no framework is installed: none is imported
    until its adapter module is."""
    code = (
        "import sys\n"
        "class Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'google', 'langgraph', 'langchain_core', 'agents'}:\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Absent())\n"
        "import switchboard_client\n"
        "switchboard_client.Client('http://x', 'k').close()\n"
        "try:\n"
        "    import switchboard_client.adk\n"
        "except ImportError:\n"
        "    print('adapter needs its framework')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "adapter needs its framework\n"


@pytest.mark.parametrize("variable", ["SWITCHBOARD_URL", "SWITCHBOARD_API_KEY"])
def test_it_is_configured_from_the_environment(monkeypatch, variable):
    from switchboard_client import Client, ConfigurationError

    monkeypatch.setenv("SWITCHBOARD_URL", "http://sb.example:8000/api/v1/")
    monkeypatch.setenv("SWITCHBOARD_API_KEY", "sk-test")
    with Client() as sb:
        assert sb.url == "http://sb.example:8000"
        assert sb._http.headers["Authorization"] == "Bearer sk-test"
    with Client("http://other:1", "sk-other") as sb:
        assert sb.url == "http://other:1"
        assert sb._http.headers["Authorization"] == "Bearer sk-other"
    monkeypatch.delenv(variable)
    with pytest.raises(ConfigurationError, match=variable):
        Client()
