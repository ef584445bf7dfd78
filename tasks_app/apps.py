from django.apps import AppConfig


class TasksAppConfig(AppConfig):
    name = "tasks_app"
    verbose_name = "Tasks"

    def ready(self) -> None:
        from core.domain_events import react_to
        from sessions_app.domain_events import SessionOpened
        from tasks_app.services.links import keep_parents_task_links

        react_to(SessionOpened.type, keep_parents_task_links)
