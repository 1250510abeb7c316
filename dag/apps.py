from django.apps import AppConfig


class DagConfig(AppConfig):
    name = "dag"
    verbose_name = "Session DAG"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401 (registers the system checks)
        from .accounts import tokens  # noqa: F401 (logging out revokes API tokens)
        from .accounts import deactivation  # noqa: F401 (deactivating a user stops their runs)
        from .live import login_check  # noqa: F401 (logging out closes the session's live sockets)
        from .conf import conf
        if conf.OTLP_ENDPOINT:  # only then: the OpenTelemetry SDK takes 0.15 s to import
            from .telemetry.export import start_from_settings
            start_from_settings()
