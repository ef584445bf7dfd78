import json

import pytest

from tests.private_postgres import PrivatePostgres, private_postgres, run_django

# A project, an API key and a signed-in dashboard user in the private database, made by the
# product's own services; their handles printed as JSON.
_SETUP = """
import json
from django.test import Client
from core.models import Role
from tests.factories import make_api_key, make_member, make_project, make_session
project = make_project("faults")
_, raw_key = make_api_key(project)
user = make_member(project, Role.ADMIN, username="faulty")
client = Client()
client.force_login(user)
session = make_session(project)
print(json.dumps({
    "key": raw_key,
    "cookie": client.cookies["sessionid"].value,
    "project_id": project.pk,
    "session_id": str(session.pk),
}))
"""


@pytest.fixture(scope="session")
def private_pg(django_db_setup) -> PrivatePostgres:
    """A private PostgreSQL holding a copy of the migrated test database (one per run)."""
    with private_postgres() as pg:
        yield pg


@pytest.fixture(scope="session")
def fixtures(private_pg) -> dict:
    return json.loads(run_django(private_pg.env(), _SETUP).strip().splitlines()[-1])
