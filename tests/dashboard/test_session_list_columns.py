"""The sessions list's budget and task columns and its search snippets (issue 13: what
operators asked for): the query that feeds them and the cells they render."""

from decimal import Decimal

from django.urls import reverse

from core.actors import Actor
from sessions_app.snippets import SnippetPart, query_words, snippet_parts
from sessions_app.storage import SEARCH_WINDOW
from switchboard.sessions.context import budget_use
from switchboard.sessions.queries import SessionListFilters, session_rows
from tasks_app.services.transitions import transition_task
from tests.factories import make_session, make_task

from .conftest import append, message

OPS = Actor.system("tests")


def get(team, **params):
    url = reverse("dashboard:session_list", args=[team.project.pk])
    return team.client("viewer").get(url, params)


def row_of(page: str, session) -> str:
    return page.split(f'id="session-row-{session.pk}"', 1)[1].split("</tr>", 1)[0]


def budget_cell(row: str) -> str:
    return row.split('<td class="budget-cell">', 1)[1].split("</td>", 1)[0]


# --- Budget -----------------------------------------------------------------------------------


def test_budget_use_picks_the_limit_nearest_its_end_and_says_every_limit(team):
    session = make_session(team.project, budget_max_tokens=1000, budget_max_cost=Decimal("2"))
    session.tokens_used, session.cost_used = 500, Decimal("1.7")
    use = budget_use(session)
    assert use is not None
    assert (use.percent, use.used_percent, use.level) == (85, 85, "near")
    assert use.description == "Tokens: 500 of 1,000; Cost: 1.70 of 2.00"
    session.tokens_used = 1200
    use = budget_use(session)
    assert (use.percent, use.used_percent, use.level) == (100, 120, "over")
    assert "Tokens: 1,200 of 1,000 (exceeded)" in use.description
    assert budget_use(make_session(team.project)) is None


def test_the_budget_column_shows_a_bar_amber_near_the_limit_red_past_it_empty_without(team):
    plain = make_session(team.project, title="No budget")
    calm = make_session(team.project, title="Calm", budget_max_tokens=1000)
    append(calm, message("hello", tokens=300))
    near = make_session(team.project, title="Near", budget_max_tokens=1000)
    append(near, message("hello", tokens=850))
    over = make_session(team.project, title="Over", budget_max_tokens=1000)
    append(over, message("hello", tokens=1500))
    page = get(team).content.decode()

    assert '<th scope="col">Budget</th>' in page
    cell = budget_cell(row_of(page, plain))
    assert "budget-bar" not in cell and 'title="No budget"' in cell
    cell = budget_cell(row_of(page, calm))
    assert '<div class="budget-use" title="Tokens: 300 of 1,000">' in cell
    assert '<div class="budget-bar" role="meter"' in cell and 'class="pct-30"' in cell
    assert ">30%</span>" in cell
    cell = budget_cell(row_of(page, near))
    assert 'class="budget-bar near"' in cell and 'class="pct-85"' in cell
    cell = budget_cell(row_of(page, over))
    assert 'class="budget-bar over"' in cell and 'class="pct-100"' in cell
    assert "150% · exceeded" in cell and 'aria-valuetext="150% used, exceeded"' in cell


# --- Task state ---------------------------------------------------------------------------------


def test_the_task_column_shows_the_first_tasks_readable_state_and_how_many_more(team):
    several = make_session(team.project, title="Several tasks")
    one = make_session(team.project, title="One task")
    first = make_task(team.project, session_ids=[str(several.pk)])
    make_task(team.project, workflow="research_report", session_ids=[str(several.pk)])
    make_task(team.project, workflow="research_report", session_ids=[str(one.pk)])
    transition_task(first, transition="submit", actor=OPS)

    rows = {
        s.title: s.first_task
        for s in session_rows(team.project, SessionListFilters()).order_by("title")
    }
    assert rows["Several tasks"] == {"id": str(first.pk), "state": "sent_for_review", "links": 2}
    assert rows["One task"]["state"] == "researching" and rows["One task"]["links"] == 1

    page = get(team).content.decode()
    cell = row_of(page, several).split('<td class="task-cell">', 1)[1].split("</td>", 1)[0]
    assert f'href="/tasks/{first.pk}/"' in cell
    assert ">sent for review</a>" in cell and "sent_for_review<" not in cell
    assert '<span class="muted small" title="2 linked tasks">+1</span>' in cell
    cell = row_of(page, one).split('<td class="task-cell">', 1)[1].split("</td>", 1)[0]
    assert ">researching</a>" in cell and "+" not in cell


