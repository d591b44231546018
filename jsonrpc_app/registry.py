"""
The method registry: ``rpc_method``, the ``Method`` description, lookup and
duplicate detection.

``registry`` is the default instance, the one autodiscovery fills and the
default endpoint serves; build your own ``MethodRegistry()`` to serve another
set of methods from another endpoint (and in tests).

Every registry also serves the built-in methods under the reserved ``rpc.``
prefix; the registry knows none of them itself: the module implementing one
hands it to ``MethodRegistry.add_builtin()`` (``rpc.discover`` of
jsonrpc_app.openrpc is added by ``AppConfig.ready()``).
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, TypeVar, overload

from .context import CallContext
from .exceptions import AlreadyRegistered, NotRegistered
from .params import Binder

RESERVED_PREFIX = "rpc."

all_registries: weakref.WeakSet[MethodRegistry] = weakref.WeakSet()

F = TypeVar("F", bound=Callable[..., Any])


class Method:
    """One callable exposed under one name, with everything worked out once."""

    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None = None,
        *,
        log: bool = True,
        sensitive_params: Iterable[str] = (),
        permission_classes: Iterable[type] = (),
        permissions: Iterable[str] = (),
        login_required: bool = False,
        throttle_classes: Iterable[type] = (),
        throttle_scope: str | None = None,
        params_serializer: type | None = None,
        result_serializer: type | None = None,
        errors: Iterable[Any] = (),
        hidden: bool = False,
        enabled: bool = True,
        timeout: float | None = None,
        thread_sensitive: bool | None = None,
        blocking: bool = True,
    ) -> None:
        if not callable(func):
            raise TypeError("%r is not callable" % (func,))
        self.func = func
        # An async def method (or an object whose __call__ is one): awaited on
        # the async endpoint, run in an event loop of its own on the sync one.
        self.is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            getattr(func, "__call__", None)  # noqa: B004 - a callable object's async __call__
        )
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
                raise TypeError("timeout= is a number of seconds above 0, not %r" % (timeout,))
            if not self.is_async:
                raise TypeError(
                    "timeout= applies to async def methods only (%r is not one): a thread running "
                    "a sync function cannot be cancelled" % (func,)
                )
        # Seconds after which a call is cancelled (None: METHOD_TIMEOUT).
        self.timeout = timeout
        # A sync method on the async endpoint: in Django's one sync thread (True),
        # in a thread pool (False), or as SYNC_METHOD_THREAD_SENSITIVE says (None).
        self.thread_sensitive = thread_sensitive
        if not blocking and self.is_async:
            raise TypeError("blocking=False is for sync methods (%r is async def: it is awaited anyway)" % (func,))
        # blocking=False: a sync method that neither waits on I/O nor uses the
        # ORM, which the async endpoint calls on the event loop, without a thread.
        self.blocking = blocking
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
        # What the async endpoint may run on the event loop itself: a non-blocking
        # sync method with no check that may read the database (permissions,
        # throttles, serializers) and nothing else to refuse it with.
        self.runs_on_loop = not (
            blocking or self.is_async or self.guarded or not enabled or params_serializer or result_serializer
        )

    @property
    def qualname(self) -> str:
        """The dotted path of the function, for messages and checks."""
        return "%s.%s" % (
            getattr(self.func, "__module__", "?"),
            getattr(self.func, "__qualname__", repr(self.func)),
        )

    @property
    def summary(self) -> str:
        """The first line of the docstring."""
        return self.doc.split("\n", 1)[0] if self.doc else ""

    @property
    def client_signature(self) -> str:
        """The signature as a client sees it: ``(minuend: int, subtrahend: int) -> int``, no CallContext."""
        params = [p for p in self.signature.parameters.values() if p.name != self.binder.context_name]
        try:
            return str(self.signature.replace(parameters=params))
        except (TypeError, ValueError):
            return "(...)"

    @property
    def app_label(self) -> str | None:
        """The label of the installed app whose module defines the function."""
        from django.apps import apps

        config = apps.get_containing_app_config(getattr(self.func, "__module__", ""))
        return config.label if config else None

    @property
    def requires_authentication(self) -> bool:
        return bool(self.login_required or self.permissions or self.permission_classes)

    def __repr__(self) -> str:
        return "<Method %s -> %s>" % (self.name, self.qualname)


class MethodRegistry:
    """A set of methods served together, looked up by name."""

    # The methods every registry serves under reserved names, by name.
    builtins: ClassVar[dict[str, Method]] = {}

    def __init__(self, name: str = "default") -> None:
        self.name = name
        self._registry: dict[str, Method] = dict(self.builtins)
        # The names of the async def methods: the sync executor looks for them
        # in a batch only when there are some.
        self.async_names = {m.name for m in self._registry.values() if m.is_async}
        all_registries.add(self)

    @classmethod
    def add_builtin(cls, method: Method) -> None:
        """Serve ``method`` (named ``rpc.*``) from every registry, those built so far and later."""
        if not method.name.startswith(RESERVED_PREFIX):
            raise ValueError("A built-in method's name begins with %r, not %r." % (RESERVED_PREFIX, method.name))
        cls.builtins[method.name] = method
        for registry in list(all_registries):
            registry._put(method)

    def register(self, func: Callable[..., Any] | Method, name: str | None = None, **options: Any) -> Method:
        """
        Register ``func`` (a callable or a Method) and return its Method.

        Raise AlreadyRegistered when ``name`` is taken by another function
        (the same function registered again, as a module imported twice
        does, replaces itself), ValueError for a reserved ``rpc.`` name.
        """
        method = func if isinstance(func, Method) else Method(func, name, **options)
        if method.name.startswith(RESERVED_PREFIX):
            raise ValueError(
                "Method name %r is reserved: names beginning with %r belong to "
                "jsonrpc_app itself." % (method.name, RESERVED_PREFIX)
            )
        existing = self._registry.get(method.name)
        if existing is not None and existing.qualname != method.qualname:
            raise AlreadyRegistered(
                "Method %r of registry %r is registered by %s and again by %s; give one of "
                "them another name with @rpc_method(name=...)."
                % (method.name, self.name, existing.qualname, method.qualname)
            )
        self._put(method)
        return method

    def _put(self, method: Method) -> None:
        self._registry[method.name] = method
        if method.is_async:
            self.async_names.add(method.name)
        else:
            self.async_names.discard(method.name)

    @property
    def async_count(self) -> int:
        """How many of the methods are async def."""
        return len(self.async_names)

    def unregister(self, name: str) -> None:
        try:
            self._registry.pop(name)
        except KeyError:
            raise NotRegistered("No method named %r is registered." % name) from None
        self.async_names.discard(name)

    def get(self, name: str) -> Method | None:
        """Return the Method called ``name``, or None."""
        return self._registry.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._registry

    def __iter__(self) -> Iterator[Method]:
        return iter(sorted(self._registry.values(), key=lambda m: m.name))

    def __len__(self) -> int:
        return len(self._registry)

    def __repr__(self) -> str:
        return "<MethodRegistry %s: %d methods>" % (self.name, len(self._registry))


registry = MethodRegistry()


@overload
def rpc_method(func: F) -> F: ...


@overload
def rpc_method(
    func: None = None, *, name: str | None = None, registry: MethodRegistry | None = None, **options: Any
) -> Callable[[F], F]: ...


def rpc_method(func=None, *, name=None, registry=None, **options):
    """
    Expose a function as a JSON-RPC method; return the function unchanged.

    Use bare (``@rpc_method``: the method takes the function's name) or with
    options (``@rpc_method(name="math.add", log=False)``), which are those of
    ``Method``. Raise AlreadyRegistered when the name is taken.
    """
    target = registry if registry is not None else globals()["registry"]

    def decorator(f):
        f.rpc_method = target.register(f, name, **options)
        return f

    if func is not None:
        return decorator(func)
    return decorator


def registry_named(name: str) -> MethodRegistry:
    """
    Return the registry called ``name`` (the default one for its own name).

    Raise LookupError, naming the registries there are, when none or several
    are called ``name``.
    """
    default = globals()["registry"]
    if name == default.name:
        return default
    found = [r for r in list(all_registries) if r.name == name]
    if len(found) == 1:
        return found[0]
    known = ", ".join(sorted({r.name for r in list(all_registries)}))
    if found:
        raise LookupError("%d registries are named %r; known names: %s." % (len(found), name, known))
    raise LookupError("No registry is named %r; known names: %s." % (name, known))
