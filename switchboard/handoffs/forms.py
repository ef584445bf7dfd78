"""Dashboard input for the handoff queue and workspace: GET filters and POST actions, parsed by
forms (invalid → 400 with a sentence, nothing done). JSON fields are parsed here, so a malformed
document is a friendly message on the page rather than an error from the services."""

import json
from decimal import Decimal
from typing import Any

from django import forms

from core.errors import InvalidInput
from core.text import check_storable, loads_client_json
from handoffs_app.models import HandoffKind, HandoffStatus
from handoffs_app.queries import QueueFilters

MAX_JSON_CHARS = 100_000


class QueueFilterForm(forms.Form):
    """The queue's filters; the URL carries them, so a filtered queue can be shared."""

    kind = forms.MultipleChoiceField(
        label="Kind",
        required=False,
        choices=HandoffKind.choices,
        widget=forms.CheckboxSelectMultiple,
    )
    status = forms.MultipleChoiceField(
        label="Status",
        required=False,
        choices=[
            (s.value, s.label)
            for s in (
                HandoffStatus.OPEN,
                HandoffStatus.CLAIMED,
                HandoffStatus.ANSWERED,
                HandoffStatus.TAKEN_OVER,
            )
        ],
        widget=forms.CheckboxSelectMultiple,
    )
    mine = forms.BooleanField(label="Held by me", required=False)
    unclaimed = forms.BooleanField(label="Unclaimed", required=False)
    overdue = forms.BooleanField(label="Overdue", required=False)
    cursor = forms.CharField(required=False, max_length=500)

    def to_filters(self) -> QueueFilters:
        data = self.cleaned_data
        return QueueFilters(
            kind=data.get("kind") or None,
            status=data.get("status") or None,
            mine=bool(data.get("mine")),
            unclaimed=bool(data.get("unclaimed")),
            overdue=bool(data.get("overdue")),
        )

    @property
    def is_filtered(self) -> bool:
        return any(
            self.cleaned_data.get(n) for n in ("kind", "status", "mine", "unclaimed", "overdue")
        )


def _storable_json(text: str, what: str) -> Any:
    """`text` parsed as JSON the services can store (core.text's bounds: nesting, integer size,
    text), else a ValidationError saying what is wrong. Malformed JSON raises JSONDecodeError."""
    try:
        value = loads_client_json(text, field=what)
        check_storable(value, field="")
    except InvalidInput as refused:
        where = refused.detail.get("field")
        place = f" (at {where})" if where and where != what else ""
        raise forms.ValidationError(
            f"{what} holds {refused.detail.get('problem')}{place}; it cannot be stored."
        ) from None
    return value


def _parse_json_object(text: str, what: str) -> dict[str, Any]:
    if len(text) > MAX_JSON_CHARS:
        raise forms.ValidationError(f"{what} holds at most {MAX_JSON_CHARS} characters.")
    try:
        value = _storable_json(text, what)
    except json.JSONDecodeError as error:
        raise forms.ValidationError(
            f"{what} is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})."
        ) from None
    if not isinstance(value, dict):
        raise forms.ValidationError(f"{what} must be a JSON object ({{…}}).")
    return value


class ConfirmedForm(forms.Form):
    """A change shown as a diff first: without `confirm` the page previews it."""

    confirm = forms.BooleanField(required=False)


class RespondForm(forms.Form):
    text = forms.CharField(label="Answer", required=False, max_length=20_000, strip=True)
    choice = forms.CharField(label="Choice", required=False, max_length=1000)

    def __init__(self, choices: list[str] | None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.choices = choices or []

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        choice = data.get("choice") or ""
        if choice and choice not in self.choices:
            self.add_error("choice", "is not one of the question's choices.")
        if not data.get("text"):
            if choice:
                data["text"] = choice  # a choice alone answers with its own words
            else:
                self.add_error("text", "Write an answer (or pick a choice).")
        return data


class EditArgsForm(ConfirmedForm):
    args = forms.CharField(label="Arguments (JSON)", widget=forms.Textarea, strip=True)

    def clean_args(self) -> dict[str, Any]:
        return _parse_json_object(self.cleaned_data["args"], "The arguments")


class PatchStateForm(ConfirmedForm):
    patch = forms.CharField(label="JSON Merge Patch", widget=forms.Textarea, strip=True)

    def clean_patch(self) -> dict[str, Any]:
        patch = _parse_json_object(self.cleaned_data["patch"], "The patch")
        if not patch:
            raise forms.ValidationError("The patch is empty: it would change nothing.")
        return patch


class FactsForm(forms.Form):
    key = forms.CharField(label="Fact", max_length=200, strip=True)
    value = forms.CharField(label="Value", max_length=20_000, strip=True)

    def clean_value(self) -> Any:
        """The value as JSON when it parses as JSON (42, true, {"a": 1}), else the text."""
        raw = self.cleaned_data["value"]
        try:
            return _storable_json(raw, "The value")
        except json.JSONDecodeError:
            return raw

    def facts(self) -> dict[str, Any]:
        return {self.cleaned_data["key"]: self.cleaned_data["value"]}


class MessageForm(forms.Form):
    text = forms.CharField(label="Message", max_length=20_000, strip=True)


class BudgetForm(forms.Form):
    max_tokens = forms.IntegerField(label="Token limit", required=False, min_value=0)
    max_cost = forms.DecimalField(
        label="Cost limit", required=False, min_value=Decimal(0), max_digits=12, decimal_places=4
    )


class ReassignForm(forms.Form):
    to_user = forms.TypedChoiceField(label="Give it to", coerce=int)

    def __init__(self, operators: list[Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.operators = {u.pk: u for u in operators}
        self.fields["to_user"].choices = [(u.pk, u.get_username()) for u in operators]

    def user(self) -> Any:
        return self.operators[self.cleaned_data["to_user"]]


class NextHandoffForm(forms.Form):
    """GET …/handoffs/next/?after=<id>: the next waiting handoff after this one."""

    after = forms.UUIDField(label="After", required=False)
