"""The retention page's forms: the policy (durations in days, blank = never; agent overrides as
JSON in seconds, as the API takes them) and a legal hold."""

import json
from decimal import Decimal
from typing import Any

from django import forms

from retention_app.models import DURATION_FIELDS, OUTCOMES

DAY_SECONDS = 86400
LABELS = {
    "close_idle_after": "Close idle sessions after (days)",
    "close_paused_after": "Close paused sessions without an open handoff after (days)",
    "archive_closed_after": "Archive closed sessions after (days)",
    "compact_after": "Compact closed sessions after (days)",
    "delete_after": "Delete archived sessions after (days)",
    "outcome_compact_after": "Kept longer: compact after (days)",
    "outcome_delete_after": "Kept longer: delete after (days)",
}


def _days(seconds: int) -> str:
    """Seconds as days, written plainly ("90", "0.5", never "9E+1")."""
    days = Decimal(seconds) / DAY_SECONDS
    text = format(days.quantize(Decimal("0.001")), "f").rstrip("0").rstrip(".")
    return text or "0"


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
    agents = forms.CharField(
        label="Agent overrides (JSON: agent name → only the fields it sets, in seconds)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=20000,
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in reversed(DURATION_FIELDS):
            self.fields = {
                name: forms.DecimalField(
                    label=LABELS[name],
                    required=False,
                    min_value=Decimal("0.001"),
                    max_digits=9,
                    decimal_places=3,
                    widget=forms.NumberInput(attrs={"step": "any", "placeholder": "never"}),
                ),
                **self.fields,
            }

    @classmethod
    def for_policy(cls, document: dict[str, Any]) -> "PolicyForm":
        initial: dict[str, Any] = {
            name: None if document[name] is None else _days(document[name])
            for name in DURATION_FIELDS
        }
        initial["keep_outcomes"] = document["keep_outcomes"]
        initial["keep_tags"] = ", ".join(document["keep_tags"])
        initial["agents"] = json.dumps(document["agents"]) if document["agents"] else ""
        return cls(initial=initial)

    def clean_agents(self) -> dict[str, Any]:
        raw = self.cleaned_data.get("agents") or ""
        if not raw.strip():
            return {}
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("an object: agent name → fields")
        return value

    def document(self) -> dict[str, Any]:
        """The policy as services.policies.save_policy takes it (seconds)."""
        data = self.cleaned_data
        body: dict[str, Any] = {
            name: None if data.get(name) is None else int(data[name] * DAY_SECONDS)
            for name in DURATION_FIELDS
        }
        body["keep_outcomes"] = [o for o in data.get("keep_outcomes", []) if o in OUTCOMES]
        body["keep_tags"] = [
            t.strip() for t in (data.get("keep_tags") or "").split(",") if t.strip()
        ]
        body["agents"] = data.get("agents") or {}
        return body


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
