"""Dashboard input for the task pages: GET filters parsed by forms (invalid → 400, nothing done)."""

from typing import Any

from django import forms

from core.cursors import decode_cursor

from .errors import InvalidInput
from .models import HistoryKind, StepStatus, Task
from .queries import TaskFilters, WorkflowChoices


class TaskFilterForm(forms.Form):
    """The tasks list's filters; the URL carries them, so a filtered view can be shared."""

    workflow = forms.ChoiceField(label="Workflow", required=False)
    state = forms.MultipleChoiceField(
        label="State", required=False, widget=forms.CheckboxSelectMultiple
    )
    step_status = forms.MultipleChoiceField(
        label="A step is",
        required=False,
        choices=StepStatus.choices,
        widget=forms.CheckboxSelectMultiple,
    )
    session = forms.UUIDField(
        label="Linked session",
        required=False,
        widget=forms.TextInput(
            attrs={
                "placeholder": "Session id",
                "size": 36,
                "spellcheck": "false",
                "autocomplete": "off",
            }
        ),
        error_messages={"invalid": "Enter a session id (a UUID, as in /sessions/<id>/)."},
    )
    cursor = forms.CharField(required=False, max_length=500)

    def __init__(self, choices: WorkflowChoices, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["workflow"].choices = [("", "Any workflow"), *choices.names]
        self.fields["state"].choices = [(s, s) for s in choices.states]

    def clean_cursor(self) -> str:
        cursor = self.cleaned_data.get("cursor") or ""
        if cursor:
            try:
                decode_cursor(cursor)
            except InvalidInput:
                raise forms.ValidationError(
                    "This page link is not one this server made; start from the first page."
                ) from None
        return cursor

    def to_filters(self) -> TaskFilters:
        data = self.cleaned_data
        return TaskFilters(
            workflow=data.get("workflow") or None,
            state=data.get("state") or None,
            step_status=data.get("step_status") or None,
            session=data.get("session"),
        )

    @property
    def is_filtered(self) -> bool:
        return any(
            self.cleaned_data.get(name) for name in ("workflow", "state", "step_status", "session")
        )


class TaskHistoryForm(forms.Form):
    """Which part of a task's history the task page shows."""

    step = forms.ChoiceField(label="Step", required=False)
    kind = forms.ChoiceField(
        label="Kind", required=False, choices=[("", "Everything"), *HistoryKind.choices]
    )
    before = forms.IntegerField(required=False, min_value=1)  # keyset cursor: older than this id

    def __init__(self, task: Task, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["step"].choices = [
            ("", "Every step"),
            *((s.key, s.title or s.key) for s in task.spec.steps),
        ]

    @property
    def filter_params(self) -> dict[str, str]:
        data = self.cleaned_data if self.is_bound and hasattr(self, "cleaned_data") else {}
        return {name: data[name] for name in ("step", "kind") if data.get(name)}
