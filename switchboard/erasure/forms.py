"""The erasure page's form: the selectors that name a data subject (retention_app.services.
erasure checks them; this only gathers them from the page's fields)."""

import json
from typing import Any

from django import forms

TEXT = {"max_length": 200, "required": False}


class SubjectForm(forms.Form):
    metadata_key = forms.CharField(label="Metadata key", **TEXT)  # type: ignore[arg-type]
    metadata_value = forms.CharField(label="Metadata value", **TEXT)  # type: ignore[arg-type]
    external_id = forms.CharField(label="External id", **TEXT)  # type: ignore[arg-type]
    external_id_prefix = forms.CharField(label="External id prefix", **TEXT)  # type: ignore[arg-type]
    agent = forms.CharField(label="Only sessions of agent", **TEXT)  # type: ignore[arg-type]
    fact_key = forms.CharField(label="Fact key", **TEXT)  # type: ignore[arg-type]
    fact_value = forms.CharField(
        label="Fact value",
        help_text="A number, true or false is matched as that JSON value; anything else as text.",
        **TEXT,  # type: ignore[arg-type]
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for a, b in (("metadata_key", "metadata_value"), ("fact_key", "fact_value")):
            if bool(data.get(a)) != bool(data.get(b)):
                self.add_error(b if data.get(a) else a, "Give both the key and the value.")
        return data

    def selectors(self) -> dict[str, Any]:
        """The selectors as the service and POST /erasures take them."""
        data = self.cleaned_data
        selectors: dict[str, Any] = {
            name: data[name]
            for name in ("external_id", "external_id_prefix", "agent")
            if data.get(name)
        }
        if data.get("metadata_key"):
            selectors["metadata"] = {"key": data["metadata_key"], "value": data["metadata_value"]}
        if data.get("fact_key"):
            selectors["fact"] = {"key": data["fact_key"], "value": _fact_value(data["fact_value"])}
        return selectors


def _fact_value(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, int | float | bool) else text