def test_the_columns_add_no_query(team, django_assert_max_num_queries):
    for i in range(20):
        session = make_session(team.project, budget_max_tokens=100 + i)
        append(session, message("refund please", tokens=i))
        make_task(team.project, session_ids=[str(session.pk)])
    client = team.client("viewer")
    url = reverse("dashboard:session_list", args=[team.project.pk])
    client.get(url)
    # As test_it_keeps_the_list_cheap (8, the legal holds' look-up included), plus the search's
    # term statistics (1): the columns and the snippets ride in the page's one query.
    with django_assert_max_num_queries(9):
        response = client.get(url, {"q": "refund", "sort": "-updated"})
    assert response.content.decode().count("<mark>refund</mark>") == 20


# --- Search snippets ----------------------------------------------------------------------------


def test_a_search_shows_each_rows_matching_text_with_the_words_marked(team):
    refund = make_session(team.project, title="Refund")
    append(
        refund,
        message("Hello there."),
        message("Where is my refund? It has been two weeks since I sent the parcel back."),
        message("Thanks, bye."),
    )
    other = make_session(team.project, title="Other")
    append(other, message("Nothing to see."))
    page = get(team, q="refund").content.decode()
    row = row_of(page, refund)
    assert '<p class="search-snippet" title="Matching text">' in row
    assert "Where is my <mark>refund</mark>? It has been two weeks" in row
    assert "Hello there" not in row  # the matching event, not the first one
    # Without a search, no snippet.
    assert "search-snippet" not in get(team).content.decode()


def test_a_long_sessions_snippet_comes_from_its_newest_match_or_from_an_older_one(team):
    """Past SEARCH_WINDOW events a session reads its newest window first, then the index."""
    recent = make_session(team.project, title="Recent match")
    old = make_session(team.project, title="Old match")
    append(old, message("The first refund request."))
    fillers = [message(f"filler line {n}") for n in range(SEARCH_WINDOW + 5)]
    append(recent, message("An old refund mention."), *fillers, message("A new refund mention."))
    append(old, *fillers)
    rows = {
        s.title: s.search_text for s in session_rows(team.project, SessionListFilters(q="refund"))
    }
    assert rows == {
        "Recent match": "A new refund mention.",
        "Old match": "The first refund request.",
    }


def test_a_snippet_escapes_the_events_text_and_marks_only_matches(team):
    hostile = make_session(team.project, title="Hostile")
    # PostgreSQL's parser drops whole tags (<b>…</b>) from a headline, but not markup it does
    # not take for a tag: that reaches the snippet as typed, and must arrive as text.
    append(hostile, message('Try <img src=x onerror=alert(1)// then refund "now" & <b>more</b>'))
    page = get(team, q="<b>refund</b>").content.decode()
    row = row_of(page, hostile)
    snippet = row.split('<p class="search-snippet"', 1)[1].split("</p>", 1)[0]
    assert "<img" not in snippet and "<b>" not in snippet
    assert "Try &lt;img src=x onerror=alert(1)// then <mark>refund</mark>" in snippet
    assert "&quot;now&quot; &amp;" in snippet
    assert snippet.count("<mark>") == 1
    # The query itself, as typed, is escaped in the search box.
    assert 'value="&lt;b&gt;refund&lt;/b&gt;"' in page


def test_snippet_parts_mark_the_searched_words_around_the_first_match():
    text = (
        "One two three four five six seven eight nine ten eleven twelve: my Refund, "
        "the refund_id and refunds. Then words thirteen fourteen fifteen sixteen seventeen "
        "eighteen nineteen twenty and more words after the end of the snippet."
    )
    parts = snippet_parts(text, "REFUND")
    assert parts[0] == SnippetPart("… six seven eight nine ten eleven twelve: my ", False)
    assert parts[1] == SnippetPart("Refund", True)  # the word as written, matched lowercased
    assert parts[2] == SnippetPart(", the ", False)
    assert parts[3] == SnippetPart("refund", True)  # "_" separates words, as in PostgreSQL
    assert [p.text for p in parts if p.match] == ["Refund", "refund"]  # not "refunds"
    assert parts[-1].text.endswith(" …") and "snippet" not in "".join(p.text for p in parts)


def test_snippet_parts_keep_a_short_text_whole_and_collapse_whitespace():
    assert snippet_parts("Where is\n\n my refund?", "refund") == [
        SnippetPart("Where is my ", False),
        SnippetPart("refund", True),
        SnippetPart("?", False),
    ]
    assert snippet_parts(None, "refund") == [] and snippet_parts("", "x") == []
    # No searched word in the text (a match PostgreSQL found through another form): the start.
    assert snippet_parts("Nothing marked here.", "refund") == [
        SnippetPart("Nothing marked here.", False)
    ]


def test_query_words_are_the_words_of_the_query_without_tags():
    assert query_words("<b>Refund</b> two-week, order_id") == {
        "refund",
        "two",
        "week",
        "order",
        "id",
    }
