"""
The call log in the Django admin: read-only changelists of envelopes and of
calls, with the calls of an envelope inline, JSON pretty-printed and links
both ways.

Nobody adds or changes log rows here; deleting them takes the model's delete
permission. Every list and page runs a fixed number of queries however many
rows the log holds, none of which reads a whole table (jsonrpc_app.admin.listing):
no full count (an estimate on PostgreSQL for a large list), filter choices
from the registry and the usage rollups, a date hierarchy from the first and
last row, and only orderings an index serves. Users are shown from the name
logged with each row.

Extend by subclassing ``EnvelopeAdmin`` / ``CallAdmin`` (and re-registering
them): ``LogAdmin`` holds what both share.
"""

import json

from django.contrib import admin, messages
from django.contrib.admin.templatetags.admin_list import _boolean_icon
from django.contrib.admin.views.main import PAGE_VAR, SEARCH_VAR
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from ..log import spool
from .lag import journal_messages
from ..models import ENVELOPE_HAS_ERRORS, NOT_HTTP, Call, Envelope, Outcome, Source
from .copy_test import CopyAsTestMixin
from .listing import (
    EstimatedCountPaginator,
    LogChangeList,
    distinct_users,
    error_code_choices,
    known_error_codes,
    method_choices,
)
from .replay import EnvelopeReplayMixin

# Filter sidebars list at most this many values (a client can invent method names).
MAX_FILTER_CHOICES = 100


def pretty_json(value):
    """Return ``value`` (a JSON-native value) as pretty-printed HTML."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return format_html('<pre class="jsonrpc-json">{}</pre>', text)


def pretty_json_text(text):
    """Return a stored JSON text pretty-printed, or as it is when it is not JSON."""
    if not text:
        return "-"
    try:
        value = json.loads(text)
    except ValueError:
        return format_html('<pre class="jsonrpc-json">{}</pre>', text)
    return pretty_json(value)


# -- filters --------------------------------------------------------------------


class _ChoicesFilter(admin.SimpleListFilter):
    """
    A filter whose value applies even when its choices do not list it: the
    choices come from the rollups (or a bounded read), which may not know a
    value the rows hold (rows written outside the log before a rebuild).
    """

    def has_output(self):
        return super().has_output() or self.value() is not None


class _BoundedValuesFilter(_ChoicesFilter):
    """Filters calls (or the envelopes holding such calls) by a Call column."""

    column = None

    def call_filter(self, value):
        return {self.column: value}

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if queryset.model is Call:
            return queryset.filter(**self.call_filter(value))
        return queryset.filter(pk__in=Call._default_manager.filter(**self.call_filter(value)).values("envelope_id"))


class MethodFilter(_BoundedValuesFilter):
    """The registry's methods and those the usage rollups have seen (invented names too)."""

    title = _("method")
    parameter_name = "method"
    column = "method"

    def lookups(self, request, model_admin):
        return [(v, v if v != "" else _("(none)")) for v in method_choices(MAX_FILTER_CHOICES)]


class UserFilter(_ChoicesFilter):
    """The users found in the log, by the name logged with them (no join, any database)."""

    title = _("user")
    parameter_name = "user"

    def lookups(self, request, model_admin):
        rows = distinct_users(model_admin.model, MAX_FILTER_CHOICES, model_admin.model._default_manager.db)
        return sorted(((str(pk), name or "#%s" % pk) for pk, name in rows), key=lambda c: (c[1].lower(), c[0]))

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if value == "":
            return queryset.filter(user_id__isnull=True)
        try:
            return queryset.filter(user_id=int(value))
        except ValueError:
            return queryset.none()


