"""Invariant 5: state at seq p (nearest snapshot + events after it) = a naive fold of the log.

Random histories (hypothesis): merge patches with nulls and nesting, facts, other events, agent
snapshots, a random auto-snapshot interval, forks and forks of forks. Every example uses a fresh
project and commits for real (`transactional_db`), so auto-snapshots run on commit as in
production.
"""

from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.actors import Actor
from sessions_app.models import Session, Snapshot
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.snapshots import drain
from sessions_app.services.state import FoldedState, state_at
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_project, make_session
from tests.sessions_app.naive import fold, visible_events

KEYS = st.sampled_from(["a", "b", "c", "d"])
LEAVES = st.none() | st.booleans() | st.integers(-50, 50) | st.text("xyzé ", max_size=4)
# Patch values: null deletes, objects merge (and may hold nulls themselves), lists replace.
PATCH_VALUES = st.recursive(
    LEAVES,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=3),
    max_leaves=8,
)
EVENTS = st.one_of(
    st.builds(
        lambda p: {"kind": "state", "content": p}, st.dictionaries(KEYS, PATCH_VALUES, max_size=4)
    ),
    st.builds(
        lambda k, v: {"kind": "fact", "content": {"key": k, "value": v}},
        st.sampled_from(["x", "y", "z"]),
        PATCH_VALUES,
    ),
    st.just({"kind": "note", "content": {"ignored": True}}),
    st.builds(
        lambda t: {"kind": "message", "role": "user", "content": {"text": t}},
        st.text("ab ", max_size=5),
    ),
)
OPERATIONS = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 20), st.lists(EVENTS, min_size=1, max_size=6)),
    st.tuples(st.just("fork"), st.integers(0, 20), st.floats(0, 1)),
    st.tuples(st.just("snapshot"), st.integers(0, 20)),
)


def _check_session(api: ApiClient, session: Session, every: int) -> None:
    assert drain()  # automatic snapshots are taken by this process's background thread
    session.refresh_from_db()
    events = visible_events(session)
    assert [e.seq for e in events] == list(range(1, session.head_seq + 1))

    # The API's slice (ancestry-based) is the same history as the parent walk.
    body = api.get(f"/sessions/{session.pk}/events", {"limit": 1000}).json()
    assert [(e["seq"], e["kind"], e["content"]) for e in body["events"]] == [
        (e.seq, e.kind, e.content) for e in events
    ]

    # Snapshots exist at every interval boundary of the session's own segment, and every
    # stored snapshot holds the naive fold at its seq.
    snapshots = list(Snapshot.objects.filter(session=session))
    own_from = session.fork_seq or 0
    boundaries = {s for s in range(every, session.head_seq + 1, every) if s > own_from}
    # (Of any reason: taken in the background, an automatic one can find the agent's own
    # snapshot at that seq already there, and leaves it: the fold is bounded all the same.)
    assert boundaries <= {s.seq for s in snapshots}
    for snapshot in snapshots:
        assert (snapshot.state, snapshot.facts) == fold(events, snapshot.seq), snapshot.seq

    for p in range(session.head_seq + 1):
        folded = state_at(session, p)
        assert (folded.seq, folded.state, folded.facts) == (p, *fold(events, p)), p
    at_head = api.get(f"/sessions/{session.pk}/state").json()
    assert (at_head["seq"], at_head["state"], at_head["facts"]) == (
        session.head_seq,
        *fold(events, session.head_seq),
    )


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(every=st.integers(1, 5), operations=st.lists(OPERATIONS, min_size=1, max_size=10))
def test_it_answers_state_at_any_seq_like_a_naive_fold_of_the_log(
    transactional_db, every, operations
):
    with override_settings(SWITCHBOARD_SNAPSHOT_EVERY=every):
        project = make_project()
        api = ApiClient(make_api_key(project)[1])
        sessions = [make_session(project)]
        for operation in operations:
            session = sessions[operation[1] % len(sessions)]
            session.refresh_from_db()
            if operation[0] == "append":
                response = api.post(f"/sessions/{session.pk}/events", {"events": operation[2]})
                assert response.status_code == 201, response.content
            elif operation[0] == "fork":
                at_seq = round(operation[2] * session.head_seq)
                response = api.post(f"/sessions/{session.pk}/fork", {"at_seq": at_seq})
                assert response.status_code == 201, response.content
                sessions.append(Session.objects.get(pk=response.json()["id"]))
            else:
                assert api.post(f"/sessions/{session.pk}/snapshots").status_code == 201
        for session in sessions:
            _check_session(api, session, every)


def test_it_folds_at_most_one_interval_of_events_whatever_the_log_length(
    db, project, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.SWITCHBOARD_SNAPSHOT_EVERY = 50
    # Inside the test's transaction: the background thread's connection would not see the rows.
    settings.SWITCHBOARD_SNAPSHOT_IN_BACKGROUND = False
    session = make_session(project)
    for batch in range(8):
        # Batches larger than the interval; the after-commit hooks run as on a real commit.
        with django_capture_on_commit_callbacks(execute=True):
            append_events(
                session,
                [
                    EventDraft(kind="state", content={"n": batch * 250 + i, f"k{i % 7}": i})
                    for i in range(250)
                ],
                actor=Actor.system(),
            )
    session.refresh_from_db()
    applied: list[int] = []
    original = FoldedState.apply

    def counting_apply(self, seq, kind, content):
        applied.append(seq)
        return original(self, seq, kind, content)

    monkeypatch.setattr(FoldedState, "apply", counting_apply)
    events = visible_events(session)
    for p in (1, 49, 50, 51, 99, 101, 999, 1000, 1777, 1999, 2000):
        applied.clear()
        assert (state_at(session, p).state, {}) == fold(events, p)
        assert len(applied) < 50, (p, len(applied))


def test_it_applies_merge_patches_with_nulls_and_nesting(api, project):
    session = make_session(project)
    patches = [
        {"a": {"b": 1, "c": [1, 2]}, "d": "x"},
        {"a": {"b": None, "e": {"f": None}}, "d": None},
        {"a": {"c": None}, "g": [None, {"h": None}]},
    ]
    api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [{"kind": "state", "content": p} for p in patches]
            + [{"kind": "fact", "content": {"key": "k", "value": None}}]
        },
    )
    body = api.get(f"/sessions/{session.pk}/state").json()
    assert body["state"] == {"a": {"e": {}}, "g": [None, {"h": None}]}
    assert body["facts"] == {"k": {"value": None, "seq": 4}}
    assert api.get(f"/sessions/{session.pk}/state", {"at_seq": 1}).json()["state"] == patches[0]
    assert api.get(f"/sessions/{session.pk}/state", {"at_seq": 0}).json()["state"] == {}
    too_far = api.get(f"/sessions/{session.pk}/state", {"at_seq": 5})
    assert too_far.status_code == 422
    assert too_far.json()["error"]["code"] == "invalid_input"
