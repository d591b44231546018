"""System checks of jsonrpc_app (IDs jsonrpc_app.E00x / W00x)."""

from django.conf import settings
from django.core.checks import Error, Tags, register

from .conf import DEFAULTS
from .registry import all_registries

LOG_POLICIES = ("all", "errors", "none")


@register(Tags.compatibility)
def check_settings(app_configs=None, **kwargs):
    errors = []
    user_settings = getattr(settings, "JSONRPC", None)
    if user_settings is None:
        return errors
    if not isinstance(user_settings, dict):
        return [
            Error(
                "The JSONRPC setting must be a dict.",
                hint="Set JSONRPC = {...} with the keys documented in the README.",
                id="jsonrpc_app.E003",
            )
        ]
    for key in sorted(set(user_settings) - set(DEFAULTS)):
        errors.append(
            Error(
                "JSONRPC has an unknown key %r." % key,
                hint="Known keys: %s." % ", ".join(sorted(DEFAULTS)),
                obj=key,
                id="jsonrpc_app.E001",
            )
        )
    policy = user_settings.get("LOG_POLICY", DEFAULTS["LOG_POLICY"])
    if policy not in LOG_POLICIES:
        errors.append(
            Error(
                "JSONRPC['LOG_POLICY'] must be one of %s, not %r." % (", ".join(LOG_POLICIES), policy),
                id="jsonrpc_app.E004",
            )
        )
    return errors


@register(Tags.compatibility)
def check_method_names(app_configs=None, **kwargs):
    errors = []
    for registry in list(all_registries):
        for name, existing, refused in registry.conflicts:
            errors.append(
                Error(
                    "JSON-RPC method name %r is registered twice in registry %r: by %s and by %s."
                    % (name, registry.name, existing.qualname, refused.qualname),
                    hint="Give one of them another name with @rpc_method(name=...).",
                    obj=refused.func,
                    id="jsonrpc_app.E002",
                )
            )
    return errors