class ErrorCodeFilter(_ChoicesFilter):
    title = _("error code")
    parameter_name = "error_code"

    def lookups(self, request, model_admin):
        # The codes calls failed with (the usage rollups), and for envelopes
        # also those the app rejects a whole body with.
        codes = set(error_code_choices(MAX_FILTER_CHOICES))
        if model_admin.model is not Call:
            codes |= known_error_codes()
        return [(str(c), str(c)) for c in sorted(codes)[:MAX_FILTER_CHOICES]]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        try:
            return queryset.filter(error_code=int(value))
        except ValueError:
            return queryset.none()


class SourceFilter(admin.ChoicesFieldListFilter):
    """
    The source, as Django's choices filter; a source other than HTTP also
    states ``NOT_HTTP``, the condition of the partial source index, so that
    the database uses that index (SQLite matches the condition literally).
    """

    def queryset(self, request, queryset):
        queryset = super().queryset(request, queryset)
        values = self.used_parameters.get(self.lookup_kwarg)
        if values and Source.HTTP not in values:
            queryset = queryset.filter(NOT_HTTP)
        return queryset


class EnvelopeOutcomeFilter(admin.SimpleListFilter):
    title = _("outcome")
    parameter_name = "outcome"

    def lookups(self, request, model_admin):
        return [
            ("ok", _("OK")),
            ("error", _("With errors")),
            ("invalid", _("Rejected as a whole")),
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if value == "ok":
            return queryset.filter(error_count=0, error_code__isnull=True)
        if value == "error":
            # The condition of the partial index jsonrpc_env_failed, as it is written there.
            return queryset.filter(ENVELOPE_HAS_ERRORS)
        if value == "invalid":
            return queryset.filter(error_code__isnull=False)
        return queryset


# -- the changelists -------------------------------------------------------------


def spool_warning(request):
    """Tell staff about envelopes waiting in the spool, not yet in the log (jsonrpc_app.log.spool)."""
    pending = spool.status()
    if pending.pending:
        messages.warning(
            request,
            ngettext(
                "%(count)d envelope is waiting in the call log's spool (%(dir)s) and is not "
                "listed here yet. It is written to the log once the database accepts writes "
                "again, or now with: manage.py jsonrpc_flush_spool",
                "%(count)d envelopes are waiting in the call log's spool (%(dir)s) and are not "
                "listed here yet. They are written to the log once the database accepts writes "
                "again, or now with: manage.py jsonrpc_flush_spool",
                pending.pending,
            )
            % {"count": pending.pending, "dir": pending.directory},
        )
    if pending.rejected:
        messages.error(
            request,
            ngettext(
                "%(count)d spooled envelope was refused by the database; it is kept in "
                "%(dir)s/*.rejected and not replayed.",
                "%(count)d spooled envelopes were refused by the database; they are kept in "
                "%(dir)s/*.rejected and not replayed.",
                pending.rejected,
            )
            % {"count": pending.rejected, "dir": pending.directory},
        )


class LogAdmin(admin.ModelAdmin):
    """What the log's admins share: read-only, bounded queries, no full count."""

    date_hierarchy = "created_at"
    list_per_page = 50
    # Counted where small, estimated where large (PostgreSQL); no facet counts.
    paginator = EstimatedCountPaginator
    show_facets = admin.ShowFacets.NEVER
    # Only the time order, which the (created_at, id) index serves (read
    # backwards); any other column would sort the whole filtered table.
    sortable_by = ["received"]

    class Media:
        css = {"all": ["jsonrpc_app/log.css"]}
    # The unfiltered total is a second COUNT(*) over a table of millions of rows.
    show_full_result_count = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_changelist(self, request, **kwargs):
        return LogChangeList

    def get_paginator(self, request, queryset, per_page, orphans=0, allow_empty_first_page=True):
        # A search counts up to its next page (EstimatedCountPaginator): it needs the page asked for.
        try:
            page = int(request.GET.get(PAGE_VAR, 1))
        except ValueError:
            page = 1
        return self.paginator(
            queryset, per_page, orphans, allow_empty_first_page,
            searching=bool(request.GET.get(SEARCH_VAR, "").strip()) and bool(self.get_search_fields(request)),
            page_hint=page,
        )

    def changelist_view(self, request, extra_context=None):
        spool_warning(request)
        journal_messages(request)
        return super().changelist_view(request, extra_context)

    @admin.display(description=_("user"), ordering="username")
    def user_display(self, obj):
        return obj.username or (("#%s" % obj.user_id) if obj.user_id else "-")

    @admin.display(description=_("duration (ms)"), ordering="duration_ms")
    def duration(self, obj):
        return "%.2f" % obj.duration_ms


class CallInline(admin.TabularInline):
    """The calls of an envelope, in their order, each linked to its own page."""

    model = Call
    fk_name = "envelope"
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ["position"]
    fields = ["position", "method", "request_id_display", "outcome_display", "error_code", "error_message", "duration_ms"]
    readonly_fields = fields
    verbose_name_plural = _("calls")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description=_("request id"))
    def request_id_display(self, obj):
        return _request_id(obj)

    @admin.display(description=_("outcome"))
    def outcome_display(self, obj):
        return _outcome(obj.outcome)


