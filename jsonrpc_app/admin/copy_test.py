"""
"Copy as test" on a logged call's admin page: the source of a pytest test
that replays the call with the ``rpc`` fixture (jsonrpc_app.pytest_plugin)
and asserts what the log holds: its result, or its error's code (and
message and data) through ``pytest.raises``.

``replay_test_source(call)`` writes the test. What the log cannot give back
exactly makes a test that says so and skips (``pytest.skip`` with the
reason, the replay written below it for a person to complete) rather than a
test that asserts something wrong: params or results redacted as sensitive,
values truncated for size or not storable as JSON.

``CopyAsTestMixin`` adds the test, with a Copy button, as a read-only field
in its own fieldset of the call's change page (mixed into CallAdmin).
"""

import datetime
import keyword
import pprint
import re

from django.contrib import admin
from django.template.loader import render_to_string
from django.utils.translation import gettext_lazy as _

from ..log.escaping import unescape_json, unescape_text
from ..log.redaction import REDACTED
from ..log.rows import TRUNCATED_KEY
from ..models import Outcome

TEMPLATE = "admin/jsonrpc_app/call/copy_as_test.html"
# Internal errors: the data (a traceback when EXPOSE_EXCEPTIONS is on) is not asserted.
INTERNAL_ERROR = -32603
_UNSERIALIZABLE_KEY = "__unserializable__"


def _literal(value, indent=0):
    """Return ``value`` (JSON-native) as a Python literal, continued lines indented by ``indent``."""
    text = pprint.pformat(value, width=max(40, 96 - indent), sort_dicts=False)
    return text.replace("\n", "\n" + " " * indent)


def _walk(value):
    yield value
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def _problems(value, what):
    """Return why ``value`` (as logged) is not what was sent or answered, as sentences."""
    found = []
    for item in _walk(value):
        if item == REDACTED:
            found.append("%s hold values redacted as sensitive in the call log (%s)" % (what, REDACTED))
        elif isinstance(item, dict) and item.get(TRUNCATED_KEY) is True:
            found.append("%s were truncated in the call log (LOG_MAX_VALUE_BYTES)" % what)
        elif isinstance(item, dict) and _UNSERIALIZABLE_KEY in item:
            found.append("%s could not be stored as JSON in the call log" % what)
    return list(dict.fromkeys(found))


def _name(call):
    stem = re.sub(r"\W+", "_", call.method or "invalid_request").strip("_").lower() or "method"
    if stem[0].isdigit():
        stem = "m_" + stem
    return "test_%s_as_logged_in_call_%s" % (stem, call.pk)


def _arguments(method, params, indent):
    """Return the argument list of ``rpc.call(...)`` for ``method`` and the logged ``params``."""
    args = [_literal(method)]
    if isinstance(params, list) and params:
        args.extend(_literal(p, indent) for p in params)
    elif isinstance(params, dict) and params:
        if all(isinstance(k, str) and k.isidentifier() and not keyword.iskeyword(k) for k in params):
            args.extend("%s=%s" % (k, _literal(v, indent + len(k) + 1)) for k, v in params.items())
        else:
            args.append("**" + _literal(params, indent + 2))
    return ", ".join(args)


def replay_test_source(call):
    """Return the source of a pytest module with one test replaying ``call`` (a logged Call)."""
    params = unescape_json(call.params)
    result = unescape_json(call.result)
    error_data = unescape_json(call.error_data)
    invalid = not call.method
    failed = call.outcome != Outcome.OK

    skip = _problems(params, "the params" if not invalid else "the request")
    if not failed and not call.is_notification:
        skip += _problems(result, "the result")
    if failed and call.error_code != INTERNAL_ERROR:
        skip += _problems(error_data, "the error data")

    imports = ["import pytest"] if (failed or skip) else []
    if failed and not invalid:
        imports.append("from jsonrpc_app import JsonRpcError")
    when = call.created_at.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if call.created_at else "?"
    fixtures = ["rpc"]
    body = []
    if call.username:
        fixtures.append("django_user_model")
        body += [
            "# Called by %s: log in a user of that name (give it the permissions the method needs)."
            % call.username,
            "user = django_user_model.objects.create_user(%s)" % _literal(call.username),
            "rpc.client.force_login(user)",
        ]
    if skip:
        body.append("pytest.skip(%s)" % _literal("; ".join(skip) + ": put the values sent in the replay below"))

    if invalid:
        # The log holds the whole element as it was sent.
        body.append("answer = rpc.raw(%s)" % _literal(params, 15))
        body.append("assert answer[\"error\"][\"code\"] == %d" % (call.error_code if call.error_code is not None else -32600))
    elif call.is_notification:
        body.append("rpc.notify(%s)" % _arguments(call.method, params, 11))
        body.append("assert rpc.last_response.status_code == 204")
    elif failed:
        body.append("with pytest.raises(JsonRpcError) as raised:")
        body.append("    rpc.call(%s)" % _arguments(call.method, params, 13))
        body.append("assert raised.value.code == %d" % call.error_code)
        body.append("assert raised.value.message == %s" % _literal(unescape_text(call.error_message), 29))
        if call.error_code == INTERNAL_ERROR:
            if error_data is not None:
                body.append("# The logged error data (a traceback) is not asserted.")
        else:
            body.append("assert raised.value.data == %s" % _literal(error_data, 26))
    else:
        body.append("result = rpc.call(%s)" % _arguments(call.method, params, 18))
        body.append("assert result == %s" % _literal(result, 17))

    lines = [
        '"""A test written from the call log of jsonrpc_app ("Copy as test" in the admin)."""',
        "",
        *imports,
        *([""] if imports else []),
        "",
        "def %s(%s):" % (_name(call), ", ".join(fixtures)),
        '    """Replay call #%s of the call log (%s, %s)."""' % (call.pk, call.method or "an invalid request", when),
    ]
    lines += ["    " + line.replace("\n", "\n    ") if line else "" for line in body]
    return "\n".join(lines) + "\n"


class CopyAsTestMixin:
    """Show ``replay_test_source()`` of the call, with a Copy button, in a fieldset of its own."""

    copy_as_test_template = TEMPLATE

    def get_fieldsets(self, request, obj=None):
        fieldsets = list(super().get_fieldsets(request, obj))
        if obj is not None:
            fieldsets.append((_("Copy as test"), {"fields": ["copy_as_test"]}))
        return fieldsets

    def get_readonly_fields(self, request, obj=None):
        return [*super().get_readonly_fields(request, obj), "copy_as_test"]

    @admin.display(description=_("pytest test"))
    def copy_as_test(self, obj):
        return render_to_string(self.copy_as_test_template, {"source": replay_test_source(obj), "call": obj})
