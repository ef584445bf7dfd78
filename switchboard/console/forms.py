"""Input of the project console (settings, members, API keys, audit log): parsed by forms,
invalid → 400 with the form's messages, nothing done. The rules themselves (last admin, unique
names, expiry in the future) live in the services; the views show their refusals the same way.
"""

from typing import Any

from django import forms

from core.errors import InvalidInput
from core.models import ApiKey, KeyScope, Project, Role
from core.queries import AuditFilters
from switchboard.sessions.forms import DATETIME_FORMATS, LOCAL_FORMAT

MAX_ID = 2**63 - 1


def _datetime_field(label: str, **kwargs: Any) -> forms.DateTimeField:
    return forms.DateTimeField(
        label=label,
        required=False,
        input_formats=DATETIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL_FORMAT),
        **kwargs,
    )


class ProjectNameForm(forms.Form):
    name = forms.CharField(
        label="Project name", max_length=Project._meta.get_field("name").max_length, strip=True
    )


class NewProjectForm(ProjectNameForm):
    pass


class MemberAddForm(forms.Form):
    user = forms.CharField(
        label="Username or e-mail",
        max_length=254,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "alice or alice@example.com", "size": 30}),
    )
    role = forms.ChoiceField(label="Role", choices=Role.choices, initial=Role.VIEWER)


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(label="Role", choices=Role.choices)


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(
        label="Name",
        max_length=ApiKey._meta.get_field("name").max_length,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "e.g. support-bot production", "size": 31}),
    )
    scope = forms.ChoiceField(
        label="Scope",
        choices=[
            (KeyScope.AGENT, "Agent: sessions, tasks and handoffs"),
            (KeyScope.ADMIN, "Admin: also project settings, retention, holds, webhooks"),
        ],
        initial=KeyScope.AGENT,
    )
    expires_at = _datetime_field(
        "Expires (UTC, optional)", help_text="Leave empty for a key that does not expire."
    )


class AuditFilterForm(forms.Form):
    """The audit log's filters; the URL carries them, so a filtered view can be shared."""

    actor = forms.CharField(
        label="Actor",
        required=False,
        max_length=150,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "user:alice or key:1a2b3c4d", "size": 30}),
    )
    action = forms.CharField(
        label="Action",
        required=False,
        max_length=50,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "e.g. api_key.revoke", "list": "actions"}),
    )
    target_type = forms.CharField(
        label="Target type",
        required=False,
        max_length=50,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "e.g. session", "list": "target-types"}),
    )
    after = _datetime_field("From (UTC)")
    before = _datetime_field("Until (UTC)")
    cursor = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, widget=forms.HiddenInput
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        after, before = cleaned.get("after"), cleaned.get("before")
        if after and before and after >= before:
            raise forms.ValidationError("“From” must be earlier than “Until”.")
        return cleaned

    def to_filters(self) -> AuditFilters:
        data = self.cleaned_data
        return AuditFilters(
            actor=data.get("actor") or "",
            action=data.get("action") or "",
            target_type=data.get("target_type") or "",
            after=data.get("after"),
            before=data.get("before"),
        )

    @property
    def is_filtered(self) -> bool:
        data = self.cleaned_data
        return any(data.get(k) for k in ("actor", "action", "target_type", "after", "before"))


def refused(form: forms.Form, error: InvalidInput | Exception) -> None:
    """Show a service's refusal among the form's errors."""
    form.add_error(None, str(getattr(error, "message", error)))


# The handoff SLA settings, in minutes on the page (seconds in handoffs_app.services.sla, whose
# limits these bounds repeat so the form refuses what the service would).
HANDOFF_SETTING_LABELS = {
    "question_due_seconds": "Question: due after",
    "approval_due_seconds": "Approval: due after",
    "takeover_due_seconds": "Takeover: due after",
    "budget_due_seconds": "Budget: due after",
    "expire_after_overdue_seconds": "Expires when overdue for",
    "lease_seconds": "Lease (a claim lasts, unless renewed)",
}


def handoff_minutes_field(name: str) -> str:
    return name.removesuffix("_seconds") + "_minutes"


class HandoffSettingsForm(forms.Form):
    """Every handoff setting in whole minutes. `changed_seconds()` gives only the fields the
    admin changed, in seconds, so a value not in whole minutes is left as it is."""

    def __init__(self, *args: Any, limits: dict[str, tuple[int, int]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, label in HANDOFF_SETTING_LABELS.items():
            low, high = limits[name]
            self.fields[handoff_minutes_field(name)] = forms.IntegerField(
                label=label,
                min_value=-(-low // 60),
                max_value=high // 60,
                widget=forms.NumberInput(attrs={"class": "minutes"}),
            )

    def changed_seconds(self) -> dict[str, int]:
        return {
            name: self.cleaned_data[handoff_minutes_field(name)] * 60
            for name in HANDOFF_SETTING_LABELS
            if handoff_minutes_field(name) in self.changed_data
        }
