"""Search snippets: the words around a match in an event's text, the searched words flagged.

Done here rather than by PostgreSQL's ts_headline, which parses the whole text again for each
row and cost more than the rest of the sessions list's page (bench/dashboard.py: about 0.4 ms
a row under load, a common word's page 20 ms slower). The search itself stays PostgreSQL's:
this only marks, in the text of an event that matched, the words the search was made of. With
the 'simple' configuration a word matches when it is the same word, lowercased.

The pieces are plain text; the template escapes each one and wraps the matches in <mark>, so
no text of an event is ever taken as markup.
"""

import re
from dataclasses import dataclass

# Words as PostgreSQL's default parser splits them: runs of letters and digits (an underscore,
# like any other punctuation, separates). Whole tags are no words of a query ("<b>x</b>": x).
WORD = re.compile(r"[^\W_]+")
TAG = re.compile(r"</?[A-Za-z][^<>]*>")
# Words shown before the first match, and in all.
WORDS_BEFORE = 8
WORDS_SHOWN = 24
ELLIPSIS = "…"


@dataclass(frozen=True)
class SnippetPart:
    text: str
    match: bool  # one of the searched words, to highlight


def query_words(query: str) -> frozenset[str]:
    """The words a search for `query` looks for, lowercased."""
    return frozenset(word.lower() for word in WORD.findall(TAG.sub(" ", query)))


def snippet_parts(text: str | None, query: str) -> list[SnippetPart]:
    """About WORDS_SHOWN words of `text` from a little before the first searched word, as
    pieces (whitespace collapsed, "…" where the text was cut); [] for no text."""
    if not text:
        return []
    words = query_words(query)
    spans = list(WORD.finditer(text))
    if not spans:
        return [SnippetPart(_squeeze(text[:200]), False)]
    first = next((i for i, m in enumerate(spans) if m.group().lower() in words), 0)
    start_word = max(0, first - WORDS_BEFORE)
    end_word = min(len(spans), start_word + WORDS_SHOWN)
    start = spans[start_word].start() if start_word else 0
    end = spans[end_word - 1].end() if end_word < len(spans) else len(text)
    parts: list[SnippetPart] = []
    if start:
        parts.append(SnippetPart(ELLIPSIS + " ", False))
    position = start
    for m in spans[start_word:end_word]:
        if m.group().lower() in words:
            if m.start() > position:
                parts.append(SnippetPart(_squeeze(text[position : m.start()]), False))
            parts.append(SnippetPart(m.group(), True))
            position = m.end()
    if end > position:
        parts.append(SnippetPart(_squeeze(text[position:end]), False))
    if end < len(text):
        parts.append(SnippetPart(" " + ELLIPSIS, False))
    return _merged(parts)


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _merged(parts: list[SnippetPart]) -> list[SnippetPart]:
    """Adjacent plain pieces joined, so the template writes one text node for each."""
    merged: list[SnippetPart] = []
    for part in parts:
        if merged and not part.match and not merged[-1].match:
            merged[-1] = SnippetPart(merged[-1].text + part.text, False)
        else:
            merged.append(part)
    return merged
