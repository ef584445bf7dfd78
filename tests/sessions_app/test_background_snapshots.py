"""Automatic snapshots taken by the appending process's background thread, committed for real.

The append answers without waiting for the snapshot; the snapshot then holds the fold; state
answers the same before and after it is taken (it folds from the previous one meanwhile); a
full backlog makes the request take its own; a failing snapshot leaves the append committed.
"""

import threading
import time

import pytest

from sessions_app.models import Snapshot
from sessions_app.services import snapshots, state
from sessions_app.services.state import state_at
from tests.factories import make_session
from tests.sessions_app.naive import fold, visible_events


@pytest.fixture
def session(transactional_db, project, settings):
    settings.SWITCHBOARD_SNAPSHOT_EVERY = 10
    settings.SWITCHBOARD_SNAPSHOT_IN_BACKGROUND = True
    return make_session(project)


@pytest.fixture
def held(monkeypatch):
    """Snapshots wait for `held.set()`, in whichever thread takes them: which one it was."""
    gate = threading.Event()
    takers: list[str] = []
    original = state.ensure_snapshots

    def gated(session_id, seqs):
        takers.append(threading.current_thread().name)
        assert gate.wait(30)
        original(session_id, seqs)

    monkeypatch.setattr(snapshots, "ensure_snapshots", gated)
    gate.takers = takers  # type: ignore[attr-defined]
    yield gate
    gate.set()


def _batch(n: int, start: int = 0) -> dict:
    return {"events": [{"kind": "state", "content": {"n": start + i}} for i in range(n)]}


def test_the_append_answers_before_its_snapshot_is_taken(api, session, held):
    response = api.post(f"/sessions/{session.pk}/events", _batch(25))
    assert response.status_code == 201 and response.json()["head_seq"] == 25
    # Answered while the background thread still waits to take the snapshots at 10 and 20.
    assert not Snapshot.objects.filter(session=session).exists()
    session.refresh_from_db()
    events = visible_events(session)
    # Meanwhile state folds from the start: the same answer, only a longer fold.
    for p in (9, 10, 20, 25):
        assert (state_at(session, p).state, {}) == fold(events, p)
    held.set()
    assert snapshots.drain()
    assert held.takers == ["switchboard-snapshots"]
    assert list(
        Snapshot.objects.filter(session=session).order_by("seq").values_list("seq", "state")
    ) == [(10, {"n": 9}), (20, {"n": 19})]
    for p in (9, 10, 20, 25):
        assert (state_at(session, p).state, {}) == fold(events, p)


def test_a_full_backlog_makes_the_request_take_its_own_snapshot(api, session, held, settings):
    settings.SWITCHBOARD_SNAPSHOT_BACKLOG = 1
    assert api.post(f"/sessions/{session.pk}/events", _batch(10)).status_code == 201
    # One job waits in the background (at the gate: the order of the takers below does not
    # depend on which thread a loaded machine runs first); the next boundary is taken inside
    # the request, which therefore waits for the gate too: release it from another thread.
    deadline = time.monotonic() + 30
    while not held.takers:
        assert time.monotonic() < deadline, "the background thread never took its job"
        time.sleep(0.01)
    threading.Timer(0.5, held.set).start()
    assert api.post(f"/sessions/{session.pk}/events", _batch(10, 10)).status_code == 201
    assert snapshots.drain()
    assert held.takers == ["switchboard-snapshots", threading.current_thread().name]
    assert sorted(Snapshot.objects.filter(session=session).values_list("seq", flat=True)) == [
        10,
        20,
    ]


def test_a_failing_snapshot_leaves_the_append_committed_and_the_thread_working(
    api, session, monkeypatch, caplog
):
    original = state.ensure_snapshots
    calls = []

    def failing_once(session_id, seqs):
        calls.append(seqs)
        if len(calls) == 1:
            raise RuntimeError("boom")
        original(session_id, seqs)

    monkeypatch.setattr(snapshots, "ensure_snapshots", failing_once)
    assert api.post(f"/sessions/{session.pk}/events", _batch(10)).status_code == 201
    assert snapshots.drain()
    assert "automatic snapshot of session" in caplog.text
    assert api.post(f"/sessions/{session.pk}/events", _batch(10, 10)).status_code == 201
    assert snapshots.drain()
    # The lost boundary stays missing; the next one folds across it, to the same state.
    assert list(Snapshot.objects.filter(session=session).values_list("seq", "state")) == [
        (20, {"n": 19})
    ]
    session.refresh_from_db()
    assert session.head_seq == 20
