"""scripts/run's preparation (switchboard/management/commands/prepare_run.py): migrations,
static files and demo data, each done only when needed, so a second run is quick."""

import io
import os

import pytest
from django.core.management import call_command
from django.db.migrations.recorder import MigrationRecorder

from core.models import Project
from sessions_app.models import Session
from switchboard.management.commands.prepare_run import STAMP_NAME, unapplied_migrations

pytestmark = pytest.mark.django_db


def prepare(*args: str) -> str:
    out = io.StringIO()
    call_command("prepare_run", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def static_dirs(settings, tmp_path):
    """A STATIC_ROOT of its own and one extra source folder with one file in it."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "app.css").write_text("body { color: black; }\n")
    settings.STATICFILES_DIRS = [source]
    settings.STATIC_ROOT = tmp_path / "collected"
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    return source, settings.STATIC_ROOT


def test_static_files_are_collected_once_then_again_only_when_one_changes(static_dirs):
    source, collected = static_dirs
    assert "Static files collected." in prepare("--no-demo")
    assert (collected / "app.css").read_text() == "body { color: black; }\n"
    assert (collected / "admin").is_dir()  # the apps' static files too
    assert (collected / STAMP_NAME).is_file()

    # Nothing changed: not collected again (a file removed from the output stays removed).
    (collected / "app.css").unlink()
    assert "Static files collected." not in prepare("--no-demo")
    assert not (collected / "app.css").exists()

    # A source file changed (content and modification time): collected again.
    (source / "app.css").write_text("body { color: navy; }\n")
    stat = (source / "app.css").stat()
    os.utime(source / "app.css", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert "Static files collected." in prepare("--no-demo")
    assert (collected / "app.css").read_text() == "body { color: navy; }\n"

    # A new source file: collected again.
    (source / "new.js").write_text("// new\n")
    assert "Static files collected." in prepare("--no-demo")
    assert (collected / "new.js").is_file()


def test_migrations_are_applied_only_when_some_are_unapplied(static_dirs):
    assert unapplied_migrations() == []
    prepare("--no-demo")
    assert "migration" not in prepare("--no-demo")

    # Back one migration (it only changes model options: nothing in the schema), then again.
    call_command("migrate", "tasks_app", "0002", verbosity=0)
    assert unapplied_migrations() == ["tasks_app.0003_task_history_plural"]
    assert "Applying 1 migration(s)." in prepare("--no-demo")
    assert unapplied_migrations() == []
    assert MigrationRecorder.Migration.objects.filter(
        app="tasks_app", name="0003_task_history_plural"
    ).exists()


def test_the_demo_is_loaded_once_and_left_as_it_is(static_dirs, settings):
    settings.DEBUG = True  # seed_demo refuses with DEBUG off (published passwords)
    assert not Project.objects.filter(name="demo").exists()
    first = prepare()
    assert "Demo project 'demo' created." in first
    sessions = Session.objects.filter(project__name="demo").count()
    assert sessions > 0

    second = prepare()
    assert "already there; left as it is" in second
    assert "username 'admin'" in second
    assert Session.objects.filter(project__name="demo").count() == sessions
