"""The default summary made by PostgreSQL while it deletes a range (storage.
delete_transient_events_digest) says exactly what the Python summariser says of the same
events (summarisers.deterministic_summary over storage.transient_events), for random ranges
of every kind of transient event: messages with and without text and role, tool calls whose
name is a string, a number, a boolean, null, an object or missing, errors, notes, states."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retention_app import storage
from retention_app.summarisers import deterministic_summary, summary_of_digest
from sessions_app.models import Event
from sessions_app.retention import allow_event_deletion
from sessions_app.services.events import EventDraft
from tests.factories import make_project, make_session
from tests.retention.helpers import append

MISSING = object()
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=200)
NAMES = st.one_of(
    st.sampled_from(["lookup", "Zeta", "alpha", "émoji", "a b"]),
    TEXT,
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 3), max_size=2),
    st.just(MISSING),
)


def _draft(kind: str, text: str, role: str, name) -> EventDraft:  # type: ignore[no-untyped-def]
    if kind == "message":
        return EventDraft(kind="message", role=role, content={"text": text})
    if kind == "tool_call":
        content = {"arguments": {}} if name is MISSING else {"name": name, "arguments": {}}
        return EventDraft(kind="tool_call", content=content)
    if kind == "error":
        return EventDraft(kind="error", content={"message": text or "boom"})
    if kind == "state":
        return EventDraft(kind="state", content={"k": len(text)})
    if kind == "fact":
        return EventDraft(kind="fact", content={"key": "f", "value": text})
    return EventDraft(kind="note", content={"text": text})


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["message", "message", "tool_call", "error", "state", "fact", "note"]),
        st.one_of(st.just(""), TEXT),
        st.sampled_from(["user", "assistant", ""]),
        NAMES,
    ),
    min_size=0,
    max_size=25,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(events=EVENTS, previous=st.sampled_from(["", "Earlier: 3 messages."]), cut=st.floats(0, 1))
def test_the_digest_postgres_makes_says_what_the_python_summariser_says(db, events, previous, cut):
    session = make_session(make_project())
    if events:
        append(session, [_draft(*e) for e in events])
    after = round(cut * session.head_seq / 2)
    through = session.head_seq
    rows = storage.transient_events(session.pk, after, through)
    expected = deterministic_summary(previous, rows)
    with allow_event_deletion():
        count, size, digest = storage.delete_transient_events_digest(session.pk, after, through)
    assert summary_of_digest(previous, digest) == expected
    assert count == len(rows)
    assert (size > 0) == (count > 0)
    left = Event.objects.filter(session=session, seq__gt=after, seq__lte=through)
    assert not left.filter(tier="transient").exists()
