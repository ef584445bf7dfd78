"""The handoff digest page's input: where the digest goes and how often. The service
(handoffs_app.services.digest) checks every value again, for every other caller."""

import re
from typing import Any

from django import forms

from handoffs_app.models import HandoffSettings
from handoffs_app.services.digest import INTERVALS

_SEPARATORS = re.compile(r"[\s,;]+")


class DigestForm(forms.Form):
    emails = forms.CharField(
        label="E-mail addresses",
        required=False,
        max_length=5000,
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "ops@example.com, oncall@example.com"}
        ),
        help_text="One per line, or separated by commas.",
    )
    chat_url = forms.CharField(
        label="Chat webhook URL",
        required=False,
        max_length=2000,
        strip=True,
        widget=forms.TextInput(
            attrs={"type": "url", "placeholder": "https://hooks.slack.com/services/…"}
        ),
        help_text='A Slack-compatible incoming webhook: Switchboard POSTs {"text": …} to it.',
    )
    interval = forms.TypedChoiceField(
        label="Send",
        choices=list(INTERVALS.items()),
        coerce=int,
        initial=0,
    )

    @classmethod
    def for_settings(cls, row: HandoffSettings, data: Any = None) -> "DigestForm":
        initial = {
            "emails": "\n".join(row.digest_emails),
            "chat_url": row.digest_chat_url,
            "interval": row.digest_interval_seconds,
        }
        return cls(data, initial=initial)

    def email_list(self) -> list[str]:
        return [a for a in _SEPARATORS.split(self.cleaned_data["emails"]) if a]
