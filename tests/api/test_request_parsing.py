"""Requests parse as the OpenAPI schema says: what it refuses is refused (422, nothing written),
what it allows is taken. Each case here was accepted before, or refused though valid."""

from decimal import Decimal

import pytest

from sessions_app.models import Event, Session
from tests.factories import make_session, make_task


def _assert_invalid(response, where: list):
    assert response.status_code == 422, response.content
    detail = response.json()["error"]["detail"]
    assert any(problem["loc"][-len(where) :] == where for problem in detail), detail


@pytest.mark.parametrize(
    ("budget", "where"),
    [
        ([None, None], ["budget"]),  # was read as an all-defaults object
        ("budget", ["budget"]),
        ({"max_tokens": "5"}, ["max_tokens"]),  # lax mode turned "5" and true into integers
        ({"max_tokens": True}, ["max_tokens"]),
        ({"max_cost": "1e3"}, ["max_cost"]),  # the schema allowed any string, the column not
        ({"max_cost": "-0"}, ["max_cost"]),
        ({"max_cost": " 5"}, ["max_cost"]),
        ({"max_cost": "1.1234567"}, ["max_cost"]),
        ({"max_cost": 1e8}, ["max_cost"]),
        ({"max_cost": False}, ["max_cost"]),
    ],
)
def test_it_refuses_what_the_schema_refuses(api, project, budget, where):
    response = api.post("/sessions", {"agent": "a", "budget": budget})
    _assert_invalid(response, where)
    assert not Session.objects.filter(project=project).exists()


def test_it_takes_json_integers_written_with_a_point_and_rounds_float_costs(api, project):
    session = make_session(project)
    response = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {"kind": "note", "tokens": 5.0, "cost": 0.1 + 0.2},
                {"kind": "note", "cost": "12.500000"},
            ]
        },
    )
    assert response.status_code == 201, response.content
    assert list(Event.objects.filter(session=session).values_list("tokens", "cost")) == [
        (5, Decimal("0.3")),
        (0, Decimal("12.5")),
    ]


def test_it_refuses_a_number_for_a_date_time(api, project):
    _assert_invalid(api.get("/sessions", {"updated_before": "0.5"}), ["updated_before"])
    assert api.get("/sessions", {"updated_before": "2026-01-01T00:00:00-21:14"}).status_code == 200


def test_it_refuses_a_signal_name_with_a_trailing_newline(api, project):
    task = make_task(project)
    response = api.post(f"/tasks/{task.pk}/signals/review%0A", {})
    _assert_invalid(response, ["name"])
