"""
The admin's method browser, "try it", and replay of logged envelopes with a
comparison of the answers.

``RpcMethodAdmin`` serves the browser (the index of every method of a
registry, grouped by app, with usage from the log) and one page per method
with its documentation, recent calls and the Try-it form.
``EnvelopeReplayMixin`` adds to the envelope admin a Replay button, an
edit-before-replay page, the "Replay selected envelopes" action and the
comparison page.

Try-it and replay run through ``service.answer()``, the path the HTTP
endpoint takes, as the logged-in admin (never the original caller), and are
logged with source ``admin`` or ``replay``. Both are CSRF-protected POSTs that
require the ``replay_envelope`` permission.
"""

import difflib
import inspect
import json
import re
import shlex
from datetime import timedelta
from urllib.parse import urlencode, urlsplit

from django.apps import apps
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import connections
from django.db.models import Aggregate, Count, F, FloatField, Q, Window
from django.db.models.functions import RowNumber
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.html import conditional_escape, format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.utils.translation import ngettext

from . import openrpc, protocol, service
from .conf import jsonrpc_settings
from .context import CallContext
from .models import Call, Envelope

P = inspect.Parameter
REPLAY_PERMISSION = "replay_envelope"
# Logged bodies hold this in place of the values of sensitive keys.
REDACTED = "********"
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


def signature_text(method):
    """Return ``(minuend: int, subtrahend: int) -> int`` without the CallContext parameter."""
    params = [p for p in method.signature.parameters.values() if p.name != method.binder.context_name]
    sig = method.signature.replace(parameters=params)
    try:
        return str(sig)
    except (TypeError, ValueError):
        return "(...)"


def param_schemas(method):
    """Return {param name: JSON Schema text} from the OpenRPC description, or {}."""
    try:
        descriptors = openrpc.method_schema(method)["params"]
    except Exception:  # a type the schema builder cannot describe: show the page anyway
        return {}
    return {d["name"]: _compact(d["schema"]) for d in descriptors if d.get("schema")}


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


# -- usage from the log -------------------------------------------------------


class _Median(Aggregate):
    """PostgreSQL's PERCENTILE_CONT(0.5): the median, computed in the grouping query itself."""

    function = "PERCENTILE_CONT"
    name = "Median"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def _median_rows(calls):
    """Return {method: median duration} with one query: the middle row(s) of each method."""
    ranked = (
        calls.annotate(
            rank=Window(RowNumber(), partition_by=[F("method")], order_by=[F("duration_ms").asc(), F("id").asc()]),
            count=Window(Count("id"), partition_by=[F("method")]),
        )
        # Rows ((n + 1) // 2) and ((n + 2) // 2): the middle one, or the middle two.
        .filter(rank__gte=(F("count") + 1) / 2, rank__lte=(F("count") + 2) / 2)
        .order_by()
        .values_list("method", "duration_ms")
    )
    middles = {}
    for method, duration in ranked:
        middles.setdefault(method, []).append(duration)
    return {method: sum(values) / len(values) for method, values in middles.items()}


def empty_usage():
    """Return the usage of a method never called."""
    usage = {}
    for suffix in ("", "_24h"):
        usage.update(
            {
                "count" + suffix: 0,
                "errors" + suffix: 0,
                "error_rate" + suffix: None,
                "error_pct" + suffix: None,
                "median_ms" + suffix: None,
            }
        )
    return usage


def usage_stats(method=None, now=None):
    """
    Return {method name: usage} from the call log in bounded queries, whatever its size.

    One grouped query on PostgreSQL (medians by ``PERCENTILE_CONT``); elsewhere
    one for the counts and one per median (the middle rows by window functions).

    Usage holds ``count``, ``errors``, ``error_rate`` (0..1), ``error_pct`` and
    ``median_ms`` (milliseconds) for all time, and the same with ``_24h`` for
    the last 24 hours. Give ``method`` to read only that method's calls.
    """
    since = (now or timezone.now()) - timedelta(hours=24)
    calls = Call.objects.using(jsonrpc_settings.LOG_DATABASE).exclude(method="")
    if method is not None:
        calls = calls.filter(method=method)
    recent = Q(created_at__gte=since)
    errors = Q(outcome="error")
    stats = {}
    aggregates = {
        "count": Count("id"),
        "errors": Count("id", filter=errors),
        "count_24h": Count("id", filter=recent),
        "errors_24h": Count("id", filter=recent & errors),
    }
    in_sql = connections[calls.db].vendor == "postgresql"
    if in_sql:
        aggregates["median_ms"] = _Median("duration_ms")
        aggregates["median_ms_24h"] = _Median("duration_ms", filter=recent)
    counts = calls.order_by().values("method").annotate(**aggregates)
    for row in counts:
        for suffix in ("", "_24h"):
            n = row["count" + suffix]
            row["error_rate" + suffix] = row["errors" + suffix] / n if n else None
            row["error_pct" + suffix] = 100.0 * row["errors" + suffix] / n if n else None
            row.setdefault("median_ms" + suffix, None)
        stats[row["method"]] = row
    if stats and not in_sql:
        for name, median in _median_rows(calls).items():
            stats[name]["median_ms"] = median
        for name, median in _median_rows(calls.filter(recent)).items():
            stats[name]["median_ms_24h"] = median
    return stats


