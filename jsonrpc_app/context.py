"""
The caller of a call: who (user, auth), from where (HTTP request, admin,
replay, CLI) and against which registry.

A method receives it by declaring a parameter annotated with
``CallContext``; clients can never fill that parameter from params.
"""


class CallContext:
    """What a method and the dispatcher know about the caller of one envelope."""

    __slots__ = ("request", "_user", "auth", "source", "registry", "endpoint", "replay_of", "log")

    def __init__(
        self,
        request=None,
        user=None,
        source="http",
        registry=None,
        endpoint="",
        auth=None,
        replay_of=None,
        log=True,
    ):
        # request: the DRF Request over HTTP, the admin's HttpRequest, or None (CLI).
        self.request = request
        self._user = user
        self.auth = auth
        self.source = source
        if registry is None:
            from .registry import registry as default_registry

            registry = default_registry
        self.registry = registry
        self.endpoint = endpoint
        self.replay_of = replay_of
        self.log = log

    @property
    def user(self):
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
    def user(self, value):
        self._user = value
