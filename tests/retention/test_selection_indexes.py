"""Each batch of the archive, compact and delete rules walks its own partial index from where
the previous batch stopped (sessions_app: session_retention_*), so it evaluates the outcome
rules only for the rows it takes instead of sorting every candidate. The tables here are small
(PostgreSQL would rather scan them), so sequential scans are priced out for the EXPLAIN: what
is asserted is that the queries the jobs run *can* use their index (a predicate the index's
condition no longer implies, or an unbounded resume key, would make them fall back to a scan)."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from retention_app.selection import after_key, candidates
from retention_app.services.policies import project_policies, save_policy
from tests.factories import make_session
from tests.retention.helpers import SYSTEM

pytestmark = pytest.mark.django_db

POLICY = {
    "close_idle_after": 86400,
    "close_paused_after": None,
    "archive_closed_after": 86400,
    "compact_after": 86400,
    "delete_after": 86400,
    "outcome_compact_after": 30 * 86400,
    "outcome_delete_after": 30 * 86400,
    "keep_outcomes": ["error", "handoff", "over_budget"],
    "keep_tags": ["vip"],
}


def plan(queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.parametrize(
    ("action", "index"),
    [
        ("archive", "session_retention_archive"),
        ("compact", "session_retention_compact"),
        ("delete", "session_retention_delete"),
    ],
)
def test_a_batch_walks_its_rules_index_from_the_last_session_taken(project, action, index):
    save_policy(project, POLICY, actor=SYSTEM)
    session = make_session(project)
    now = timezone.now() + timedelta(days=400)
    selected = candidates(project, action, now=now, policies=project_policies(project))
    first_batch = selected[:100]
    assert index in plan(first_batch)
    resumed = selected.filter(after_key(action, (timezone.now(), session.pk)))[:100]
    explained = plan(resumed)
    assert index in explained
    # The resume key bounds the scan itself (an Index Cond), not only a filter on every row.
    cond = next(line for line in explained.splitlines() if "Index Cond" in line)
    assert ">=" in cond
