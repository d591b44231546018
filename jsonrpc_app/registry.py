"""
The method registry: ``rpc_method``, the ``Method`` description, lookup and
duplicate detection.

``registry`` is the default instance, the one autodiscovery fills and the
default endpoint serves; build your own ``MethodRegistry()`` to serve another
set of methods from another endpoint (and in tests).
"""

import inspect
import weakref

from .context import CallContext
from .exceptions import AlreadyRegistered, NotRegistered
from .params import Binder

RESERVED_PREFIX = "rpc."

all_registries = weakref.WeakSet()


class Method:
    """One callable exposed under one name, with everything worked out once."""

    def __init__(
        self,
        func,
        name=None,
        *,
        log=True,
        sensitive_params=(),
        permission_classes=(),
        permissions=(),
        login_required=False,
        throttle_classes=(),
        throttle_scope=None,
        params_serializer=None,
        result_serializer=None,
        errors=(),
        hidden=False,
        enabled=True,
    ):
        if not callable(func):
            raise TypeError("%r is not callable" % (func,))
        self.func = func
        self.name = name or func.__name__
        if not isinstance(self.name, str) or not self.name:
            raise TypeError("A method name must be a non-empty string, not %r" % (self.name,))
        self.log = log
        self.sensitive_params = frozenset(sensitive_params)
        self.permission_classes = tuple(permission_classes)
        self.permissions = tuple(permissions)
        self.login_required = login_required
        self.throttle_classes = tuple(throttle_classes)
        # Read by DRF's ScopedRateThrottle (as a view's throttle_scope is).
        self.throttle_scope = throttle_scope
        self.params_serializer = params_serializer
        self.result_serializer = result_serializer
        self.errors = tuple(errors)
        # hidden: callable, but left out of rpc.discover and, for users who
        # are not superusers, of the admin's method browser.
        self.hidden = hidden
        # enabled=False: still registered (left out of rpc.discover), but every call is
        # answered -32004 Method disabled.
        self.enabled = enabled
        self.binder = Binder(func, context_type=CallContext, params_serializer=params_serializer)
        self.signature = self.binder.signature
        self.doc = inspect.cleandoc(func.__doc__ or "")
        # Anything to check before the call beyond binding params.
        self.guarded = bool(
            self.permission_classes or self.permissions or self.login_required or self.throttle_classes
        )

    @property
    def qualname(self):
        """The dotted path of the function, for messages and checks."""
        return "%s.%s" % (
            getattr(self.func, "__module__", "?"),
            getattr(self.func, "__qualname__", repr(self.func)),
        )

    @property
    def summary(self):
        """The first line of the docstring."""
        return self.doc.split("\n", 1)[0] if self.doc else ""

    @property
    def app_label(self):
        """The label of the installed app whose module defines the function."""
        from django.apps import apps

        config = apps.get_containing_app_config(getattr(self.func, "__module__", ""))
        return config.label if config else None

    @property
    def requires_authentication(self):
        return bool(self.login_required or self.permissions or self.permission_classes)

    def __repr__(self):
        return "<Method %s -> %s>" % (self.name, self.qualname)


class MethodRegistry:
    """A set of methods served together, looked up by name."""

    def __init__(self, name="default"):
        self.name = name
        self._registry = {}
        # (name, method already registered, method refused): reported by checks.
        self.conflicts = []
        all_registries.add(self)
        # Every registry answers the reserved rpc.discover (its OpenRPC document).
        from .openrpc import discover_method

        self.register(discover_method(), reserved_ok=True)

    def register(self, func, name=None, *, reserved_ok=False, **options):
        """Register ``func`` (a callable or a Method) and return its Method."""
        method = func if isinstance(func, Method) else Method(func, name, **options)
        if method.name.startswith(RESERVED_PREFIX) and not reserved_ok:
            raise ValueError(
                "Method name %r is reserved: names beginning with %r belong to "
                "jsonrpc_app itself." % (method.name, RESERVED_PREFIX)
            )
        existing = self._registry.get(method.name)
        if existing is not None:
            if existing.qualname == method.qualname:
                # The same function registered again (a module imported twice).
                self._registry[method.name] = method
                return method
            self.conflicts.append((method.name, existing, method))
            return existing
        self._registry[method.name] = method
        return method

    def unregister(self, name):
        try:
            del self._registry[name]
        except KeyError:
            raise NotRegistered("No method named %r is registered." % name) from None

    def get(self, name):
        """Return the Method called ``name``, or None."""
        return self._registry.get(name)

    def __contains__(self, name):
        return name in self._registry

    def __iter__(self):
        return iter(sorted(self._registry.values(), key=lambda m: m.name))

    def __len__(self):
        return len(self._registry)

    def check_unique(self):
        """Raise AlreadyRegistered for the first conflict seen, if any."""
        if self.conflicts:
            name, existing, refused = self.conflicts[0]
            raise AlreadyRegistered(
                "Method %r is registered by %s and again by %s."
                % (name, existing.qualname, refused.qualname)
            )

    def __repr__(self):
        return "<MethodRegistry %s: %d methods>" % (self.name, len(self._registry))


registry = MethodRegistry()


def rpc_method(func=None, *, name=None, registry=None, **options):
    """
    Expose a function as a JSON-RPC method; return the function unchanged.

    Use bare (``@rpc_method``: the method takes the function's name) or with
    options (``@rpc_method(name="math.add", log=False)``).
    """
    target = registry if registry is not None else globals()["registry"]

    def decorator(f):
        method = target.register(f, name, **options)
        if method.func is f:
            f.rpc_method = method
        return f

    if func is not None:
        return decorator(func)
    return decorator