# -- comparing two answers ----------------------------------------------------


def _read(body):
    """Return the responses in a logged response body as a list, or None if unreadable."""
    if not body:
        return []
    try:
        value = protocol.loads(body)
    except ValueError:
        return None
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    return None


def _requests_by_id(request_body):
    """Return {id key: (method, params)} for the requests in a logged request body."""
    try:
        value = protocol.loads(request_body or "")
    except ValueError:
        return {}
    items = value if isinstance(value, list) else [value]
    requests = {}
    for item in items:
        if isinstance(item, dict) and "id" in item and isinstance(item.get("method"), str):
            requests.setdefault(_id_key(item["id"]), (item["method"], item.get("params")))
    return requests


def _compact(value):
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _id_key(value):
    # The JSON text of the id: 1 and "1" are different ids.
    return json.dumps(value, sort_keys=True)


def _keyed(responses):
    """Return [(key, id, response)]: ids as keys, null ids numbered in order."""
    keyed = []
    nulls = 0
    seen = set()
    for response in responses:
        rid = response.get("id")
        key = _id_key(rid)
        if rid is None or key in seen:
            key = "%s#%d" % (key, nulls)
            nulls += 1
        seen.add(key)
        keyed.append((key, rid, response))
    return keyed


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


def _diff_lines(left, right):
    """Return the two texts as lists of (line, changed) with the differing lines marked."""
    a, b = left.splitlines(), right.splitlines()
    marks_a, marks_b = [False] * len(a), [False] * len(b)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            for i in range(i1, i2):
                marks_a[i] = True
            for j in range(j1, j2):
                marks_b[j] = True
    return list(zip(a, marks_a)), list(zip(b, marks_b))


SAME, CHANGED_RESULT, CHANGED_ERROR, NOW_ERROR, NOW_RESULT, MISSING, NEW = (
    "same",
    "changed-result",
    "changed-error",
    "now-error",
    "now-result",
    "missing",
    "new",
)
STATUS_LABELS = {
    SAME: gettext_lazy("same"),
    CHANGED_RESULT: gettext_lazy("changed result"),
    CHANGED_ERROR: gettext_lazy("changed error"),
    NOW_ERROR: gettext_lazy("changed: result became an error"),
    NOW_RESULT: gettext_lazy("changed: error became a result"),
    MISSING: gettext_lazy("call now missing"),
    NEW: gettext_lazy("new call"),
}
CHANGED = {CHANGED_RESULT, CHANGED_ERROR, NOW_ERROR, NOW_RESULT}


def _status(left, right):
    if left is None:
        return NEW
    if right is None:
        return MISSING
    if left == right:
        return SAME
    if "result" in left and "result" in right:
        return CHANGED_RESULT
    if "error" in left and "error" in right:
        return CHANGED_ERROR
    return NOW_ERROR if "result" in left else NOW_RESULT


