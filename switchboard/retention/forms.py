"""The retention page's forms: the policy (each duration a number and its unit, blank = never),
its agent overrides (one form per agent: a duration and its unit, or "never"; a blank one keeps
the project's value), and a legal hold.

A stored duration is shown in the largest unit it is a whole number of (days, hours, minutes,
seconds), so the page shows it exactly and saving it unchanged stores the same seconds, whatever
the API set."""

import json
from decimal import Decimal
from typing import Any

from django import forms

from core.errors import InvalidInput
from core.text import loads_client_json
from retention_app.models import DURATION_FIELDS, OUTCOMES

DAY_SECONDS = 86400
LABELS = {
    "close_idle_after": "Close idle sessions after",
    "close_paused_after": "Close paused sessions without an open handoff after",
    "archive_closed_after": "Archive closed sessions after",
    "compact_after": "Compact closed sessions after",
    "delete_after": "Delete archived sessions after",
    "outcome_compact_after": "Kept longer: compact after",
    "outcome_delete_after": "Kept longer: delete after",
    "artifact_max_age": "Delete artifact versions older than",
}
# The read-only page's names for the two kept-longer fields (the durations use LABELS).
READ_LABELS = {
    **LABELS,
    "keep_outcomes": "Keep longer sessions that",
    "keep_tags": "…or carry one of these tags",
}
OUTCOME_WORDS = {
    "error": "ended with an error",
    "handoff": "had a handoff",
    "over_budget": "exceeded their budget",
}


def actor_words(label: str) -> str:
    """An actor label ("user:alice", "key:ab12", "beat") as a person reads it."""
    kind, _, name = label.partition(":")
    if kind == "user" and name:
        return name
    if kind == "key" and name:
        return f"API key {name}…"
    return "the schedule" if label == "beat" else label


# A duration's units, largest first (_in_unit shows a stored one in the first it divides).
UNITS = {"days": DAY_SECONDS, "hours": 3600, "minutes": 60, "seconds": 1}
UNIT_CHOICES = [(unit, unit) for unit in UNITS]


