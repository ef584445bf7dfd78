"""The sessions list's full-text search (`q`): both PostgreSQL strategies find the same sessions.

queries.sessions_matching_text collects the sessions of a rare term's events, or walks the
sessions in the list's order probing each (a long session's newest events first, then the
GIN index); which one is an estimate from the index's statistics. Whichever runs, the answer
is the same: the sessions of the project with an own event whose text matches.
"""

import pytest
from django.db import connection

from core.actors import Actor
from sessions_app import queries, storage
from sessions_app.queries import page_sessions, sessions_matching_text, text_search_strategy
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.sessions import fork_session
from tests.factories import make_session


def say(session, *texts):
    append_events(
        session,
        [EventDraft(kind="message", content={"text": t}) for t in texts],
        actor=Actor.system(),
    )


def filler(session, n):
    append_events(
        session, [EventDraft(kind="note", content={"i": i}) for i in range(n)], actor=Actor.system()
    )


def found(project, text, strategy):
    page, _ = page_sessions(
        sessions_matching_text(project, text, strategy=strategy), cursor=None, limit=200
    )
    return [s.title for s in page]


@pytest.fixture
def corpus(project, other_project):
    window = storage.SEARCH_WINDOW
    recent = make_session(project, title="long, match recent")
    filler(recent, window + 20)
    say(recent, "the zebra crossing")  # within the newest-events window
    old = make_session(project, title="long, match old")
    say(old, "an old zebra sighting")
    filler(old, window + 20)  # the match is beyond the window: found through the index
    small = make_session(project, title="small")
    say(small, "Zebra, capitalised, with punctuation!")
    make_session(project, title="no events")
    other = make_session(project, title="other words")
    say(other, "a crossing without the animal")
    fork = fork_session(recent, at_seq=1, actor=Actor.system(), title="fork")
    say(fork, "nothing here")  # the parent's prefix is the parent's: no match of its own
    theirs = make_session(other_project, title="other project")
    say(theirs, "zebra too")
    return project


@pytest.mark.parametrize("strategy", ["walk", "collect"])
@pytest.mark.parametrize(
    "text,expected",
    [
        ("zebra", ["small", "long, match old", "long, match recent"]),
        ("ZEBRA", ["small", "long, match old", "long, match recent"]),
        ("zebra crossing", ["long, match recent"]),
        ("crossing", ["other words", "long, match recent"]),
        ("giraffe", []),
        ("!!!", []),
    ],
)
def test_both_strategies_find_the_same_sessions(corpus, strategy, text, expected):
    assert found(corpus, text, strategy) == expected


def test_the_estimate_collects_without_statistics_and_for_rare_terms(project, monkeypatch):
    session = make_session(project)
    say(session, *(f"common word number {i}" for i in range(60)), "one rare aardvark")
    assert text_search_strategy("common") == "collect"  # never analysed: no statistics yet
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sessions_app_event")
    monkeypatch.setattr(queries, "SEARCH_COLLECT_MAX_EVENTS", 10)
    assert text_search_strategy("common") == "walk"
    assert text_search_strategy("common word") == "walk"
    assert text_search_strategy("aardvark") == "collect"  # not among the frequent lexemes
    assert text_search_strategy("common aardvark") == "collect"
    assert text_search_strategy("!!!") == "collect"
    monkeypatch.setattr(queries, "SEARCH_COLLECT_MAX_EVENTS", 1000)
    assert text_search_strategy("common") == "collect"  # ~60 matches: few enough to collect
    assert found(project, "common", None) == found(project, "common", "walk") == [session.title]


@pytest.mark.parametrize("strategy", ["walk", "collect"])
def test_text_and_task_filters_combine(corpus, strategy, monkeypatch):
    from sessions_app.models import Session
    from switchboard.sessions.queries import SessionListFilters, session_rows
    from tests.factories import make_task

    linked = Session.objects.get(project=corpus, title="long, match old")
    make_task(corpus, session_ids=[linked.pk])
    monkeypatch.setattr(queries, "text_search_strategy", lambda text: strategy)

    def titles(**filters):
        page, _ = page_sessions(
            session_rows(corpus, SessionListFilters(q="zebra", **filters)), cursor=None, limit=200
        )
        return [s.title for s in page]

    assert titles(has_task=True) == ["long, match old"]
    assert titles(has_task=False) == ["small", "long, match recent"]