class Comparison:
    """The original and replayed answers of an envelope, paired by call id."""

    def __init__(self, original_request, original_response, replay_request, replay_response):
        left, right = _read(original_response), _read(replay_response)
        self.readable = left is not None and right is not None
        self.rows = []
        if not self.readable:
            return
        left_requests = _requests_by_id(original_request)
        right_requests = _requests_by_id(replay_request)
        right_keyed = {key: response for key, _rid, response in _keyed(right)}
        keys = []
        ids = {}
        for key, rid, _response in _keyed(left) + _keyed(right):
            if key not in ids:
                keys.append(key)
                ids[key] = rid
        left_keyed = {key: response for key, _rid, response in _keyed(left)}
        for key in keys:
            a, b = left_keyed.get(key), right_keyed.get(key)
            status = _status(a, b)
            a_text = pretty(a) if a is not None else ""
            b_text = pretty(b) if b is not None else ""
            if status in CHANGED:
                a_lines, b_lines = _diff_lines(a_text, b_text)
            else:
                a_lines = [(line, False) for line in a_text.splitlines()]
                b_lines = [(line, False) for line in b_text.splitlines()]
            id_key = key.split("#", 1)[0]
            sent, resent = left_requests.get(id_key), right_requests.get(id_key)
            self.rows.append(
                {
                    "id": ids[key],
                    "id_text": json.dumps(ids[key], ensure_ascii=False),
                    "method": (sent or resent or ("", None))[0],
                    # Shown when the replay sent other params than the original.
                    "params_edited": bool(sent and resent and sent[1] != resent[1]),
                    "params_original": _compact(sent[1]) if sent else "",
                    "params_replay": _compact(resent[1]) if resent else "",
                    "status": status,
                    "label": STATUS_LABELS[status],
                    "changed": status != SAME,
                    "original": _lines_html(a_lines),
                    "replay": _lines_html(b_lines),
                }
            )

    @property
    def counts(self):
        counts = {SAME: 0, "changed": 0, MISSING: 0, NEW: 0}
        for row in self.rows:
            counts["changed" if row["status"] in CHANGED else row["status"]] += 1
        return counts

    @property
    def all_same(self):
        return self.readable and all(row["status"] == SAME for row in self.rows)

    @property
    def summary(self):
        """Return "3 calls: 2 same, 1 changed", or "3 calls: all same"."""
        if not self.readable:
            return _("The answers could not be read as JSON-RPC responses; compare the bodies below.")
        total = len(self.rows)
        if not total:
            return _("No responses to compare: nothing was answered (notifications only).")
        head = ngettext("%(count)d call", "%(count)d calls", total) % {"count": total}
        if self.all_same:
            return _("%(head)s: all same") % {"head": head}
        counts = self.counts
        parts = []
        if counts[SAME]:
            parts.append(_("%(n)d same") % {"n": counts[SAME]})
        if counts["changed"]:
            parts.append(_("%(n)d changed") % {"n": counts["changed"]})
        if counts[MISSING]:
            parts.append(_("%(n)d missing") % {"n": counts[MISSING]})
        if counts[NEW]:
            parts.append(_("%(n)d new") % {"n": counts[NEW]})
        return "%s: %s" % (head, ", ".join(parts))


def _lines_html(lines):
    return format_html_join(
        "",
        '<span class="{}">{}</span>\n',
        (("jsonrpc-diff-changed" if changed else "jsonrpc-diff-line", line) for line, changed in lines),
    )


# -- shared helpers -----------------------------------------------------------


def _log_enabled():
    return jsonrpc_settings.LOG_POLICY != "none"


def _admin_url(admin_site, model, name, *args):
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


def _has_replay_permission(request):
    opts = Envelope._meta
    return request.user.has_perm("%s.%s" % (opts.app_label, REPLAY_PERMISSION))