def _request_id(call):
    if call.is_notification:
        return _("(notification)")
    # JSON, so that "1" and 1 read differently.
    return json.dumps(call.request_id, ensure_ascii=False)


def _outcome(outcome):
    return format_html("{} {}", _boolean_icon(outcome == Outcome.OK), Outcome(outcome).label)


class EnvelopeAdmin(EnvelopeReplayMixin, LogAdmin):
    list_display = [
        "received",
        "methods",
        "kind",
        "outcome_display",
        "error_code",
        "call_count",
        "error_count",
        "duration",
        "user_display",
        "source",
        "http_status",
        "remote_addr",
    ]
    list_filter = [
        EnvelopeOutcomeFilter, MethodFilter, ErrorCodeFilter, ("source", SourceFilter), "is_batch", UserFilter,
    ]
    search_fields = ["methods", "request_body", "username", "endpoint"]
    inlines = [CallInline]
    fieldsets = [
        (None, {"fields": [
            "uid", "created_at", "source", "endpoint", "methods", "kind", "outcome_display",
            "error", "http_status", "duration", "calls_link",
        ]}),
        (_("Caller"), {"fields": ["user_link", "username", "remote_addr", "user_agent"]}),
        (_("Replay"), {"fields": ["replay_of_link", "replays_links"]}),
        (_("Request"), {"fields": ["request_pretty"]}),
        (_("Response"), {"fields": ["response_pretty"]}),
    ]
    readonly_fields = [
        "uid", "created_at", "source", "endpoint", "methods", "kind", "outcome_display",
        "error", "http_status", "duration", "calls_link", "user_link", "username", "remote_addr",
        "user_agent", "replay_of_link", "replays_links", "request_pretty", "response_pretty",
    ]

    @admin.display(description=_("received at"), ordering="created_at")
    def received(self, obj):
        return obj.created_at

    @admin.display(description=_("kind"), ordering="is_batch")
    def kind(self, obj):
        return _("batch") if obj.is_batch else _("single")

    @admin.display(description=_("outcome"))
    def outcome_display(self, obj):
        return _outcome(obj.outcome)

    @admin.display(description=_("error"))
    def error(self, obj):
        if obj.error_code is None:
            return "-"
        return "%s %s" % (obj.error_code, obj.error_message)

    @admin.display(description=_("calls"))
    def calls_link(self, obj):
        url = reverse("admin:jsonrpc_app_call_changelist") + "?envelope__id__exact=%s" % obj.pk
        return format_html('<a href="{}">{} ({} {})</a>', url, _("Calls of this envelope"), obj.call_count, _("in all"))

    @admin.display(description=_("user"))
    def user_link(self, obj):
        if obj.user_id is None:
            return "-"
        try:
            url = reverse("admin:%s_%s_change" % (
                Envelope.user.field.related_model._meta.app_label,
                Envelope.user.field.related_model._meta.model_name,
            ), args=[obj.user_id])
        except Exception:
            return obj.username or "#%s" % obj.user_id
        return format_html('<a href="{}">{}</a>', url, obj.username or "#%s" % obj.user_id)

    @admin.display(description=_("replay of"))
    def replay_of_link(self, obj):
        if obj.replay_of_id is None:
            return "-"
        url = reverse("admin:jsonrpc_app_envelope_change", args=[obj.replay_of_id])
        return format_html('<a href="{}">#{}</a>', url, obj.replay_of_id)

    @admin.display(description=_("replayed as"))
    def replays_links(self, obj):
        pks = list(obj.replays.order_by("-created_at").values_list("pk", flat=True)[:20])
        if not pks:
            return "-"
        return format_html_join(
            ", ", '<a href="{}">#{}</a>',
            ((reverse("admin:jsonrpc_app_envelope_change", args=[pk]), pk) for pk in pks),
        )

    @admin.display(description=_("request body"))
    def request_pretty(self, obj):
        return pretty_json_text(obj.request_body)

    @admin.display(description=_("response body"))
    def response_pretty(self, obj):
        return pretty_json_text(obj.response_body)


