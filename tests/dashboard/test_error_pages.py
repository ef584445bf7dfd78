import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.template.loader import render_to_string
from django.test import Client


def test_it_shows_a_friendly_404_for_unknown_addresses(team):
    client = team.client("viewer")
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    assert b"Not found" in response.content and b"Back to your projects" in response.content


def test_the_error_templates_render_without_a_request():
    for name, phrase in [
        ("400.html", "Check your input"),
        ("403.html", "Not allowed"),
        ("404.html", "Not found"),
        ("500.html", "Something went wrong"),
        ("403_csrf.html", "Please reload the page"),
    ]:
        page = render_to_string(name)
        assert phrase in page, name
        assert "Switchboard" in page  # they extend the base layout


def test_the_sign_in_page_is_reachable_anonymously(db):
    assert Client().get("/accounts/login/").status_code == 200


def test_it_answers_404_for_a_project_id_beyond_any_column(client, django_user_model):
    user = django_user_model.objects.create_user(username="huge", password="pw-for-tests-1")
    client.force_login(user)
    assert client.get("/p/99999999999999999999999/").status_code == 404


@pytest.mark.parametrize("debug", [False, True])
def test_an_unknown_address_shows_the_friendly_404_with_debug_on_or_off(team, settings, debug):
    """Issue 13, defect 4: never Django's technical 404, which lists every URL pattern."""
    settings.DEBUG = debug
    for path in ("/no/such/page/", f"/sessions/{uuid.uuid4()}/"):
        response = team.client("viewer").get(path)
        assert response.status_code == 404, path
        assert b"Not found" in response.content and b"Back to your projects" in response.content
        assert b"URLconf" not in response.content and b"DEBUG = True" not in response.content
    # APPEND_SLASH still redirects first.
    assert team.client("viewer").get("/accounts/login").status_code == 301


def test_debug_is_off_unless_asked_for(tmp_path):
    """The settings default DEBUG off (with no SECRET_KEY: a random key kept in a git-ignored
    file, never the development key); DEBUG=true (scripts/run) turns it on."""
    code = "from django.conf import settings; print(settings.DEBUG, settings.SECRET_KEY[:8])"
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"

    def run(**extra: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", "import django; django.setup(); " + code],
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent.parent.parent,
        )
        return out.stdout.split()

    off = run()
    assert off[0] == "False" and off[1] != "dev-only"
    assert run(DEBUG="true") == ["True", "dev-only"]
    assert run()[1] == off[1]  # the same key on the next start
    run_script = (Path(__file__).resolve().parent.parent.parent / "scripts/run").read_text()
    assert "export DEBUG=${DEBUG:-true}" in run_script
