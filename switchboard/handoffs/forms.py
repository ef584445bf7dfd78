"""Dashboard input for the handoff queue and workspace: GET filters and POST actions, parsed by
forms (invalid → 400 with a sentence, nothing done). JSON fields are parsed here, so a malformed
document is a friendly message on the page rather than an error from the services."""

import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django import forms
from django.http import QueryDict

from core.errors import InvalidInput
from core.text import check_storable, loads_client_json
from handoffs_app.models import Handoff, HandoffKind, HandoffStatus
from handoffs_app.queries import QueueFilters
from handoffs_app.services.args_schema import args_problems, schema_of

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


# The workspace's "Edit the arguments, then approve" as form fields, when the approval carries
# a JSON Schema of its arguments (`action_request.args_schema`, handoffs_app.services.args_schema).
#
# Each top-level property of a simple type gets a field (the required ones first, in the order
# `required` lists them, then the others by name): text (a select for an enum of strings, a
# multi-line box for long text), a whole number, a number, a checkbox; titles are the labels and
# descriptions the help. Everything else (nested objects, lists, several types, arguments the
# schema does not name) stays in one raw JSON box, "Other arguments". Posted back, the fields are
# read by their position in the schema (`arg-<n>`: a property's name may be any string), typed,
# merged with the other arguments and validated against the schema; what fails names its field.
# Plain values only: the template (autoescaped) makes the markup.

SIMPLE_TYPES = ("string", "integer", "number", "boolean")
MAX_FIELDS = 50
MAX_ENUM_OPTIONS = 200
MAX_FIELD_CHARS = 20_000
# Text longer than SHORT_TEXT, holding a line break, or allowed (maxLength) to be longer than
# LONG_TEXT is edited in a multi-line box.
SHORT_TEXT = 80
LONG_TEXT = 200
WHOLE_NUMBER = re.compile(r"-?[0-9]{1,100}")
JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]{0,99})(?:\.[0-9]{1,100})?(?:[eE][+-]?[0-9]{1,4})?")
REST_LABEL = "Other arguments (JSON)"
SCHEMA_MARKER = "schema"  # the hidden `fields` input of a submission made of these fields


@dataclass
class SchemaField:
    """One argument edited as a form field."""

    index: int
    name: str
    label: str
    help: str
    widget: str  # "text" | "textarea" | "select" | "integer" | "number" | "checkbox"
    value: str  # what the input shows (a checkbox: "")
    checked: bool = False
    required: bool = False
    options: list[str] = field(default_factory=list)
    minimum: str = ""
    maximum: str = ""
    max_length: int | None = None

    @property
    def input_name(self) -> str:
        return f"arg-{self.index}"

    @property
    def input_id(self) -> str:
        return f"edit-arg-{self.index}"

    @property
    def shows_name(self) -> bool:
        """The argument's own name is shown beside a title that differs from it."""
        return self.label != self.name


@dataclass
class SchemaEditForm:
    fields: list[SchemaField]
    rest: dict[str, Any]  # the other arguments, edited as raw JSON
    rest_names: list[str]  # the schema's properties that are not fields

    @property
    def has_rest(self) -> bool:
        return bool(self.rest or self.rest_names)

    @property
    def rest_pretty(self) -> str:
        return json.dumps(self.rest, indent=2, ensure_ascii=False, sort_keys=True)


def _number_text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    return json.dumps(value)


def _field(index: int, name: str, spec: dict[str, Any], value: Any, required: bool) -> SchemaField:
    kind = spec["type"]
    title = spec.get("title")
    description = spec.get("description")
    made = SchemaField(
        index=index,
        name=name,
        label=title.strip() if isinstance(title, str) and title.strip() else name,
        help=description if isinstance(description, str) else "",
        widget="text",
        value="",
        required=required,
    )
    if kind == "boolean":
        made.widget, made.checked = "checkbox", value is True
    elif kind in ("integer", "number"):
        made.widget, made.value = kind, _number_text(value)
        made.minimum = _number_text(spec.get("minimum"))
        made.maximum = _number_text(spec.get("maximum"))
    else:
        made.value = value if isinstance(value, str) else ""
        max_length = spec.get("maxLength")
        if isinstance(max_length, int) and not isinstance(max_length, bool) and max_length >= 0:
            made.max_length = min(max_length, MAX_FIELD_CHARS)
        if isinstance(spec.get("enum"), list):
            made.widget, made.options = "select", list(spec["enum"])
        elif (
            "\n" in made.value or len(made.value) > SHORT_TEXT or (made.max_length or 0) > LONG_TEXT
        ):
            made.widget = "textarea"
    return made


