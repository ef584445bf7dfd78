"""Template helpers of the sessions list's cells. They return plain values; the template turns
them into markup, autoescaped. Nothing here is marked safe."""

from typing import Any

from django import template

from sessions_app.snippets import SnippetPart, snippet_parts
from switchboard.sessions.context import BudgetUse, budget_use

register = template.Library()


@register.filter
def session_budget(session: Any) -> BudgetUse | None:
    """{% with use=item|session_budget %}: the budget cell of a row (None: no budget)."""
    return budget_use(session)


@register.filter
def search_snippet(session: Any) -> list[SnippetPart]:
    """A row's search snippet as pieces, the searched words flagged `match` ([] when the
    list is not searched)."""
    text = getattr(session, "search_text", None)
    return snippet_parts(text, session.search_query) if text else []
