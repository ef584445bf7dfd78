from django.apps import AppConfig


class RetentionAppConfig(AppConfig):
    name = "retention_app"
    verbose_name = "Retention"

    def ready(self) -> None:
        from sessions_app.access import explain_missing_sessions_with

        from .erasure_queries import erased_session

        # Reads of an erased session answer 410 `erased` naming the receipt, not 404.
        explain_missing_sessions_with(erased_session)