def _is_simple(spec: Any) -> bool:
    if not isinstance(spec, dict) or spec.get("type") not in SIMPLE_TYPES:
        return False
    enum = spec.get("enum")
    if enum is None:
        return True
    # An enum becomes a select only when it lists strings (of a string property).
    return (
        spec["type"] == "string"
        and isinstance(enum, list)
        and 0 < len(enum) <= MAX_ENUM_OPTIONS
        and all(isinstance(option, str) for option in enum)
    )


def schema_edit_form(handoff: Handoff) -> SchemaEditForm | None:
    """The fields for this approval's arguments, pre-filled with the proposed ones; None when
    it has no args_schema or the schema has no property of a simple type."""
    schema = schema_of(handoff.payload)
    if schema is None:
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return None
    args = (handoff.payload.get("action_request") or {}).get("args") or {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    fields: list[SchemaField] = []
    rest_names: list[str] = []
    # PostgreSQL keeps a JSON object's keys in its own order (jsonb), not the agent's; the
    # `required` list keeps it: the required arguments first, as listed, then the others by name.
    listed = [name for name in dict.fromkeys(required) if name in properties]
    for name in [*listed, *sorted(set(properties) - set(listed))]:
        spec = properties[name]
        if _is_simple(spec) and len(fields) < MAX_FIELDS:
            value = args.get(name)
            fields.append(_field(len(fields), name, spec, value, name in required))
        else:
            rest_names.append(name)
    if not fields:
        return None
    shown = {f.name for f in fields}
    rest = {name: value for name, value in args.items() if name not in shown}
    return SchemaEditForm(fields=fields, rest=rest, rest_names=rest_names)


def _typed(made: SchemaField, raw: str) -> tuple[bool, Any]:
    """(given, value) of one field's input; ValidationError naming the field when it is not
    of the field's type."""
    if made.widget == "checkbox":
        return True, raw == "on"
    if raw == "" and not made.required:
        return False, None  # left empty: the argument is left out
    if made.widget == "integer":
        if not WHOLE_NUMBER.fullmatch(raw.strip()):
            raise forms.ValidationError(f"{made.label}: enter a whole number.")
        return True, int(raw.strip())
    if made.widget == "number":
        text = raw.strip()
        if not JSON_NUMBER.fullmatch(text):
            raise forms.ValidationError(f"{made.label}: enter a number (like 12 or 12.5).")
        if WHOLE_NUMBER.fullmatch(text):
            return True, int(text)
        number = float(text)
        if not math.isfinite(number):
            raise forms.ValidationError(f"{made.label}: the number is too large.")
        return True, number
    if len(raw) > MAX_FIELD_CHARS:
        raise forms.ValidationError(f"{made.label}: at most {MAX_FIELD_CHARS} characters.")
    if made.widget == "select" and raw not in made.options:
        raise forms.ValidationError(f"{made.label}: pick one of the choices.")
    # A browser sends a multi-line box's line breaks as CR LF.
    return True, raw.replace("\r\n", "\n")


def args_from_fields(handoff: Handoff, form: SchemaEditForm, data: QueryDict) -> dict[str, Any]:
    """The arguments the posted fields make (typed, merged with the other arguments), checked
    against the handoff's schema. ValidationError with one sentence per problem, each naming
    its field; nothing is kept."""
    errors: list[str] = []
    args: dict[str, Any] = {}
    if form.has_rest:
        try:
            args.update(_parse_json_object(data.get("args_rest", "").strip() or "{}", REST_LABEL))
        except forms.ValidationError as refused:
            errors.extend(refused.messages)
        own = sorted(f.name for f in form.fields if f.name in args)
        if own:
            errors.append(
                f"{REST_LABEL}: {', '.join(own)} {'has its' if len(own) == 1 else 'have their'} "
                "own field above; change it there."
            )
    for made in form.fields:
        try:
            given, value = _typed(made, data.get(made.input_name, ""))
        except forms.ValidationError as refused:
            errors.extend(refused.messages)
            continue
        if given:
            args[made.name] = value
    if errors:
        raise forms.ValidationError(errors)
    schema = schema_of(handoff.payload) or {}
    labels = {f.name: f.label for f in form.fields}
    problems = args_problems(schema, args)
    if problems:
        raise forms.ValidationError(
            [
                f"{labels[p.name]}: {p.message}"
                if p.name in labels and p.path == p.name
                else f"{labels.get(p.name, REST_LABEL)}"
                + (f" (at {p.path})" if p.path else "")
                + f": {p.message}"
                for p in problems
            ]
        )
    return args