class _RegistryAdminMixin:
    """
    What the method browser and envelope replay share: the registry they run
    (``registry``, else the default one), the replay permission, and URL
    patterns wrapped and named as the admin's own.
    """

    registry = None

    def get_registry(self):
        if self.registry is None:
            from .registry import registry

            return registry
        return self.registry

    def has_replay_permission(self, request):
        return _has_replay_permission(request)

    def answer_as_admin(self, request, body, source, endpoint, replay_of=None):
        """Answer ``body`` through the endpoint's path as the logged-in admin user."""
        context = CallContext(
            request=request,
            user=request.user,
            source=source,
            registry=self.get_registry(),
            endpoint=endpoint,
            replay_of=replay_of,
            log=_log_enabled(),
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


# -- the method browser ---------------------------------------------------------


class RpcMethodAdmin(_RegistryAdminMixin, admin.ModelAdmin):
    """
    The method browser: the index of a registry's methods and one page per method.

    Set ``registry`` to browse another registry than the default one, and
    ``endpoint_url`` when the endpoint is not mounted as ``jsonrpc_app:endpoint``.
    """

    registry = None
    endpoint_url = None
    index_template = None
    detail_template = None

    # Nothing to add, change or delete: the methods are code.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        user = request.user
        opts = self.opts
        return (
            user.has_perm("%s.view_%s" % (opts.app_label, opts.model_name))
            or user.has_perm("%s.view_envelope" % opts.app_label)
            or _has_replay_permission(request)
        )

    def get_urls(self):
        return self._admin_paths(
            ("", self.changelist_view, "changelist"),
            ("<path:name>/", self.method_view, "detail"),
        )

    def get_endpoint_url(self, request):
        url = self.endpoint_url
        if url is None:
            try:
                url = reverse("jsonrpc_app:endpoint")
            except NoReverseMatch:
                url = "/rpc/"
        return request.build_absolute_uri(url)

    def _context(self, request, **extra):
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "has_replay_permission": self.has_replay_permission(request),
            "call_changelist_url": _admin_url(self.admin_site, Call, "changelist"),
            **extra,
        }

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
                    "signature": signature_text(method),
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
            self.index_template or "admin/jsonrpc_app/rpcmethod/index.html",
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
            signature=signature_text(method),
            doc_html=doc_html(method.doc),
            params=describe_params(method),
            returns=return_type(method),
            errors=declared_errors(method),
            access=access_text(method),
            stats=stats,
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
            self.detail_template or "admin/jsonrpc_app/rpcmethod/detail.html",
            context,
        )

    def try_it(self, request, method, form):
        """Run one call of ``method`` from the Try-it form; return what to show, or None."""
        text = form["params"].strip()
        params = None
        if text:
            try:
                params = protocol.loads(text)
            except ValueError as exc:
                form["errors"].append(_("Params are not valid JSON: %(error)s") % {"error": exc})
            else:
                if not isinstance(params, (list, dict)):
                    form["errors"].append(_("Params must be a JSON array or object (or left empty)."))
        id_text = form["id"].strip()
        notification = not id_text
        rid = None
        if not notification:
            try:
                rid = protocol.loads(id_text)
            except ValueError:
                rid = id_text  # a bare word is meant as a string id
            if not (rid is None or isinstance(rid, (str, int, float))) or isinstance(rid, bool):
                form["errors"].append(_("The id must be a string, a number or null."))
        if form["errors"]:
            return None
        body = {"jsonrpc": "2.0", "method": method.name}
        if text:
            body["params"] = params
        if not notification:
            body["id"] = rid
        body_text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        endpoint = self.get_endpoint_url(request)
        answer = self.answer_as_admin(request, body_text, "admin", urlsplit(endpoint).path)
        envelope_url = None
        if answer.envelope is not None:
            envelope_url = _admin_url(self.admin_site, Envelope, "change", answer.envelope.pk)
        curl = [
            "curl -s -X POST",
            "-H 'Content-Type: application/json'",
        ]
        if method.requires_authentication:
            # curl asks for the password; the admin's session does not travel to a shell.
            curl.append("-u %s" % shlex.quote(request.user.get_username()))
        curl.append("--data-raw %s" % shlex.quote(body_text))
        curl.append(shlex.quote(endpoint))
        return {
            "request": pretty(body),
            "response": pretty_body(answer.content) if answer.content else "",
            "status": answer.status,
            "ok": isinstance(answer.response, dict) and "result" in answer.response,
            "envelope": answer.envelope,
            "envelope_url": envelope_url,
            "curl": " \\\n  ".join(curl),
        }


# -- replay ---------------------------------------------------------------------


@admin.action(description=gettext_lazy("Replay selected envelopes"), permissions=["replay"])
def replay_selected(modeladmin, request, queryset):
    """Replay each selected envelope unchanged, as the admin."""
    replays = []
    for original in queryset.order_by("pk"):
        replays.append((original, modeladmin.replay(request, original, original.request_body)))
    if len(replays) == 1 and replays[0][1].envelope is not None:
        return HttpResponseRedirect(modeladmin.comparison_url(replays[0][1].envelope))
    for original, answer in replays:
        if answer.envelope is None:
            messages.warning(
                request,
                _("%(original)s was replayed, but the replay was not logged.") % {"original": original},
            )
            continue
        comparison = Comparison(
            original.request_body,
            original.response_body,
            answer.envelope.request_body,
            answer.envelope.response_body,
        )
        messages.info(
            request,
            format_html(
                '{} &rarr; {}: <a href="{}">{}</a>',
                original,
                answer.envelope,
                modeladmin.comparison_url(answer.envelope),
                comparison.summary,
            ),
        )
    return None


