"""
The method browser: the index of every method of a registry, grouped by app,
with usage from the rollups, and one page per method with its documentation,
recent calls and the Try-it form (``tryit``).
"""

import inspect
import re
from urllib.parse import urlencode

from django.apps import apps
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import conditional_escape, format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _

from .. import openrpc
from ..conf import jsonrpc_settings
from ..models import Call, Envelope
from .shared import NothingToEditMixin, RegistryAdminMixin, admin_url, compact, has_replay_permission, pretty
from .tryit import TryItMixin
from .usage import empty_usage, usage_stats

P = inspect.Parameter
RECENT_CALLS = 10
# The app filter's value for methods defined outside any installed app.
NO_APP = "-"


# -- describing a method -----------------------------------------------------


_LITERAL = re.compile(r"``(.+?)``|`([^`]+)`", re.S)


def doc_html(text):
    """Return docstring text as HTML paragraphs, with ``literals`` as <code>."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text or "") if p.strip()]
    return format_html_join("", "<p>{}</p>", ((_inline(p),) for p in paragraphs))


def _inline(text):
    parts = []
    pos = 0
    for match in _LITERAL.finditer(text):
        parts.append(conditional_escape(text[pos:match.start()]))
        parts.append(format_html("<code>{}</code>", match.group(1) or match.group(2)))
        pos = match.end()
    parts.append(conditional_escape(text[pos:]))
    return mark_safe("".join(parts).replace("\n", "<br>"))


def format_annotation(annotation):
    """Return a type annotation as it reads in source ("int", "list[str]")."""
    if annotation is P.empty or annotation is inspect.Signature.empty:
        return ""
    if isinstance(annotation, str):
        return annotation
    return inspect.formatannotation(annotation)


def _default_text(default):
    if default is P.empty:
        return ""
    return repr(default)


def describe_params(method):
    """Return one dict per parameter a client can fill (the CallContext one excluded)."""
    schemas = param_schemas(method)
    rows = []
    for p in method.binder.params:
        if p.kind is P.VAR_POSITIONAL:
            name, kind = "*" + p.name, _("any number, by position")
        elif p.kind is P.VAR_KEYWORD:
            name, kind = "**" + p.name, _("any other names")
        elif p.kind is P.POSITIONAL_ONLY:
            name, kind = p.name, _("by position only")
        elif p.kind is P.KEYWORD_ONLY:
            name, kind = p.name, _("by name only")
        else:
            name, kind = p.name, _("by position or name")
        rows.append(
            {
                "name": name,
                "type": format_annotation(p.annotation),
                "default": _default_text(p.default),
                "required": p.default is P.empty and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD),
                "kind": kind,
                "schema": schemas.get(p.name, ""),
            }
        )
    return rows


def param_schemas(method):
    """Return {param name: JSON Schema text} from the OpenRPC description, or {}."""
    try:
        descriptors = openrpc.method_schema(method)["params"]
    except Exception:  # a type the schema builder cannot describe: show the page anyway
        return {}
    return {d["name"]: compact(d["schema"]) for d in descriptors if d.get("schema")}


def return_type(method):
    return format_annotation(method.signature.return_annotation)


def access_text(method):
    """Return what a caller needs to call ``method``, as short phrases."""
    needs = []
    if not method.enabled:
        needs.append(_("disabled"))
    if method.login_required:
        needs.append(_("login required"))
    for perm in method.permissions:
        needs.append(_("permission %(perm)s") % {"perm": perm})
    for cls in method.permission_classes:
        needs.append(getattr(cls, "__name__", str(cls)))
    for cls in method.throttle_classes:
        needs.append(_("throttled by %(name)s") % {"name": getattr(cls, "__name__", str(cls))})
    return needs


def declared_errors(method):
    """Return the errors ``method`` declares, as dicts (code, message, name, doc)."""
    rows = []
    for error in method.errors:
        if isinstance(error, dict):
            rows.append({"code": error.get("code", ""), "message": error.get("message", ""), "name": "", "doc": ""})
            continue
        doc = inspect.getdoc(error) if inspect.isclass(error) else ""
        if doc and inspect.isclass(error) and doc == inspect.getdoc(error.__mro__[1]):
            doc = ""  # inherited from the base class, says nothing about this error
        rows.append(
            {
                "code": getattr(error, "code", ""),
                "message": getattr(error, "message", str(error)),
                "name": getattr(error, "__name__", type(error).__name__),
                "doc": doc or "",
            }
        )
    return rows


def params_skeleton(method):
    """
    Return the params to prefill the Try-it form with (a list, a dict or None).

    Built from the param schemas (each type's example comes from
    ``jsonrpc_app.types``); None when the method takes no params.
    """
    if not method.binder.params and method.params_serializer is None:
        return None
    return openrpc.params_skeleton(method)

# -- the method browser ---------------------------------------------------------


class MethodEntryAdmin(NothingToEditMixin, TryItMixin, RegistryAdminMixin, admin.ModelAdmin):
    """
    The method browser: the index of a registry's methods and one page per method.

    Set ``registry`` to browse another registry than the default one, and
    ``endpoint_url`` when the endpoint is not mounted as ``jsonrpc_app:endpoint``.
    """

    registry = None
    endpoint_url = None
    index_template = None
    detail_template = None

    def has_view_permission(self, request, obj=None):
        user = request.user
        opts = self.opts
        return (
            user.has_perm("%s.view_%s" % (opts.app_label, opts.model_name))
            or user.has_perm("%s.view_envelope" % opts.app_label)
            or has_replay_permission(request)
        )

    def get_urls(self):
        return self._admin_paths(
            ("", self.changelist_view, "changelist"),
            ("<path:name>/", self.method_view, "detail"),
        )
    def _context(self, request, **extra):
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "has_replay_permission": self.has_replay_permission(request),
            "call_changelist_url": admin_url(self.admin_site, Call, "changelist"),
            **extra,
        }

    def _usage_url(self, name):
        """The usage dashboard for method ``name``, where this admin site has it."""
        try:
            return "%s?%s" % (reverse("%s:jsonrpc_usage" % self.admin_site.name), urlencode({"method": name}))
        except NoReverseMatch:
            return None

    def _app_names(self):
        names = {}
        for config in apps.get_app_configs():
            names[config.label] = config.verbose_name
        return names

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        registry = self.get_registry()
        app_names = self._app_names()
        query = request.GET.get("q", "").strip()
        app_filter = request.GET.get("app", "")
        needle = query.lower()
        stats = usage_stats()
        groups = {}
        total = 0
        detail = "%s:%s_%s_detail" % (self.admin_site.name, self.opts.app_label, self.opts.model_name)
        superuser = request.user.is_superuser
        for method in registry:
            if method.hidden and not superuser:
                continue
            label = method.app_label or NO_APP
            groups.setdefault(label, [])
            total += 1
            if app_filter and label != app_filter:
                continue
            summary = method.summary
            if needle and needle not in method.name.lower() and needle not in summary.lower():
                continue
            groups[label].append(
                {
                    "name": method.name,
                    "url": reverse(detail, args=[method.name]),
                    "signature": method.client_signature,
                    "summary": summary,
                    "summary_html": _inline(summary),
                    "access": access_text(method),
                    "hidden": method.hidden,
                    "stats": stats.get(method.name) or empty_usage(),
                }
            )
        keep = {"q": query} if query else {}
        app_choices = [
            {
                "label": label,
                "name": _("(no app)") if label == NO_APP else app_names.get(label, label),
                "url": "?" + urlencode({**keep, "app": label}),
                "selected": label == app_filter,
            }
            for label in sorted(groups, key=lambda lbl: str(app_names.get(lbl, lbl)).lower())
        ]
        all_apps_url = "?" + urlencode(keep)
        shown = [
            {"label": c["label"], "name": c["name"], "methods": groups[c["label"]]}
            for c in app_choices
            if groups[c["label"]]
        ]
        context = self._context(
            request,
            title=_("Methods"),
            subtitle=None,
            groups=shown,
            app_choices=app_choices,
            all_apps_url=all_apps_url,
            app_filter=app_filter,
            query=query,
            shown_count=sum(len(g["methods"]) for g in shown),
            total_count=total,
            **(extra_context or {}),
        )
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request,
            self.index_template or "admin/jsonrpc_app/methodentry/index.html",
            context,
        )

    def method_view(self, request, name):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        method = self.get_registry().get(name)
        if method is None or (method.hidden and not request.user.is_superuser):
            raise Http404(_("No JSON-RPC method is called %(name)s.") % {"name": name})
        skeleton = params_skeleton(method)
        form = {
            "params": pretty(skeleton) if skeleton is not None else "",
            "id": "1",
            "errors": [],
        }
        tryit = None
        if request.method == "POST":
            if not self.has_replay_permission(request):
                raise PermissionDenied
            form = {"params": request.POST.get("params", ""), "id": request.POST.get("id", ""), "errors": []}
            tryit = self.try_it(request, method, form)
        elif request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "POST"])
        stats = usage_stats(method.name).get(method.name) or empty_usage()
        # The calls themselves (params, results, callers) are for those who may read the log.
        can_read_log = request.user.has_perm("%s.view_call" % Call._meta.app_label) or request.user.has_perm(
            "%s.view_envelope" % Envelope._meta.app_label
        )
        recent = []
        if can_read_log:
            recent = list(
                Call.objects.using(jsonrpc_settings.LOG_DATABASE)
                # The logged username, not a join: users may live in another database.
                .filter(method=method.name)[:RECENT_CALLS]
            )
        call_change = "%s:%s_%s_change" % (self.admin_site.name, Call._meta.app_label, Call._meta.model_name)
        can_link_calls = self.admin_site.is_registered(Call)
        for call in recent:
            call.admin_url = reverse(call_change, args=[call.pk]) if can_link_calls else None
        label = method.app_label
        context = self._context(
            request,
            title=method.name,
            subtitle=None,
            method=method,
            app_name=self._app_names().get(label, label) if label else _("(no app)"),
            signature=method.client_signature,
            doc_html=doc_html(method.doc),
            params=describe_params(method),
            returns=return_type(method),
            errors=declared_errors(method),
            access=access_text(method),
            stats=stats,
            usage_url=self._usage_url(method.name),
            recent_calls=recent,
            can_read_log=can_read_log,
            form=form,
            tryit=tryit,
            index_url=reverse(
                "%s:%s_%s_changelist" % (self.admin_site.name, self.opts.app_label, self.opts.model_name)
            ),
        )
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request,
            self.detail_template or "admin/jsonrpc_app/methodentry/detail.html",
            context,
        )
