from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Sessions"

    def ready(self) -> None:
        from core import metrics

        from . import metrics as session_metrics

        metrics.on_scrape(session_metrics.refresh)
