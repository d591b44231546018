from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SimpleJsonRpcConfig(AppConfig):
    """jsonrpc_app without autodiscovery: register methods from modules you import."""

    name = "jsonrpc_app"
    verbose_name = _("JSON-RPC")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks  # noqa: F401 -- registers the system checks
        from . import log

        log.install()


class JsonRpcConfig(SimpleJsonRpcConfig):
    """The default: also import every installed app's ``rpc_methods`` module."""

    default = True

    def ready(self):
        super().ready()
        self.module.autodiscover()
