"""
The caller of a call: who (user, auth), from where (HTTP request, admin,
replay, CLI) and against which registry.

A method receives it by declaring a parameter annotated with
``CallContext``; clients can never fill that parameter from params.

The caller hands over the registry to serve (the endpoint its own); a
context built without one is served by the default registry, which
``dispatch.execute()`` fills in.
"""

from __future__ import annotations

from typing import Any


class CallContext:
    """What a method and the dispatcher know about the caller of one envelope."""

    __slots__ = ("request", "_user", "auth", "source", "registry", "endpoint", "replay_of", "log")

    def __init__(
        self,
        request: Any = None,
        user: Any = None,
        source: str = "http",
        # The MethodRegistry to serve (None: the default). Typed Any: the
        # registry imports this module, never the other way round.
        registry: Any = None,
        endpoint: str = "",
        auth: Any = None,
        replay_of: Any = None,
        log: bool = True,
    ) -> None:
        # request: the DRF Request over HTTP, the admin's HttpRequest, or None (CLI).
        self.request = request
        self._user = user
        self.auth = auth
        self.source = source
        self.registry = registry
        self.endpoint = endpoint
        self.replay_of = replay_of
        self.log = log

    @property
    def user(self) -> Any:
        """The authenticated user, or AnonymousUser; read lazily from the request."""
        if self._user is None:
            request = self.request
            if request is not None and hasattr(request, "user"):
                self._user = request.user
            else:
                from django.contrib.auth.models import AnonymousUser

                self._user = AnonymousUser()
        return self._user

    @user.setter
    def user(self, value: Any) -> None:
        self._user = value