class EnvelopeReplayMixin(_RegistryAdminMixin):
    """
    Replay for the envelope admin: put it first in the bases of its ModelAdmin.

    Adds ``<id>/replay/`` (edit, then replay), ``<id>/comparison/`` (a
    replay's answers next to its original's), the Replay button on the
    change page and the "Replay selected envelopes" action.
    """

    registry = None
    replay_template = None
    comparison_template = None
    # Offered to users with has_replay_permission() only; a subclass that sets
    # its own ``actions`` lists replay_selected there too.
    actions = [replay_selected]

    def get_urls(self):
        return [
            *self._admin_paths(
                ("<path:object_id>/replay/", self.replay_view, "replay"),
                ("<path:object_id>/comparison/", self.comparison_view, "comparison"),
            ),
            *super().get_urls(),
        ]

    def _url(self, name, obj):
        info = self.admin_site.name, self.opts.app_label, self.opts.model_name, name
        return reverse("%s:%s_%s_%s" % info, args=[obj.pk])

    def replay_url(self, envelope):
        return self._url("replay", envelope)

    def comparison_url(self, envelope):
        return self._url("comparison", envelope)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = dict(extra_context or {})
        extra["has_replay_permission"] = self.has_replay_permission(request)
        extra["replay_url"] = reverse(
            "%s:%s_%s_replay" % (self.admin_site.name, self.opts.app_label, self.opts.model_name),
            args=[object_id],
        )
        extra["comparison_url"] = reverse(
            "%s:%s_%s_comparison" % (self.admin_site.name, self.opts.app_label, self.opts.model_name),
            args=[object_id],
        )
        return super().change_view(request, object_id, form_url, extra_context=extra)

    def _get_envelope(self, request, object_id):
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404(_("No envelope with id %(id)s.") % {"id": object_id})
        return obj

    def replay(self, request, original, body):
        """Run ``body`` as a replay of ``original``, as the admin; return the service's Answer."""
        answer = self.answer_as_admin(request, body, "replay", original.endpoint, replay_of=original)
        if answer.envelope is not None:
            self.log_change(request, original, _("Replayed as %(replay)s.") % {"replay": answer.envelope})
        return answer

    def replay_view(self, request, object_id):
        # Replaying shows the logged request: it takes reading the log as well.
        if not (self.has_replay_permission(request) and self.has_view_or_change_permission(request)):
            raise PermissionDenied
        original = self._get_envelope(request, object_id)
        body = pretty_body(original.request_body)
        if request.method == "POST":
            body = request.POST.get("body", "")
            answer = self.replay(request, original, body)
            if answer.envelope is not None:
                messages.success(
                    request,
                    _("Replayed %(original)s as %(replay)s.") % {"original": original, "replay": answer.envelope},
                )
                return HttpResponseRedirect(self.comparison_url(answer.envelope))
            # Not logged: compare with what was just answered.
            return self._render_comparison(
                request,
                original,
                None,
                Comparison(original.request_body, original.response_body, body, answer.content),
                body,
                answer.content.decode("utf-8", "replace"),
            )
        elif request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "POST"])
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "title": _("Replay %(envelope)s") % {"envelope": original},
            "subtitle": None,
            "original": original,
            "body": body,
            "redacted": REDACTED in (original.request_body or ""),
            "change_url": self._url("change", original),
            "replays": list(original.replays.order_by("-pk")[:5]),
        }
        for replay in context["replays"]:
            replay.comparison_url = self.comparison_url(replay)
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request, self.replay_template or "admin/jsonrpc_app/envelope/replay.html", context
        )

    def comparison_view(self, request, object_id):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        replay = self._get_envelope(request, object_id)
        original = replay.replay_of
        if original is None:
            messages.info(request, _("%(envelope)s is not a replay: there is nothing to compare it with.") % {
                "envelope": replay
            })
            return HttpResponseRedirect(self._url("change", replay))
        comparison = Comparison(
            original.request_body, original.response_body, replay.request_body, replay.response_body
        )
        return self._render_comparison(
            request, original, replay, comparison, replay.request_body, replay.response_body
        )

    def _render_comparison(self, request, original, replay, comparison, replay_request, replay_response):
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "title": _("Replay of %(envelope)s") % {"envelope": original},
            "subtitle": None,
            "original": original,
            "replay": replay,
            "comparison": comparison,
            "original_change_url": self._url("change", original),
            "replay_change_url": self._url("change", replay) if replay is not None else None,
            "original_request": pretty_body(original.request_body),
            "replay_request": pretty_body(replay_request),
            "original_response": pretty_body(original.response_body),
            "replay_response": pretty_body(replay_response),
            "has_replay_permission": self.has_replay_permission(request),
            "replay_again_url": self.replay_url(original),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request,
            self.comparison_template or "admin/jsonrpc_app/envelope/comparison.html",
            context,
        )


__all__ = [
    "Comparison",
    "EnvelopeReplayMixin",
    "RpcMethodAdmin",
    "params_skeleton",
    "replay_selected",
    "usage_stats",
]
