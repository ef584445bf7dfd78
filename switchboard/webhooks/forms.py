"""The webhooks page's input: a new endpoint, and switching one on or off."""

from django import forms
from django.conf import settings

from core.webhooks import EVENTS as WEBHOOK_EVENTS
from core.webhooks import Target, TargetRefused, check_target


class WebhookEndpointForm(forms.Form):
    """A new webhook endpoint: where to POST and which events. The URL is checked here by the
    check every delivery makes (core.webhooks.check_target), so a refusal is a message on the
    field; core.services.webhooks checks it again, for every other caller."""

    target: Target | None = None

    url = forms.CharField(
        label="URL",
        max_length=2000,
        strip=True,
        widget=forms.TextInput(
            attrs={"type": "url", "placeholder": "https://example.com/switchboard-hooks"}
        ),
    )
    events = forms.MultipleChoiceField(
        label="Events",
        choices=[(name, f"{name} — {what}") for name, what in WEBHOOK_EVENTS.items()],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one event."},
    )

    def clean_url(self) -> str:
        allow_private = settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS
        try:
            self.target = check_target(self.cleaned_data["url"], allow_private=allow_private)
        except TargetRefused as refused:
            raise forms.ValidationError(str(refused)) from None
        return self.target.url

    def unresolved_host(self) -> str | None:
        """The host when it did not resolve just now (saved all the same, as a delivery would
        try it: see check_target), for the page to say so."""
        allow_private = settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS
        if self.target is None or allow_private or self.target.addresses:
            return None
        return self.target.host


class WebhookToggleForm(forms.Form):
    active = forms.TypedChoiceField(
        label="Active",
        choices=[("true", "Enable"), ("false", "Disable")],
        coerce=lambda value: value == "true",
    )
