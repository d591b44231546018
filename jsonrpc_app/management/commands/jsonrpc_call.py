"""
``python manage.py jsonrpc_call METHOD [PARAMS_JSON]`` -- one call without HTTP.

The request (or, with ``--batch``, a whole body read from a file or stdin)
runs through ``service.answer()``, the path of every caller, as the user
``--user`` names (else anonymous), with the permissions of the methods
applied as for that user, and is logged with source ``cli`` unless
``--no-log``. The response is printed as indented JSON. Exit status: 0 when
every response is a result (or there is none: notifications only), 1 when
any is a JSON-RPC error, 2 for bad arguments.
"""

import json
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.management.base import BaseCommand, CommandError

from jsonrpc_app import log, protocol, service
from jsonrpc_app.context import CallContext
from jsonrpc_app.models import Source
from jsonrpc_app.registry import registry_named


def _bad(message):
    return CommandError(message, returncode=2)


class Command(BaseCommand):
    help = (
        "Call a JSON-RPC method (or answer a whole body with --batch) through the same "
        "path as the HTTP endpoint, as --user or anonymous, and print the response. "
        "Exit status 0: results only, 1: an error answered, 2: bad arguments."
    )

    def add_arguments(self, parser):
        parser.add_argument("method", nargs="?", metavar="METHOD", help="The method to call.")
        parser.add_argument(
            "params",
            nargs="?",
            metavar="PARAMS_JSON",
            help='The params as a JSON array (by position) or object (by name): \'[42, 23]\'.',
        )
        parser.add_argument("--user", metavar="USERNAME", help="Call as this user (default: anonymous).")
        parser.add_argument(
            "--batch",
            metavar="FILE",
            help="Answer the JSON-RPC body (a request or a batch) in FILE, or on stdin for -.",
        )
        parser.add_argument("--no-log", action="store_true", help="Leave the call out of the call log.")
        parser.add_argument(
            "--endpoint",
            default="default",
            metavar="NAME",
            help="The name of the registry to call (default: the default registry).",
        )
        parser.add_argument(
            "--id",
            dest="request_id",
            default="1",
            metavar="ID",
            help="The request's id: a number, a JSON string or a bare word (default 1).",
        )

    def handle(self, *args, method=None, params=None, user=None, batch=None, no_log=False,
               endpoint="default", request_id="1", **options):
        try:
            registry = registry_named(endpoint)
        except LookupError as exc:
            raise _bad(str(exc)) from None
        if batch is not None:
            if method is not None:
                raise _bad("Give METHOD [PARAMS_JSON] or --batch FILE, not both.")
            body = self._read(batch)
        elif method is None:
            raise _bad("Give the METHOD to call (or --batch FILE with a whole body).")
        else:
            body = json.dumps(_request(method, params, request_id), ensure_ascii=False)
        context = CallContext(
            user=_user(user),
            source=Source.CLI,
            registry=registry,
            log=log.is_on() and not no_log,
        )
        answer = service.answer(body, context)
        if answer.response is None:
            return  # notifications only: nothing to say
        self.stdout.write(
            json.dumps(protocol.loads(answer.content), indent=2, ensure_ascii=False)
        )
        responses = answer.response if isinstance(answer.response, list) else [answer.response]
        errors = sum(1 for r in responses if "error" in r)
        if errors:
            raise CommandError(
                "%d of %d responses %s an error." % (errors, len(responses), "is" if errors == 1 else "are"),
                returncode=1,
            )

    def _read(self, name):
        if name == "-":
            return sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
        try:
            with open(name, "rb") as f:
                return f.read()
        except OSError as exc:
            raise _bad("Cannot read %s: %s" % (name, exc.strerror or exc)) from None


def _request(method, params_text, id_text):
    """The request object calling ``method``; CommandError (2) for params or an id that will not do."""
    request = {"jsonrpc": protocol.VERSION, "method": method}
    if params_text is not None:
        try:
            params = protocol.loads(params_text)
        except ValueError as exc:
            raise _bad("PARAMS_JSON is not valid JSON (%s): %s" % (exc, params_text)) from None
        if not isinstance(params, (list, dict)):
            raise _bad("PARAMS_JSON must be a JSON array or object, not %s." % params_text)
        request["params"] = params
    try:
        rid = protocol.loads(id_text)
    except ValueError:
        rid = id_text  # a bare word is meant as a string id
    if isinstance(rid, bool) or not (rid is None or isinstance(rid, (str, int, float))):
        raise _bad("--id must be a string, a number or null, not %s." % id_text)
    request["id"] = rid
    return request


def _user(username):
    """The user called ``username``, or AnonymousUser; CommandError (2) for no such active user."""
    if username is None:
        return AnonymousUser()
    model = get_user_model()
    try:
        user = model._default_manager.get_by_natural_key(username)
    except model.DoesNotExist:
        raise _bad("No user is named %r." % username) from None
    if not user.is_active:
        raise _bad("The user %r is not active." % username)
    return user
