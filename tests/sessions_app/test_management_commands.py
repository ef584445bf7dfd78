"""createproject and createapikey: what an operator runs to let an agent in."""

import io

import pytest
from django.core.management import CommandError, call_command

from core.models import ApiKey, AuditEntry, Project
from tests.conftest import ApiClient


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_creates_a_project_and_a_key_that_authenticates(db):
    output = _run("createproject", "acme")
    project = Project.objects.get(name="acme")
    assert "acme" in output

    output = _run("createapikey", "acme", "--name", "ci")
    raw_key = output.strip().splitlines()[-1]
    assert raw_key.startswith("sb_") and " " not in raw_key  # alone on the last line
    api_key = ApiKey.objects.get(project=project)
    assert api_key.name == "ci" and raw_key.startswith(f"sb_{api_key.prefix}_")
    assert raw_key not in api_key.hashed_secret
    assert (
        AuditEntry.objects.filter(project=project, action="api_key.create", actor="cli").count()
        == 1
    )

    api = ApiClient(raw_key)
    opened = api.post("/sessions", {"agent": "cli-agent"})
    assert opened.status_code == 201
    assert api.get("/sessions").json()["sessions"][0]["id"] == opened.json()["id"]


def test_it_refuses_a_duplicate_project(db):
    _run("createproject", "acme")
    with pytest.raises(CommandError, match="already exists"):
        _run("createproject", "acme")
    assert Project.objects.filter(name="acme").count() == 1


def test_it_refuses_a_key_for_an_unknown_project(db):
    with pytest.raises(CommandError, match="No project named"):
        _run("createapikey", "nowhere")
    assert not ApiKey.objects.exists()
