from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Projects and access"

    def ready(self) -> None:
        from . import health, keycache, metrics

        metrics.on_scrape(health.refresh_outbox_backlog)
        keycache.connect_signals()
