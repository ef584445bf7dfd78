"""A fork made in the dashboard has no external_id; its page names it as the framework adapters
open it (`switchboard:<session id>`), so an operator can hand it to a LangGraph, OpenAI Agents
or ADK run that continues from the fork point (issue 25 §2)."""

import re

from django.urls import reverse

from sessions_app.models import Session


def hint(html: str) -> str:
    found = re.search(r'<p id="framework-hint".*?</p>', html, re.S)
    return found.group(0) if found else ""


def test_the_forks_page_names_it_for_the_frameworks(team, session):
    operator = team.client("operator")
    forked = operator.post(reverse("dashboard:session_fork", args=[session.pk]), {"at_seq": 3})
    fork = Session.objects.get(parent=session)
    assert fork.external_id is None
    page = operator.get(forked["Location"]).content.decode()
    said = hint(page)
    assert f'<code class="framework-id">switchboard:{fork.pk}</code>' in said
    assert 'from seq <span class="mono">3</span>' in said
    assert "thread_id" in said and "session_id" in said
    # A viewer reads it too (it changes nothing); the parent, no fork, has none.
    assert f"switchboard:{fork.pk}" in hint(
        team.client("viewer").get(forked["Location"]).content.decode()
    )
    parent = operator.get(reverse("dashboard:session_detail", args=[session.pk])).content.decode()
    assert hint(parent) == ""
