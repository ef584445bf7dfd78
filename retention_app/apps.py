from django.apps import AppConfig


class RetentionAppConfig(AppConfig):
    name = "retention_app"
    verbose_name = "Retention"
