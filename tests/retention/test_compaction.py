"""Compaction (invariant 6) and honest reads after it.

Random histories (hypothesis, the strategies of invariant 5's test): appends of every kind,
forks and forks of forks, agent snapshots, a random snapshot interval; then some sessions are
closed and every closed one compacted, in random order. For every session, after compaction:
the state hash at head is the one before (and the state and facts equal a naive fold of the
original log); no durable event is lost or changed; every fact is still there; slices list the
compacted ranges they meet and return exactly the surviving events; the state strictly inside a
compacted range is 410 `compacted`, at a range's end it is the naive fold; and forks read their
whole history as before wherever it was not compacted.
"""

from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retention_app.models import Compaction
from retention_app.services.compaction import compact_session
from sessions_app.compaction import compacted_ranges
from sessions_app.models import Event, Session, SessionStatus
from sessions_app.services.state import state_at
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_project, make_session
from tests.retention.helpers import SYSTEM, append, closed, conversation
from tests.sessions_app.naive import fold, visible_events
from tests.sessions_app.test_state import OPERATIONS


def _durable(session: Session) -> list[tuple]:
    return [
        (e.seq, e.kind, e.content)
        for e in Event.objects.filter(session=session, tier="durable").order_by("seq")
    ]


def _slice(api: ApiClient, session: Session) -> tuple[list[tuple], list[dict]]:
    rows, compacted, after = [], [], 0
    while True:
        body = api.get(f"/sessions/{session.pk}/events", {"after_seq": after, "limit": 1000})
        assert body.status_code == 200, body.content
        data = body.json()
        rows += [(e["seq"], e["kind"], e["content"]) for e in data["events"]]
        compacted += [c for c in data["compacted"] if c not in compacted]
        if not data["has_more"]:
            return rows, compacted
        after = rows[-1][0]


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    every=st.integers(1, 6),
    operations=st.lists(OPERATIONS, min_size=1, max_size=10),
    close=st.lists(st.booleans(), min_size=12, max_size=12),
    order=st.randoms(use_true_random=False),
)
def test_compaction_keeps_the_state_at_head_and_every_durable_event(
    transactional_db, every, operations, close, order
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

        for session, shut in zip(sessions, close, strict=False):
            if shut:
                closed(session)
        before = {}
        for session in sessions:
            session.refresh_from_db()
            events = visible_events(session)
            before[session.pk] = {
                "events": [(e.seq, e.kind, e.tier, e.content) for e in events],
                "hash": state_at(session).state_hash,
                "durable": _durable(session),
                "head": session.head_seq,
            }
        to_compact = [s for s in sessions if s.status == SessionStatus.CLOSED]
        order.shuffle(to_compact)
        for session in to_compact:
            done = compact_session(session, actor=SYSTEM)
            if done.compaction is not None:
                assert done.compaction.state_hash_before == done.compaction.state_hash_after

        for session in sessions:
            session.refresh_from_db()
            was = before[session.pk]
            events = [{"seq": s, "kind": k, "content": c} for s, k, _, c in was["events"]]
            head = state_at(session)
            # Invariant 6: same state hash at head; state and facts as the naive fold.
            assert head.state_hash == was["hash"]
            assert (head.state, head.facts) == fold(events, was["head"])
            # No durable event lost or changed; a fact is a durable event.
            assert _durable(session) == was["durable"]
            ranges = compacted_ranges(session)
            gone = {seq for r in ranges for seq in range(r.after_seq + 1, r.through_seq + 1)}
            expected = [
                (s, k, c) for s, k, t, c in was["events"] if t == "durable" or s not in gone
            ]
            rows, listed = _slice(api, session)
            assert rows == expected
            assert [(c["after_seq"], c["through_seq"]) for c in listed] == [
                (r.after_seq, r.through_seq) for r in ranges
            ]
            for p in range(was["head"] + 1):
                inside = any(r.covers(p) for r in ranges)
                answer = api.get(f"/sessions/{session.pk}/state", {"at_seq": p})
                if inside:
                    assert answer.status_code == 410, (p, answer.content)
                    assert answer.json()["error"]["code"] == "compacted"
                else:
                    assert answer.status_code == 200, (p, answer.content)
                    body = answer.json()
                    assert (body["state"], body["facts"]) == fold(events, p), p


def test_a_compaction_is_recorded_with_its_counts_summary_and_hashes(db, project):
    session = make_session(project)
    append(session, conversation(70))
    closed(session)
    transient = Event.objects.filter(session=session, tier="transient").count()
    done = compact_session(session, actor=SYSTEM)
    compaction = Compaction.objects.get()
    assert compaction.boundary_seq == session.head_seq
    assert compaction.events_removed == transient == done.events_removed
    assert compaction.bytes_removed > 0
    assert "compacted" in compaction.summary and "hello 0" in compaction.summary
    assert compaction.state_hash_before == compaction.state_hash_after
    session.refresh_from_db()
    assert (session.compacted_through_seq, session.compaction_id) == (
        session.head_seq,
        compaction.id,
    )
    assert Event.objects.filter(session=session, tier="transient").count() == 0
    # Idempotent: compacting again changes nothing.
    assert compact_session(session, actor=SYSTEM).compaction is None
    assert Compaction.objects.count() == 1


def test_a_slice_over_a_compacted_range_says_so(db, project, api):
    session = make_session(project)
    append(session, conversation(30))
    closed(session)
    compact_session(session, actor=SYSTEM)
    session.refresh_from_db()
    body = api.get(f"/sessions/{session.pk}/events", {"after_seq": 0, "limit": 5}).json()
    (compacted,) = body["compacted"]
    assert compacted["after_seq"] == 0
    assert compacted["through_seq"] == session.head_seq
    assert compacted["compaction_id"] == str(Compaction.objects.get().id)
    assert compacted["summary"].startswith("Seqs 1–")
    assert {e["kind"] for e in body["events"]} <= {"fact", "decision", "lifecycle"}


def test_state_inside_a_compacted_range_is_410_and_at_its_end_the_snapshot(db, project, api):
    session = make_session(project)
    append(session, conversation(30))
    closed(session)
    compact_session(session, actor=SYSTEM)
    session.refresh_from_db()
    inside = api.get(f"/sessions/{session.pk}/state", {"at_seq": 5})
    assert inside.status_code == 410
    error = inside.json()["error"]
    assert error["code"] == "compacted"
    assert error["detail"]["through_seq"] == session.head_seq
    at_end = api.get(f"/sessions/{session.pk}/state", {"at_seq": session.head_seq}).json()
    assert at_end["summary"].startswith("Seqs 1–")
    assert api.get(f"/sessions/{session.pk}/state", {"at_seq": 0}).status_code == 200


def test_compaction_stops_at_the_lowest_fork_point_and_forks_keep_working(db, project, api):
    parent = make_session(project)
    append(parent, conversation(40))
    fork = Session.objects.get(
        pk=api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 25}).json()["id"]
    )
    append(fork, conversation(5, seed=3))
    before = [(e.seq, e.kind, e.content) for e in visible_events(fork)]
    closed(parent)
    done = compact_session(parent, actor=SYSTEM)
    assert done.compaction.boundary_seq == 25
    parent.refresh_from_db()
    assert parent.compacted_through_seq == 25
    # The parent's transient events after the fork point stay.
    assert Event.objects.filter(session=parent, seq__gt=25, tier="transient").exists()
    # The fork: its state at head is unchanged, seqs after the fork point all there, and the
    # slice says the inherited range up to 25 was compacted.
    rows, listed = _slice(api, fork)
    assert [(c["session_id"], c["through_seq"]) for c in listed] == [(str(parent.pk), 25)]
    assert [r for r in rows if r[0] > 25] == [b for b in before if b[0] > 25]
    events = [{"seq": s, "kind": k, "content": c} for s, k, c in before]
    assert (state_at(fork).state, state_at(fork).facts) == fold(events, fork.head_seq)
    # A new fork inside the compacted range is refused (its state there cannot be folded);
    # at the range's end it works.
    refused = api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 10})
    assert refused.status_code == 410
    assert refused.json()["error"]["code"] == "compacted"
    assert api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 25}).status_code == 201


