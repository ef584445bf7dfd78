"""The loadworkflows command and the beat schedule the migrations install."""

import pytest
from django.core.management import CommandError, call_command
from django_celery_beat.models import PeriodicTask

from tasks_app.models import WorkflowDefinition
from tasks_app.workflows import WORKFLOW_DIR
from tests.factories import make_project


def test_it_registers_built_ins_and_files_for_a_project(db, tmp_path, capsys):
    call_command("loadworkflows")
    assert set(WorkflowDefinition.objects.filter(project=None).values_list("name", "source")) == {
        ("document_approval", "code"),
        ("research_report", "code"),
    }
    # The shipped YAML is the same content: registering it again changes nothing.
    call_command("loadworkflows", str(WORKFLOW_DIR / "document_approval.yaml"))
    assert "Already registered (unchanged): document_approval version 1" in capsys.readouterr().out

    project = make_project("acme")
    path = tmp_path / "triage.yaml"
    path.write_text(
        "name: triage\nversion: 3\nstates: [new, done]\ninitial: new\nterminal: [done]\n"
        "transitions:\n  - {from: new, to: done}\n"
    )
    call_command("loadworkflows", str(path), "--project", "acme")
    stored = WorkflowDefinition.objects.get(name="triage")
    assert (stored.project, stored.version, stored.source) == (project, 3, "file")


def test_it_fails_loudly_on_a_bad_file_or_project(db, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nversion: 1\nstates: [a]\ninitial: a\nterminal: [a]\n")
    with pytest.raises(CommandError, match="bad.yaml"):
        call_command("loadworkflows", str(path))
    with pytest.raises(CommandError, match="no such file"):
        call_command("loadworkflows", str(tmp_path / "missing.yaml"))
    with pytest.raises(CommandError, match="No project"):
        call_command(
            "loadworkflows", str(WORKFLOW_DIR / "research_report.yaml"), "--project", "nope"
        )
    assert not WorkflowDefinition.objects.filter(name="bad").exists()


def test_beat_schedules_the_deadline_job_every_30_seconds(transactional_db):
    from django_celery_beat.schedulers import DatabaseScheduler

    from config.celery import app

    assert not PeriodicTask.objects.filter(task="tasks_app.expire_step_deadlines").exists()
    # What beat does when it starts: the schedule declared in settings lands in its tables.
    DatabaseScheduler(app=app)
    entry = PeriodicTask.objects.get(task="tasks_app.expire_step_deadlines")
    assert entry.enabled
    assert (entry.interval.every, entry.interval.period) == (30, "seconds")
