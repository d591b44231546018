"""
What the admin's pages share: JSON shown indented, the replay permission, and
the mixin of the pages that run calls (the method browser's Try-it, replay).
"""

import json

from django.urls import NoReverseMatch, path, reverse

from .. import log, protocol, service
from ..context import CallContext
from ..models import Envelope

REPLAY_PERMISSION = "replay_envelope"


def compact(value):
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def pretty(value):
    """Return ``value`` as indented JSON text."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def pretty_body(body):
    """Return a logged JSON body indented, or as it is when it is not JSON."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        return pretty(protocol.loads(body))
    except ValueError:
        return body



def admin_url(admin_site, model, name, *args):
    """Return the URL of an admin view of ``model``, or None if it is not in this site."""
    if not admin_site.is_registered(model):
        return None
    opts = model._meta
    try:
        return reverse(
            "%s:%s_%s_%s" % (admin_site.name, opts.app_label, opts.model_name, name),
            args=args,
        )
    except NoReverseMatch:
        return None


def has_replay_permission(request):
    opts = Envelope._meta
    return request.user.has_perm("%s.%s" % (opts.app_label, REPLAY_PERMISSION))


class NothingToEditMixin:
    """A ModelAdmin over rows nobody adds, changes or deletes from the admin (the methods, the rollups)."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class RegistryAdminMixin:
    """
    What the method browser and envelope replay share: the registry they run
    (``registry``, else the default one), the replay permission, and URL
    patterns wrapped and named as the admin's own.
    """

    registry = None

    def get_registry(self):
        if self.registry is None:
            from ..registry import registry

            return registry
        return self.registry

    def has_replay_permission(self, request):
        return has_replay_permission(request)

    def answer_as_admin(self, request, body, source, endpoint, replay_of=None):
        """Answer ``body`` through the endpoint's path as the logged-in admin user."""
        context = CallContext(
            request=request,
            user=request.user,
            source=source,
            registry=self.get_registry(),
            endpoint=endpoint,
            replay_of=replay_of,
            log=log.is_on(),
        )
        return service.answer(
            body,
            context,
            remote_addr=request.META.get("REMOTE_ADDR"),
            user_agent=request.META.get("HTTP_USER_AGENT", ""),
        )

    def _admin_paths(self, *routes):
        """Return a path() per (route, view, name) behind admin_view(), named <app>_<model>_<name>."""
        prefix = "%s_%s_" % (self.opts.app_label, self.opts.model_name)
        wrap = self.admin_site.admin_view
        return [path(route, wrap(view), name=prefix + name) for route, view, name in routes]