def test_the_summariser_is_pluggable_by_dotted_path(db, project, settings):
    settings.SWITCHBOARD_SUMMARISER = "tests.retention.summariser.shout"
    session = make_session(project)
    append(session, conversation(10))
    closed(session)
    done = compact_session(session, actor=SYSTEM)
    assert done.compaction.summary == "8 TRANSIENT EVENTS"
    assert done.compaction.summariser == "tests.retention.summariser.shout"


def test_the_compaction_mark_grows_with_each_compaction_of_the_history_read_past_it(
    db, project, api
):
    parent = make_session(project)
    append(parent, conversation(40))
    fork = Session.objects.get(
        pk=api.post(f"/sessions/{parent.pk}/fork", {"at_seq": 25}).json()["id"]
    )
    append(fork, conversation(5, seed=3))
    fork.refresh_from_db()

    def mark_after_head(session):
        # A read past every event (what a reader keeping the rest asks): no range met.
        session.refresh_from_db()
        body = api.get(f"/sessions/{session.pk}/events", {"after_seq": session.head_seq}).json()
        assert body["events"] == [] and body["compacted"] == []
        return body["compaction_mark"]

    assert (mark_after_head(parent), mark_after_head(fork)) == (0, 0)
    closed(parent)
    compact_session(parent, actor=SYSTEM)  # stops at the fork point, 25
    # The parent's history lost positions 1..25, and so did the fork's (it inherits them).
    assert (mark_after_head(parent), mark_after_head(fork)) == (25, 25)
    closed(fork)
    compact_session(fork, actor=SYSTEM)
    fork.refresh_from_db()
    assert fork.compacted_through_seq > 25
    # Its own range (25, through] on top of the inherited one.
    assert mark_after_head(fork) == 25 + (fork.compacted_through_seq - 25)
    assert mark_after_head(parent) == 25
