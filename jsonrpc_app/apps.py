from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SimpleJsonRpcConfig(AppConfig):
    """jsonrpc_app without autodiscovery: register methods from modules you import."""

    name = "jsonrpc_app"
    verbose_name = _("JSON-RPC")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.core.signals import setting_changed

        from . import checks  # noqa: F401 -- registers the system checks
        from . import log
        from .conf import reload_jsonrpc_settings
        from .openrpc import discover_method
        from .registry import MethodRegistry

        setting_changed.connect(reload_jsonrpc_settings, dispatch_uid="jsonrpc_app.conf.reload")
        # Every registry answers rpc.discover with its OpenRPC document.
        MethodRegistry.add_builtin(discover_method())
        # The call log's request_finished receiver and exit flush.
        log.install()


class JsonRpcConfig(SimpleJsonRpcConfig):
    """The default: also import every installed app's ``rpc_methods`` module."""

    default = True

    def ready(self):
        super().ready()
        self.module.autodiscover()
