"""
Replay of logged envelopes and the comparison of the answers.

``EnvelopeReplayMixin`` adds to the envelope admin a Replay button, an
edit-before-replay page, the "Replay selected envelopes" action and the
comparison page. Replay runs through ``service.answer()``, the path the HTTP
endpoint takes, as the logged-in admin (never the original caller), logged
with source ``replay``; it is a CSRF-protected POST that requires the
``replay_envelope`` permission.
"""

import difflib
import json

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.utils.translation import ngettext

from .. import protocol
from ..log.redaction import REDACTED
from .shared import RegistryAdminMixin, compact, pretty, pretty_body

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
                    "params_original": compact(sent[1]) if sent else "",
                    "params_replay": compact(resent[1]) if resent else "",
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


class EnvelopeReplayMixin(RegistryAdminMixin):
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
