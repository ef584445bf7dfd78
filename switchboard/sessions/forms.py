"""Dashboard input: GET filters and POST actions, parsed by forms (invalid → 400, nothing done)."""

from datetime import timedelta
from typing import Any

from django import forms
from django.utils import timezone

from core.errors import InvalidInput
from core.models import Project
from sessions_app.models import Agent, EventKind, Session, SessionStatus, Tier
from sessions_app.queries import DEFAULT_SESSION_SORT, decode_sort_cursor
from switchboard.sessions.queries import SessionListFilters

LOCAL_FORMAT = "%Y-%m-%dT%H:%M"  # what <input type="datetime-local"> sends (UTC here)
DATETIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"]

ACTIVE_WITHIN = {
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}

SORT_CHOICES = [
    ("-created", "Newest first"),
    ("created", "Oldest first"),
    ("-updated", "Recently active"),
    ("updated", "Least recently active"),
]


class SessionFilterForm(forms.Form):
    """The sessions list's filters; the URL carries them, so a filtered view can be shared."""

    q = forms.CharField(
        label="Search events",
        required=False,
        max_length=200,
        strip=True,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "Words in messages"}),
    )
    status = forms.MultipleChoiceField(
        label="Status",
        required=False,
        choices=SessionStatus.choices,
        widget=forms.CheckboxSelectMultiple,
    )
    agent = forms.ChoiceField(label="Agent", required=False)
    tag = forms.CharField(
        label="Tag",
        required=False,
        max_length=200,
        strip=True,
        widget=forms.TextInput(attrs={"placeholder": "key or key=value"}),
        help_text='A metadata key ("customer"), or key=value ("customer=cust-101").',
    )
    has_task = forms.ChoiceField(
        label="Linked task",
        required=False,
        choices=[("", "Any"), ("yes", "With a task"), ("no", "Without a task")],
    )
    has_handoff = forms.ChoiceField(
        label="Handoff",
        required=False,
        choices=[("", "Any"), ("yes", "Waiting on a person"), ("no", "No pending handoff")],
    )
    active = forms.ChoiceField(
        label="Active within",
        required=False,
        choices=[
            ("", "Any time"),
            ("1h", "Last hour"),
            ("24h", "Last 24 hours"),
            ("7d", "Last 7 days"),
            ("30d", "Last 30 days"),
        ],
    )
    created_after = forms.DateTimeField(
        label="Created from",
        required=False,
        input_formats=DATETIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL_FORMAT),
    )
    created_before = forms.DateTimeField(
        label="Created before",
        required=False,
        input_formats=DATETIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL_FORMAT),
    )
    sort = forms.ChoiceField(label="Sort", required=False, choices=SORT_CHOICES)
    cursor = forms.CharField(required=False, max_length=500)

    def __init__(self, project: Project, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.project = project
        names = (
            Agent.objects.filter(project=project).order_by("name").values_list("name", flat=True)
        )
        self.fields["agent"].choices = [("", "Any agent"), *((n, n) for n in names)]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        after, before = data.get("created_after"), data.get("created_before")
        if after and before and after >= before:
            self.add_error("created_before", "must be later than “Created from”.")
        tag = data.get("tag") or ""
        if tag.startswith("="):
            self.add_error("tag", "needs a key before the “=”.")
        data["sort"] = data.get("sort") or DEFAULT_SESSION_SORT
        if data.get("cursor"):
            try:
                decode_sort_cursor(data["cursor"], data["sort"])
            except InvalidInput as error:
                self.add_error("cursor", error.message)
        return data

    def to_filters(self) -> SessionListFilters:
        data = self.cleaned_data
        key, has_value, value = (data.get("tag") or "").partition("=")
        active = ACTIVE_WITHIN.get(data.get("active") or "")
        has_task = {"yes": True, "no": False}.get(data.get("has_task") or "")
        has_handoff = {"yes": True, "no": False}.get(data.get("has_handoff") or "")
        return SessionListFilters(
            status=data.get("status") or None,
            agent=data.get("agent") or None,
            q=data.get("q") or None,
            created_after=data.get("created_after"),
            created_before=data.get("created_before"),
            updated_after=timezone.now() - active if active else None,
            metadata_key=key.strip() or None,
            metadata_value=value.strip() if has_value else None,
            has_task=has_task,
            has_handoff=has_handoff,
        )

    @property
    def is_filtered(self) -> bool:
        data = self.cleaned_data
        return any(
            data.get(name)
            for name in (
                "q",
                "status",
                "agent",
                "tag",
                "has_task",
                "has_handoff",
                "active",
                "created_after",
                "created_before",
            )
        )


class EventLogForm(forms.Form):
    """How the session page slices the event log (the moment shown is MomentForm's)."""

    order = forms.ChoiceField(
        label="Order",
        required=False,
        choices=[("desc", "Newest first"), ("asc", "Oldest first")],
    )
    kind = forms.MultipleChoiceField(
        label="Kind",
        required=False,
        choices=EventKind.choices,
        widget=forms.CheckboxSelectMultiple,
    )
    tier = forms.ChoiceField(
        label="Tier", required=False, choices=[("", "Any tier"), *Tier.choices]
    )
    seq = forms.IntegerField(label="Jump to seq", required=False, min_value=1)
    after_seq = forms.IntegerField(required=False, min_value=0)
    before_seq = forms.IntegerField(required=False, min_value=1)
    until = forms.IntegerField(required=False, min_value=0)

    def __init__(self, session: Session, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session = session

    def clean_seq(self) -> int | None:
        seq = self.cleaned_data.get("seq")
        if seq is not None and seq > self.session.head_seq:
            raise forms.ValidationError(
                f"This session has {self.session.head_seq} events; pick a seq from 1 to "
                f"{self.session.head_seq}."
                if self.session.head_seq
                else "This session has no events yet."
            )
        return seq


def _seq_in_range(session: Session, seq: int | None) -> int | None:
    if seq is not None and seq > session.head_seq:
        raise forms.ValidationError(
            f"This session has {session.head_seq} events: pick a seq from 0 to "
            f"{session.head_seq} (the head)."
        )
    return seq


SEQ_ERRORS = {
    "invalid": "Enter a seq as a whole number, such as 12.",
    "min_value": "A seq is 0 or more.",
}


class MomentForm(forms.Form):
    """The session page's moment (time travel): `?at=<seq>` pins the whole page to that seq.

    Absent: the page is live. `at_seq` (the inspector's older parameter) is read the same.
    """

    at = forms.IntegerField(
        label="Time travel to seq", required=False, min_value=0, error_messages=SEQ_ERRORS
    )

    def __init__(self, session: Session, data: Any, *args: Any, **kwargs: Any) -> None:
        if data is not None and "at" not in data and "at_seq" in data:
            data = {"at": data.get("at_seq")}
        super().__init__(data, *args, **kwargs)
        self.session = session

    def clean_at(self) -> int | None:
        return _seq_in_range(self.session, self.cleaned_data.get("at"))


class InspectorForm(forms.Form):
    at_seq = forms.IntegerField(
        label="Inspect at seq", required=False, min_value=0, error_messages=SEQ_ERRORS
    )

    def __init__(self, session: Session, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session = session

    def clean_at_seq(self) -> int | None:
        return _seq_in_range(self.session, self.cleaned_data.get("at_seq"))


class ArtifactForm(forms.Form):
    """Which version of an artifact the download view sends, and how."""

    version = forms.IntegerField(required=False, min_value=1, max_value=2**31 - 1)
    at = forms.IntegerField(required=False, min_value=0, error_messages=SEQ_ERRORS)
    inline = forms.BooleanField(required=False)

    def __init__(self, session: Session, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session = session

    def clean_at(self) -> int | None:
        return _seq_in_range(self.session, self.cleaned_data.get("at"))


class ReasonForm(forms.Form):
    reason = forms.CharField(label="Reason", required=False, max_length=1000, strip=True)


class DeleteSessionForm(forms.Form):
    with_forks = forms.BooleanField(label="And its forks", required=False)


class ForkForm(forms.Form):
    at_seq = forms.IntegerField(label="Fork at seq", min_value=0)
    title = forms.CharField(label="Title", required=False, max_length=300, strip=True)

    def __init__(self, session: Session, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session = session

    def clean_at_seq(self) -> int:
        at_seq = self.cleaned_data["at_seq"]
        if at_seq > self.session.head_seq:
            raise forms.ValidationError(f"Pick a seq from 0 to {self.session.head_seq} (the head).")
        return at_seq
