"""
The usage dashboard (``admin:jsonrpc_usage``): calls, error rate and
p50/p95/p99 latency over the last hour, day or 30 days, for all methods or
one, from the usage rollups (jsonrpc_app.admin.usage), drawn as SVG
(jsonrpc_app.admin.charts). Registered for the UsageRollup model, so that it
has its place ("Usage") on the admin index next to the call log.
"""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy as _

from ..conf import jsonrpc_settings
from ..models import Call, MethodEntry, Source, UsageRollup
from . import charts
from .shared import NothingToEditMixin, admin_url
from .usage import RANGES, method_names, series

RANGE_NAMES = {"hour": _("Last hour"), "day": _("Last day"), "30d": _("Last 30 days")}
DEFAULT_RANGE = "day"


class UsageDashboardAdmin(NothingToEditMixin, admin.ModelAdmin):
    """No rows to list or change: the changelist is the dashboard."""

    dashboard_template = None

    def has_view_permission(self, request, obj=None):
        user = request.user
        label = self.opts.app_label
        return any(
            user.has_perm("%s.%s" % (label, perm))
            for perm in ("view_usagerollup", "view_call", "view_envelope", "view_methodentry")
        )

    def get_urls(self):
        view = self.admin_site.admin_view(self.dashboard_view)
        return [
            path("", view, name="jsonrpc_usage"),
            # The name the admin index links models by.
            path("", view, name="%s_%s_changelist" % (self.opts.app_label, self.opts.model_name)),
        ]

    def dashboard_view(self, request):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        problems = []
        range_name = request.GET.get("range", DEFAULT_RANGE)
        if range_name not in RANGES:
            problems.append(
                _("Unknown range %(value)r: showing the last day. Choose hour, day or 30d.") % {"value": range_name}
            )
            range_name = DEFAULT_RANGE
        source = request.GET.get("source", "")
        if source and source not in Source.values:
            problems.append(
                _("Unknown source %(value)r: showing every source. Choose one of %(choices)s.")
                % {"value": source, "choices": ", ".join(Source.values)}
            )
            source = ""
        method = request.GET.get("method") or None
        if method is not None and len(method) > 255:
            problems.append(_("A method name is at most 255 characters: showing every method."))
            method = None
        figures = series(range_name, method=method, source=source or None)
        known = method_names()
        if method is not None and method not in known:
            known = sorted(known + [method])
        keep = {k: v for k, v in (("method", method), ("source", source)) if v}
        ranges = [
            {"name": name, "label": label, "selected": name == range_name, "url": "?" + urlencode({**keep, "range": name})}
            for name, label in RANGE_NAMES.items()
        ]
        method_detail = "%s:%s_%s_detail" % (self.admin_site.name, MethodEntry._meta.app_label, MethodEntry._meta.model_name)
        can_browse = self.admin_site.is_registered(MethodEntry)
        for row in figures["methods"]:
            row["dashboard_url"] = "?" + urlencode({"range": range_name, **({"source": source} if source else {}), "method": row["method"]})
            row["method_url"] = reverse(method_detail, args=[row["method"]]) if can_browse and row["method"] else None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "title": _("Usage of %(method)s") % {"method": method} if method else _("Usage"),
            "subtitle": None,
            "figures": figures,
            "charts": charts.usage_charts(figures) if figures["total"]["calls"] else None,
            "ranges": ranges,
            "range_name": range_name,
            "range_label": RANGE_NAMES[range_name],
            "span": charts.span_text(figures["span"]),
            "method": method,
            "methods": known,
            "source": source,
            "sources": Source.choices,
            "problems": problems,
            "rollups_on": bool(jsonrpc_settings.USAGE_ROLLUPS),
            "anything_rolled_up": bool(known) or UsageRollup.objects.using(jsonrpc_settings.LOG_DATABASE).exists(),
            "all_methods_url": "?" + urlencode({"range": range_name, **({"source": source} if source else {})}),
            "call_changelist_url": admin_url(self.admin_site, Call, "changelist"),
            "method_browser_url": admin_url(self.admin_site, MethodEntry, "changelist"),
            "method_url": reverse(method_detail, args=[method]) if method and can_browse else None,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, self.dashboard_template or "admin/jsonrpc_app/usagerollup/dashboard.html", context
        )

    def changelist_view(self, request, extra_context=None):
        return self.dashboard_view(request)
