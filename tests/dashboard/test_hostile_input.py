"""Hostile input on the dashboard: a NUL character (which PostgreSQL text refuses) in a filter
or a form gets the friendly 400 page and changes nothing (issue 8, defect 1). Django's form
fields already refuse it; these guard that every dashboard input keeps going through one."""

import logging

import pytest
from django.db import DataError, connection
from django.test import RequestFactory
from django.urls import reverse

from config.middleware import DashboardDomainErrorMiddleware
from sessions_app.models import Event, Session
from tests.factories import make_task


def test_a_nul_character_in_any_list_filter_gets_the_400_page(team):
    client = team.client("viewer")
    task = make_task(team.project)
    sessions = reverse("dashboard:session_list", args=[team.project.pk])
    for url, params in [
        (sessions, {"q": "a\x00b"}),
        (sessions, {"tag": "a\x00b"}),
        (sessions, {"cursor": "\x00"}),
        (f"/p/{team.project.pk}/tasks/", {"cursor": "\x00"}),
        (f"/p/{team.project.pk}/tasks/", {"workflow": "\x00"}),
        (f"/tasks/{task.pk}/", {"step": "dr\x00aft"}),
    ]:
        response = client.get(url, params)
        assert response.status_code == 400, (url, params)
        assert b"Switchboard" in response.content  # the page, not a bare error


def test_a_nul_character_in_a_reason_or_a_title_changes_nothing(team, session):
    client = team.client("operator")
    response = client.post(
        reverse("dashboard:session_pause", args=[session.pk]), {"reason": "why\x00"}
    )
    assert response.status_code == 400
    assert b"Check your input" in response.content
    response = client.post(
        reverse("dashboard:session_fork", args=[session.pk]), {"at_seq": 1, "title": "t\x00"}
    )
    assert response.status_code == 400
    session.refresh_from_db()
    assert session.status == "open"
    assert not Event.objects.filter(session=session, kind="lifecycle").exists()
    assert Session.objects.filter(project=team.project).count() == 1


def test_a_database_refusal_gets_the_400_page_without_its_sql(team, caplog):
    with pytest.raises(DataError) as refused, connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb", ['{"a": "\\u0000"}'])
    request = RequestFactory().get(f"/p/{team.project.pk}/sessions/")
    request.user = team.viewer
    middleware = DashboardDomainErrorMiddleware(lambda request: None)
    with caplog.at_level(logging.INFO, logger="config.middleware"):
        response = middleware.process_exception(request, refused.value)
    assert response is not None and response.status_code == 400
    assert b"Check your input" in response.content and b"cannot be stored" in response.content
    assert b"jsonb" not in response.content
    assert "jsonb" in caplog.text or "Unicode" in caplog.text
