"""
``manage.py jsonrpc_log_loader``: load the call log's journal into the
database, for deployments that run one loader per host (LOG_LOADER =
"command": the workers only append). Runs until stopped (SIGTERM, Ctrl-C),
or once with ``--once``.
"""

import os
import signal
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from jsonrpc_app.conf import jsonrpc_settings
from jsonrpc_app.log import journal, loader


class Command(BaseCommand):
    help = "Load the call log's journal (LOG_JOURNAL_DIR, or the Redis stream) into the log database."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Load what waits now, then exit.")
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="Seconds between looks at the journal (default: LOG_LOADER_INTERVAL).",
        )
        parser.add_argument("--database", default=None, help="The log database alias (default: LOG_DATABASE).")
        parser.add_argument("--directory", default=None, help="The journal directory (default: LOG_JOURNAL_DIR).")
        parser.add_argument(
            "--nice",
            type=int,
            default=0,
            metavar="N",
            help="Lower this process's CPU priority by N (1-19, as nice(1)): the loader then takes the CPU "
            "the workers leave, and catches up when they are idle.",
        )

    def handle(self, *args, once=False, interval=None, database=None, directory=None, nice=0, **options):
        if nice:
            if not 1 <= nice <= 19:
                raise CommandError("--nice takes 1 to 19, not %d" % nice)
            os.nice(nice)
        where = "the Redis stream %s" % jsonrpc_settings.LOG_JOURNAL_REDIS_STREAM
        if jsonrpc_settings.LOG_JOURNAL != "redis":
            where = directory or journal.journal_dir()
        if once:
            result = loader.load_pending(database, directory)
            self._report(result, where)
            return
        stopping = []
        signal.signal(signal.SIGTERM, lambda *a: stopping.append(True))
        delay = interval if interval is not None else jsonrpc_settings.LOG_LOADER_INTERVAL
        self.stdout.write("Loading the call log journal of %s every %.2f s (Ctrl-C to stop)." % (where, delay))
        failing = False
        try:
            while not stopping:
                result = loader.load_pending(database, directory)
                if result.written or result.rejected or (result.error is not None) != failing:
                    self._report(result, where)
                failing = result.error is not None
                close_old_connections()
                time.sleep(max(delay, jsonrpc_settings.SPOOL_RETRY_DELAY or 1.0) if failing else delay)
        except KeyboardInterrupt:
            pass

    def _report(self, result, where):
        self.stdout.write(
            "%d envelopes (%d calls) loaded from %s; %d already in the log, %d rejected, "
            "%d journal files done." % (result.written, result.calls, where, result.present, result.rejected, result.files)
        )
        if result.error is not None:
            self.stderr.write("The log database cannot be written: %s" % result.error)
