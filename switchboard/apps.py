from django.apps import AppConfig


class SwitchboardConfig(AppConfig):
    """The composing app: the dashboard and API surfaces that show several apps at once."""

    name = "switchboard"
    verbose_name = "Switchboard"
