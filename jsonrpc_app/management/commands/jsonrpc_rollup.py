"""Rebuild or trim the usage rollups (see jsonrpc_app.log.rollup)."""

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from jsonrpc_app.conf import jsonrpc_settings
from jsonrpc_app.log import rollup


class Command(BaseCommand):
    help = (
        "Usage rollups: --rebuild recomputes them from the call log (Call), chunk by chunk, in one "
        "transaction; --trim deletes minute rows older than JSONRPC['USAGE_MINUTE_DAYS'] days."
    )

    def add_arguments(self, parser):
        parser.add_argument("--rebuild", action="store_true", help="Recompute every rollup from Call.")
        parser.add_argument(
            "--trim", action="store_true", help="Delete minute rows older than USAGE_MINUTE_DAYS days."
        )
        parser.add_argument(
            "--database", default=None, help="Database alias of the log (default: JSONRPC['LOG_DATABASE'])."
        )
        parser.add_argument(
            "--chunk-size", type=int, default=20000, help="Calls read per query while rebuilding (default 20000)."
        )

    def handle(self, *args, rebuild=False, trim=False, database=None, chunk_size=20000, **options):
        if not rebuild and not trim:
            raise CommandError("Say what to do: --rebuild, --trim, or both.")
        if chunk_size < 1:
            raise CommandError("--chunk-size must be a positive number, not %d." % chunk_size)
        using = database or jsonrpc_settings.LOG_DATABASE
        if using not in connections:
            raise CommandError("No database is called %r (see DATABASES)." % using)
        if rebuild:
            verbose = options.get("verbosity", 1) > 1
            progress = (lambda n: self.stdout.write("  %d calls read" % n)) if verbose else None
            calls = rollup.rebuild(using, chunk=chunk_size, progress=progress)
            self.stdout.write("Rebuilt the usage rollups of %r from %d calls." % (using, calls))
        if trim:
            deleted = rollup.trim(using)
            self.stdout.write("Deleted %d minute rows of the usage rollups of %r." % (deleted, using))
