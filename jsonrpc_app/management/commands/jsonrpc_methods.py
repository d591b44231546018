"""
``python manage.py jsonrpc_methods`` -- the methods of a registry as a client sees them.

One method a paragraph: its name and signature (without the CallContext
parameter, which clients never fill) and the first line of its docstring;
``--json`` prints the OpenRPC document that ``rpc.discover`` answers instead.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from jsonrpc_app import openrpc
from jsonrpc_app.encoding import json_default
from jsonrpc_app.registry import registry_named


class Command(BaseCommand):
    help = (
        "List the JSON-RPC methods of a registry with their signatures and first doc lines "
        "(hidden and disabled ones only with --all), or print its OpenRPC document (--json)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--json",
            action="store_true",
            dest="as_json",
            help="Print the OpenRPC document (what rpc.discover answers) as JSON.",
        )
        parser.add_argument(
            "--all",
            action="store_true",
            dest="include_all",
            help="List hidden and disabled methods too (rpc.discover among them).",
        )
        parser.add_argument(
            "--endpoint",
            default="default",
            metavar="NAME",
            help="The name of the registry to list (default: the default registry).",
        )

    def handle(self, *args, as_json=False, include_all=False, endpoint="default", **options):
        try:
            registry = registry_named(endpoint)
        except LookupError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if as_json:
            if include_all:
                raise CommandError(
                    "--all is for the listing: the OpenRPC document never holds hidden methods.",
                    returncode=2,
                )
            document = openrpc.document(registry)
            self.stdout.write(_json_text(document))
            return
        methods = list(registry) if include_all else openrpc.listed_methods(registry)
        for method in methods:
            marks = [mark for mark, on in (("hidden", method.hidden), ("disabled", not method.enabled)) if on]
            line = method.name + method.client_signature
            if marks:
                line += "  [%s]" % ", ".join(marks)
            self.stdout.write(line)
            if method.summary:
                self.stdout.write("    " + method.summary)


def _json_text(value):
    return json.dumps(value, indent=2, ensure_ascii=False, default=json_default)
