from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    verbose_name = "Coding tasks"

    def ready(self) -> None:
        from sandbox.environments import register_fetcher
        from tasks import suite_columns, sweeps
        from tasks.environments import fetch_environment

        sweeps.connect()
        suite_columns.register()
        # Hosts that did not build an environment fetch it from the object store before installing it.
        register_fetcher(fetch_environment)
