from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Projects and access"

    def ready(self) -> None:
        from django.core.signals import request_finished, request_started

        from . import domain_events, health, keycache, metrics

        metrics.on_scrape(health.refresh_outbox_backlog)
        keycache.connect_signals()
        request_started.connect(domain_events.defer_relays, dispatch_uid="core.defer_relays")
        request_finished.connect(domain_events.relay_deferred, dispatch_uid="core.relay_deferred")
