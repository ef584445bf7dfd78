"""Deep JSON on the dashboard and in what was stored before nesting was bounded (issue 23,
defects 1 and 2).

The forms that take JSON (edit arguments, state patch, fact value) answered 500 for JSON nested
1,100 deep (a RecursionError) or a 5,000-digit integer (a ValueError): each is now a friendly
400 that changes nothing. And a state event nested 950 deep, stored before the bound, made the
state read, snapshots, the session page (live and `?at=`) and the handoff workspace answer 500
for good: each now answers with a clear message (the API's 409 `stored_value_too_deep`, the
pages a note where the state would be), and everything else still reads.
"""

import pytest
from django.db import transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from core.text import MAX_READABLE_DEPTH
from handoffs_app.models import Handoff, HandoffStatus
from sessions_app.models import Event, Session, Snapshot
from sessions_app.storage import insert_events
from tests.dashboard.conftest import Team, append, message, state
from tests.factories import make_api_key, make_session
from tests.handoffs.helpers import ask

HTMX = {"HX-Request": "true"}


def nested_text(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def nested(depth: int) -> dict:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[return-value]


def store_before_the_bound(session: Session, kind: str, content: dict) -> int:
    """Write an event as the API did before nesting was bounded: no check on the way."""
    with transaction.atomic():
        Session.objects.filter(pk=session.pk).update(head_seq=F("head_seq") + 1)
        seq = Session.objects.get(pk=session.pk).head_seq
        tier = "durable" if kind == "fact" else "transient"
        insert_events(
            [
                Event(
                    session_id=session.pk,
                    seq=seq,
                    kind=kind,
                    tier=tier,
                    content=content,
                    created_at=timezone.now(),
                )
            ]
        )
    return seq


# --- The forms ---------------------------------------------------------------------------------


@pytest.fixture
def claimed(team: Team):
    session = make_session(team.project, agent="refunds")
    append(session, message("Refund please."), state({"stage": "refund"}))
    handoff = ask(session, "approval")
    client = team.client("operator")
    claim = client.post(reverse("dashboard:handoff_claim", args=[handoff.pk]), headers=HTMX)
    assert claim.status_code == 200
    return handoff, client


DEEP = nested_text(1100)
LONG_INTEGER = '{"n": ' + "7" * 5000 + "}"


@pytest.mark.parametrize("text", [DEEP, LONG_INTEGER, '{"x": ' + nested_text(65) + "}"])
@pytest.mark.parametrize(
    ("action", "field", "extra"),
    [
        ("handoff_edit", "args", {"confirm": "on"}),
        ("handoff_edit", "args", {}),  # the preview
        ("handoff_state", "patch", {"confirm": "on"}),
        ("handoff_state", "patch", {}),
        ("handoff_facts", "value", {"key": "k"}),
    ],
)
def test_deep_json_or_a_long_integer_in_a_form_is_a_friendly_400(
    claimed, action, field, extra, text
):
    handoff, client = claimed
    before = Event.objects.count()
    for headers in (HTMX, {}):
        response = client.post(
            reverse(f"dashboard:{action}", args=[handoff.pk]),
            {field: text, **extra},
            headers=headers,
        )
        assert response.status_code == 400, response.content[:300]
        page = response.content.decode()
        assert "it cannot be stored" in page
        assert "nested deeper than 64 levels" in page or "more than 100 digits" in page
    assert Event.objects.count() == before
    assert Handoff.objects.get(pk=handoff.pk).status == HandoffStatus.CLAIMED


# --- Reads of what was stored before the bound -------------------------------------------------


@pytest.fixture
def poisoned(team: Team):
    """A session whose seq 2 is a state patch nested 950 deep, written before the bound, with a
    fact and a message after it, and a handoff waiting."""
    session = make_session(team.project, agent="refunds", title="Poisoned")
    append(session, state({"stage": "ok"}))
    store_before_the_bound(session, "state", nested(950))
    append(session, message("still here"))
    handoff = ask(session, "question")
    session.refresh_from_db()
    return session, handoff


def test_the_api_answers_a_clear_409_for_the_state_and_reads_the_rest(team, poisoned):
    from tests.conftest import ApiClient

    session, _ = poisoned
    api = ApiClient(make_api_key(team.project)[1])
    for response in (
        api.get(f"/sessions/{session.pk}/state"),
        api.get(f"/sessions/{session.pk}/state", {"at_seq": 2}),
        api.post(f"/sessions/{session.pk}/snapshots", {}),
    ):
        assert response.status_code == 409, response.content
        error = response.json()["error"]
        assert error["code"] == "stored_value_too_deep"
        assert "seq 2" in error["message"] and str(MAX_READABLE_DEPTH) in error["message"]
    assert not Snapshot.objects.filter(session=session).exists()
    before = api.get(f"/sessions/{session.pk}/state", {"at_seq": 1})
    assert before.status_code == 200 and before.json()["state"] == {"stage": "ok"}
    events = api.get(f"/sessions/{session.pk}/events")
    assert events.status_code == 200 and len(events.json()["events"]) == session.head_seq
    assert api.get(f"/sessions/{session.pk}").status_code == 200
    # A new append still works: its automatic snapshot skips the fold it cannot make.
    appended = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "note", "content": {}}]}
    )
    assert appended.status_code == 201, appended.content


@pytest.mark.parametrize("at", [None, 2, 3])
def test_the_session_page_shows_everything_else_and_says_why_the_state_cannot_be(
    team, poisoned, at
):
    session, _ = poisoned
    url = reverse("dashboard:session_detail", args=[session.pk])
    response = team.client("viewer").get(url, {"at": at} if at else {})
    assert response.status_code == 200
    page = response.content.decode()
    assert "nested deeper than" in page and "cannot be read here" in page
    assert "still here" in page  # the log is shown, the deep row says it cannot be
    assert "The event at seq 2 holds JSON nested deeper than" in page


def test_the_session_page_before_the_deep_event_shows_the_state(team, poisoned):
    session, _ = poisoned
    url = reverse("dashboard:session_detail", args=[session.pk])
    page = team.client("viewer").get(url, {"at": 1}).content.decode()
    assert "cannot be read here" not in page.split('id="inspector"')[1].split("</div>")[0]
    assert "&quot;stage&quot;: &quot;ok&quot;" in page


def test_the_handoff_workspace_shows_the_request_and_says_why_the_state_cannot_be(team, poisoned):
    _, handoff = poisoned
    client = team.client("operator")
    url = reverse("dashboard:handoff_detail", args=[handoff.pk])
    response = client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    assert "cannot be read here" in page
    # The request is shown whole: the agent's reason and its question.
    assert "need a person" in page and "Ship to the old address?" in page
    claimed = client.post(reverse("dashboard:handoff_claim", args=[handoff.pk]), headers=HTMX)
    assert claimed.status_code == 200
    # A state patch's preview folds the state it would change: refused in words, not a 500.
    preview = client.post(
        reverse("dashboard:handoff_state", args=[handoff.pk]), {"patch": '{"x": 1}'}, headers=HTMX
    )
    assert preview.status_code == 409
    assert "cannot be read here" in preview.content.decode()