def _in_unit(seconds: int) -> tuple[str, str]:
    """Seconds as (number, unit) in the largest unit they are a whole number of: exact, so the
    form saves back the same seconds."""
    for unit, size in UNITS.items():
        if seconds % size == 0:
            return str(seconds // size), unit
    raise AssertionError("every whole number of seconds is whole in seconds")


def _duration_field(label: str, **kwargs: Any) -> forms.DecimalField:
    return forms.DecimalField(
        label=label,
        required=False,
        min_value=Decimal("0.001"),
        # 13 digits: up to 100 years in seconds (services.policies.MAX_SECONDS), 3 decimals.
        max_digits=13,
        decimal_places=3,
        **kwargs,
    )


def _seconds(value: Decimal, unit: str) -> int:
    return int(value * UNITS[unit])


class PolicyForm(forms.Form):
    keep_outcomes = forms.MultipleChoiceField(
        label="Keep longer sessions that",
        choices=[
            ("error", "ended with an error"),
            ("handoff", "had a handoff"),
            ("over_budget", "exceeded their budget"),
        ],
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    keep_tags = forms.CharField(
        label="…or carry one of these tags (comma-separated)", required=False, max_length=2000
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        durations: dict[str, forms.Field] = {}
        for name in DURATION_FIELDS:
            durations[name] = _duration_field(
                LABELS[name],
                widget=forms.NumberInput(attrs={"step": "any", "placeholder": "never"}),
            )
            # Not required: a post without it (an older page, a script) means days.
            durations[f"{name}_unit"] = forms.ChoiceField(
                label=f"{LABELS[name]}: unit", choices=UNIT_CHOICES, initial="days", required=False
            )
        self.fields = {**durations, **self.fields}

    @classmethod
    def for_policy(cls, document: dict[str, Any]) -> "PolicyForm":
        initial: dict[str, Any] = {}
        for name in DURATION_FIELDS:
            if document[name] is not None:
                initial[name], initial[f"{name}_unit"] = _in_unit(document[name])
        initial["keep_outcomes"] = document["keep_outcomes"]
        initial["keep_tags"] = ", ".join(document["keep_tags"])
        return cls(initial=initial)

    def duration_rows(self) -> list[tuple[forms.BoundField, forms.BoundField]]:
        """(number, unit) for each duration, in the page's order (the template's grid)."""
        return [(self[name], self[f"{name}_unit"]) for name in DURATION_FIELDS]

    def document(self, agents: dict[str, Any] | None = None) -> dict[str, Any]:
        """The policy as services.policies.save_policy takes it (seconds), with the agent
        overrides given (AgentOverrideFormSet.overrides)."""
        data = self.cleaned_data
        body: dict[str, Any] = {
            name: None
            if data.get(name) is None
            else _seconds(data[name], data.get(f"{name}_unit") or "days")
            for name in DURATION_FIELDS
        }
        body["keep_outcomes"] = [o for o in data.get("keep_outcomes", []) if o in OUTCOMES]
        body["keep_tags"] = [
            t.strip() for t in (data.get("keep_tags") or "").split(",") if t.strip()
        ]
        body["agents"] = agents or {}
        return body


def human(name: str, value: Any) -> str:
    """A policy field's value as the read-only page shows it ("7 days", "36 hours", "never")."""
    if name == "keep_outcomes":
        return ", ".join(OUTCOME_WORDS.get(v, v) for v in value) or "—"
    if name in KEPT_FIELDS:
        return ", ".join(value) or "—"
    if value is None:
        return "never"
    number, unit = _in_unit(int(value))
    return f"{number} {unit.removesuffix('s') if number == '1' else unit}"


# An override's duration: a number and its unit, or "never" (blank number: the project's value).
OVERRIDE_UNIT_CHOICES = [*UNIT_CHOICES, ("never", "never")]
# An override's other fields (keep_outcomes, keep_tags) are not edited here but kept as they are.
KEPT_FIELDS = ("keep_outcomes", "keep_tags")


class AgentOverrideForm(forms.Form):
    """One agent's override: the agent (one of the project's), and each duration it sets."""

    agent = forms.ChoiceField(
        label="Agent",
        required=False,
        error_messages={"invalid_choice": "%(value)s is not an agent of this project."},
    )
    kept = forms.CharField(required=False, widget=forms.HiddenInput, max_length=20000)

    def __init__(self, *args: Any, agents: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        agent_field = self.fields["agent"]
        assert isinstance(agent_field, forms.ChoiceField)
        agent_field.choices = [("", "— choose an agent —")] + [(n, n) for n in agents or []]
        for name in DURATION_FIELDS:
            self.fields[name] = _duration_field(
                LABELS[name],
                error_messages={
                    "min_value": "must be more than 0 (leave it blank to keep the project's value)"
                },
                widget=forms.NumberInput(attrs={"step": "any", "placeholder": "project's"}),
            )
            self.fields[f"{name}_unit"] = forms.ChoiceField(
                label=f"{LABELS[name]}: unit", choices=OVERRIDE_UNIT_CHOICES, initial="days"
            )

    @classmethod
    def initial_for(cls, agent: str, fields_set: dict[str, Any]) -> dict[str, Any]:
        initial: dict[str, Any] = {"agent": agent}
        for name in DURATION_FIELDS:
            if name not in fields_set:
                continue
            if fields_set[name] is None:
                initial[f"{name}_unit"] = "never"
            else:
                initial[name], initial[f"{name}_unit"] = _in_unit(fields_set[name])
        kept = {k: v for k, v in fields_set.items() if k in KEPT_FIELDS}
        initial["kept"] = json.dumps(kept) if kept else ""
        return initial

    def duration_rows(self) -> list[tuple[forms.BoundField, forms.BoundField]]:
        """(number, unit) for each duration, in the page's order (the template's grid)."""
        return [(self[name], self[f"{name}_unit"]) for name in DURATION_FIELDS]

    def clean_kept(self) -> dict[str, Any]:
        raw = self.cleaned_data.get("kept") or ""
        try:
            value = loads_client_json(raw, field="kept") if raw.strip() else {}
        except (ValueError, InvalidInput):  # not JSON, or nested past what the parser takes
            value = None
        if not isinstance(value, dict) or any(k not in KEPT_FIELDS for k in value):
            raise forms.ValidationError("the override's other fields were altered; reload")
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("DELETE"):
            return data
        set_fields = self.fields_set()
        if not data.get("agent"):
            if set_fields and not self.errors:
                self.add_error("agent", "Choose the agent this override is for.")
        elif not set_fields and not self.errors:
            self.add_error(None, "Set at least one duration, or remove this override.")
        return data

    def fields_set(self) -> dict[str, Any]:
        """The fields this override sets, in seconds (None: never)."""
        data = self.cleaned_data
        out: dict[str, Any] = {}
        for name in DURATION_FIELDS:
            unit = data.get(f"{name}_unit") or "days"
            value = data.get(name)
            if unit == "never":
                out[name] = None
            elif value is not None:
                out[name] = _seconds(value, unit)
        out.update(data.get("kept") or {})
        return out


class BaseAgentOverrideFormSet(forms.BaseFormSet):
    def clean(self) -> None:
        if any(self.errors):
            return
        seen: set[str] = set()
        for form in self.forms:
            if not hasattr(form, "cleaned_data") or form.cleaned_data.get("DELETE"):
                continue
            agent = form.cleaned_data.get("agent")
            if agent and agent in seen:
                raise forms.ValidationError(f"Agent {agent} has two overrides: keep one.")
            if agent:
                seen.add(agent)

    def overrides(self) -> dict[str, dict[str, Any]]:
        """agent name -> the fields its override sets (seconds), as save_policy takes them."""
        out: dict[str, dict[str, Any]] = {}
        for form in self.forms:
            data = form.cleaned_data
            if data.get("DELETE") or not data.get("agent"):
                continue
            out[data["agent"]] = form.fields_set()
        return out

    def errors_as_sentences(self) -> list[str]:
        messages = [str(e) for e in self.non_form_errors()]
        for form in self.forms:
            if not form.errors:
                continue
            who = form.data.get(form.add_prefix("agent")) or "new override"
            for name, errors in form.errors.items():
                label = form.fields[name].label if name in form.fields else None
                for error in errors:
                    text = f"{label}: {error}" if label else str(error)
                    messages.append(f"Override for {who}: {text}")
        return messages


AgentOverrideFormSet = forms.formset_factory(
    AgentOverrideForm, formset=BaseAgentOverrideFormSet, extra=1, can_delete=True
)
OVERRIDES_PREFIX = "agents"


def override_formset(
    agents: list[str], document: dict[str, Any] | None = None, data: Any = None
) -> BaseAgentOverrideFormSet:
    """The page's override forms: bound to `data` (a POST), or showing `document`'s overrides
    (and one blank form to add one)."""
    if data is not None:
        return AgentOverrideFormSet(data, prefix=OVERRIDES_PREFIX, form_kwargs={"agents": agents})
    initial = [
        AgentOverrideForm.initial_for(name, fields_set)
        for name, fields_set in (document or {}).get("agents", {}).items()
    ]
    return AgentOverrideFormSet(
        initial=initial, prefix=OVERRIDES_PREFIX, form_kwargs={"agents": agents}
    )


class HoldForm(forms.Form):
    target = forms.ChoiceField(
        choices=[("session", "A session"), ("agent", "An agent"), ("project", "The whole project")]
    )
    session_id = forms.UUIDField(label="Session id", required=False)
    agent = forms.CharField(label="Agent name", required=False, max_length=100)
    reason = forms.CharField(max_length=1000)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("target") == "session" and not data.get("session_id"):
            self.add_error("session_id", "Name the session to hold.")
        if data.get("target") == "agent" and not data.get("agent"):
            self.add_error("agent", "Name the agent to hold.")
        return data


class LiftForm(forms.Form):
    reason = forms.CharField(max_length=1000, required=False)
