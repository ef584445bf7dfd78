"""The workspace's "Ignore" (only when the request allows it) and "Edit the arguments, then
approve" as form fields from the agent's JSON Schema: typed, checked against the schema, a
refusal naming the field with nothing changed; the raw JSON box for everything else."""

import copy
import json

import pytest
from django.urls import reverse

from handoffs_app.models import Handoff, HandoffStatus
from sessions_app.models import Event, Session
from tests.dashboard.conftest import Team
from tests.factories import make_session
from tests.handoffs.helpers import APPROVAL, ask

HTMX = {"HX-Request": "true"}
IGNORABLE = {**APPROVAL, "config": {**APPROVAL["config"], "allow_ignore": True}}
LONG_NOTE = "The customer waited three weeks for the parcel.\nRefund the shipping as well."
SCHEMA = {
    "type": "object",
    "properties": {
        "order": {"type": "string", "title": "Order", "minLength": 3},
        "amount": {
            "type": "number",
            "title": "Amount <b>EUR</b>",
            "description": "Refund <i>in euros</i>, at most the order's total.",
            "minimum": 0,
        },
        "count": {"type": "integer", "title": "Parcels"},
        "notify": {"type": "boolean", "title": "Tell the customer"},
        "channel": {"type": "string", "enum": ["email", "sms", "<script>x</script>"]},
        "note": {"type": "string"},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
    "required": ["order", "amount"],
    "additionalProperties": False,
}
ARGS = {
    "order": "A-1001",
    "amount": 120.5,
    "count": 2,
    "notify": True,
    "channel": "sms",
    "note": LONG_NOTE,
    "address": {"city": "Lyon"},
}


def url(name, handoff):
    return reverse(f"dashboard:{name}", args=[handoff.pk])


def with_schema():
    payload = copy.deepcopy(APPROVAL)
    payload["action_request"] = {"action": "refund", "args": ARGS, "args_schema": SCHEMA}
    return payload


@pytest.fixture
def ignorable(team: Team):
    return ask(make_session(team.project, agent="refunds"), "approval", payload=IGNORABLE)


@pytest.fixture
def schema_approval(team: Team):
    return ask(make_session(team.project, agent="refunds"), "approval", payload=with_schema())


def claimed(team, handoff):
    op = team.client("operator")
    assert op.post(url("handoff_claim", handoff)).status_code == 302
    return op


# --- Ignore ------------------------------------------------------------------------------


def test_ignore_is_offered_to_the_holder_only_when_the_request_allows_it(team, ignorable):
    strict = ask(make_session(team.project), "approval")  # allow_ignore false
    assert (
        'id="ignore-button"'
        not in team.client("viewer").get(url("handoff_detail", ignorable)).content.decode()
    )
    op = claimed(team, ignorable)
    claimed(team, strict)
    assert 'id="ignore-button"' in op.get(url("handoff_detail", ignorable)).content.decode()
    body = op.get(url("handoff_detail", strict)).content.decode()
    assert 'id="ignore-button"' not in body and 'id="reject-button"' not in body


def test_ignoring_ends_the_handoff_and_the_page_and_timeline_say_so(team, ignorable):
    op = claimed(team, ignorable)
    done = op.post(url("handoff_ignore", ignorable), headers=HTMX)
    assert done.status_code == 200
    text = done.content.decode()
    assert "Ignored: the handoff is over and the agent goes on without the action." in text
    assert "This handoff is ignored" in text
    assert f"Ignored by {team.operator.username}" in text
    handoff = Handoff.objects.get(pk=ignorable.pk)
    assert (handoff.status, handoff.answer["type"]) == ("ignored", "ignore")
    assert Session.objects.get(pk=ignorable.session_id).status == "resumed"
    session_page = op.get(reverse("dashboard:session_detail", args=[ignorable.session_id]))
    assert (
        f"ignored by {team.operator.username}: the agent goes on without the action"
        in session_page.content.decode()
    )
    audit = team.client("admin").get(reverse("dashboard:audit_log", args=[team.project.pk]))
    assert "handoff.ignored" in audit.content.decode()


def test_ignoring_a_request_that_does_not_allow_it_is_refused_naming_the_answers(team):
    strict = ask(make_session(team.project), "approval")
    op = claimed(team, strict)
    before = Event.objects.count()
    refused = op.post(url("handoff_ignore", strict), headers=HTMX)
    assert refused.status_code == 422
    assert "it accepts: accept, edit, respond" in refused.content.decode()
    assert Handoff.objects.get(pk=strict.pk).status == HandoffStatus.CLAIMED
    assert Event.objects.count() == before
    assert team.client("viewer").post(url("handoff_ignore", strict)).status_code == 403


# --- Arguments as form fields -------------------------------------------------------------


def test_the_schema_properties_are_fields_prefilled_and_escaped(team, schema_approval):
    body = (
        claimed(team, schema_approval).get(url("handoff_detail", schema_approval)).content.decode()
    )
    assert 'id="edit-args"' not in body  # no raw box for the whole arguments
    # The required arguments first, as `required` lists them, then the others by name.
    assert 'for="edit-arg-0">Order' in body and 'for="edit-arg-1">Amount' in body
    assert 'for="edit-arg-2">channel' in body and 'for="edit-arg-3">Parcels' in body
    assert 'for="edit-arg-4">note' in body and 'for="edit-arg-5"><input' in body
    assert '<input form="hf-edit" type="text" id="edit-arg-0"' in body
    assert 'name="arg-0" value="A-1001"' in body
    assert 'type="number" id="edit-arg-1"' in body and 'value="120.5" step="any" min="0"' in body
    assert 'type="number" id="edit-arg-3"' in body and 'value="2" step="1"' in body
    assert 'type="checkbox" id="edit-arg-5" hx-preserve name="arg-5" checked' in body
    assert '<option value="sms" selected>sms</option>' in body
    assert "&lt;script&gt;x&lt;/script&gt;" in body and "<script>x</script>" not in body
    assert '<textarea form="hf-edit" id="edit-arg-4"' in body and LONG_NOTE in body
    # Titles label the fields (escaped), descriptions help; the nested object stays JSON.
    assert "Amount &lt;b&gt;EUR&lt;/b&gt;" in body and "Refund &lt;i&gt;in euros&lt;/i&gt;" in body
    assert 'id="edit-args-rest"' in body and "&quot;city&quot;: &quot;Lyon&quot;" in body


# Field positions: the required arguments first (order, amount), then the others by name.
def fields(**overrides):
    data = {
        "fields": "schema",
        "arg-0": "A-1001",
        "arg-1": "99.5",
        "arg-2": "email",
        "arg-3": "3",
        "arg-4": LONG_NOTE.replace("\n", "\r\n"),
        "args_rest": '{"address": {"city": "Paris"}}',
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def test_fields_are_typed_previewed_then_sent(team, schema_approval):
    op = claimed(team, schema_approval)
    before = Event.objects.count()
    preview = op.post(url("handoff_edit", schema_approval), fields(), headers=HTMX)
    assert preview.status_code == 200, preview.content
    assert 'class="diff-add"' in preview.content.decode()
    assert Handoff.objects.get(pk=schema_approval.pk).status == HandoffStatus.CLAIMED
    assert Event.objects.count() == before
    sent = json.loads(
        preview.content.decode()
        .split('name="args" value="')[1]
        .split('"')[0]
        .replace("&quot;", '"')
    )
    expected = {
        "order": "A-1001",
        "amount": 99.5,
        "count": 3,
        "notify": False,  # unchecked
        "channel": "email",
        "note": LONG_NOTE,
        "address": {"city": "Paris"},
    }
    assert sent == expected
    done = op.post(
        url("handoff_edit", schema_approval), {"args": json.dumps(sent), "confirm": "on"}
    )
    assert done.status_code == 302
    handoff = Handoff.objects.get(pk=schema_approval.pk)
    assert handoff.answer["type"] == "edit" and handoff.answer["args"] == expected
    assert handoff.answer["original_args"] == ARGS


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"arg-1": "-1"}, "Amount &lt;b&gt;EUR&lt;/b&gt;: must be at least 0."),
        ({"arg-3": "two"}, "Parcels: enter a whole number."),
        ({"arg-3": "2.5"}, "Parcels: enter a whole number."),
        ({"arg-1": "1e999"}, "the number is too large"),
        ({"arg-0": "A1"}, "Order: must be at least 3 characters long."),
        ({"arg-2": "fax"}, "channel: pick one of the choices."),
        ({"args_rest": '{"amount": 1}'}, "amount has its own field above"),
        ({"args_rest": '{"extra": 1}'}, "Other arguments (JSON): Additional properties"),
        ({"args_rest": '{"address": {"city": 5}}'}, "(at address.city): must be text."),
        ({"args_rest": "[1]"}, "must be a JSON object"),
    ],
)
def test_a_field_the_schema_refuses_is_named_and_nothing_changes(
    team, schema_approval, overrides, says
):
    op = claimed(team, schema_approval)
    before = Event.objects.count()
    refused = op.post(url("handoff_edit", schema_approval), fields(**overrides), headers=HTMX)
    assert refused.status_code == 400
    assert says in refused.content.decode(), refused.content.decode()
    assert "Nothing was changed" in refused.content.decode()
    assert Handoff.objects.get(pk=schema_approval.pk).status == HandoffStatus.CLAIMED
    assert Event.objects.count() == before


def test_confirmed_raw_args_that_fail_the_schema_are_refused_by_the_service(team, schema_approval):
    op = claimed(team, schema_approval)
    refused = op.post(
        url("handoff_edit", schema_approval),
        {"args": json.dumps({**ARGS, "count": "two"}), "confirm": "on"},
        headers=HTMX,
    )
    assert refused.status_code == 422
    assert "count: must be a whole number." in refused.content.decode()
    assert Handoff.objects.get(pk=schema_approval.pk).status == HandoffStatus.CLAIMED


def test_without_a_schema_the_raw_json_box_stays(team):
    plain = ask(make_session(team.project), "approval")
    body = claimed(team, plain).get(url("handoff_detail", plain)).content.decode()
    assert 'id="edit-args"' in body and 'id="schema-fields"' not in body
