"""Django's system checks pass: `manage.py migrate` (the run command's) runs them and stops on
any error, while the test database is created without them. A GinIndex without
django.contrib.postgres installed (postgres.E005) once passed the suite and broke the run."""

from django.core.management import call_command


def test_the_system_checks_pass_as_migrate_runs_them(db):
    call_command("check", databases=["default"])  # raises SystemCheckError on an error
