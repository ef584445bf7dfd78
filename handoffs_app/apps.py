from django.apps import AppConfig


class HandoffsAppConfig(AppConfig):
    name = "handoffs_app"
    verbose_name = "Handoffs"

    def ready(self) -> None:
        # The session store pauses a session whose budget runs out and says so with a signal
        # (it cannot import this app); a `budget` handoff opens in that same transaction.
        from sessions_app.signals import budget_exceeded

        from .services.budget import open_budget_handoff_on_overrun

        budget_exceeded.connect(
            open_budget_handoff_on_overrun, dispatch_uid="handoffs_app.budget_handoff"
        )