class CallAdmin(CopyAsTestMixin, LogAdmin):
    list_display = [
        "received",
        "method_display",
        "outcome_display",
        "error_code",
        "request_id_display",
        "duration",
        "user_display",
        "source",
        "envelope_link",
    ]
    list_filter = [MethodFilter, "outcome", ErrorCodeFilter, ("source", SourceFilter), UserFilter, "is_notification"]
    search_fields = ["method", "request_id", "params"]
    fieldsets = [
        (None, {"fields": [
            "envelope_link", "position", "created_at", "method", "request_id_display",
            "outcome_display", "duration", "username", "source",
        ]}),
        (_("Params"), {"fields": ["params_pretty"]}),
        (_("Result"), {"fields": ["result_pretty"]}),
        (_("Error"), {"fields": ["error_code", "error_message", "error_data_pretty", "traceback_pre"]}),
    ]
    readonly_fields = [
        "envelope_link", "position", "created_at", "method", "request_id_display",
        "outcome_display", "duration", "username", "source", "params_pretty",
        "result_pretty", "error_code", "error_message", "error_data_pretty", "traceback_pre",
    ]

    @admin.display(description=_("received at"), ordering="created_at")
    def received(self, obj):
        return obj.created_at

    @admin.display(description=_("method"), ordering="method")
    def method_display(self, obj):
        return obj.method or _("(invalid request)")

    @admin.display(description=_("request id"))
    def request_id_display(self, obj):
        return _request_id(obj)

    @admin.display(description=_("outcome"), ordering="outcome")
    def outcome_display(self, obj):
        return _outcome(obj.outcome)

    @admin.display(description=_("envelope"), ordering="envelope_id")
    def envelope_link(self, obj):
        url = reverse("admin:jsonrpc_app_envelope_change", args=[obj.envelope_id])
        return format_html('<a href="{}">#{} ({} {})</a>', url, obj.envelope_id, _("position"), obj.position)

    @admin.display(description=_("params"))
    def params_pretty(self, obj):
        return pretty_json(obj.params)

    @admin.display(description=_("result"))
    def result_pretty(self, obj):
        if obj.outcome != Outcome.OK:
            return "-"
        return pretty_json(obj.result)

    @admin.display(description=_("error data"))
    def error_data_pretty(self, obj):
        if obj.error_data is None:
            return "-"
        return pretty_json(obj.error_data)

    @admin.display(description=_("traceback"))
    def traceback_pre(self, obj):
        if not obj.traceback:
            return "-"
        return format_html('<pre class="jsonrpc-traceback">{}</pre>', obj.traceback)
