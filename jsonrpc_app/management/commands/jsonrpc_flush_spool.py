"""Replay the call log's spool into the log database (see jsonrpc_app.log.store)."""

from django.core.management.base import BaseCommand, CommandError

from jsonrpc_app.log import spool, store, writer
from jsonrpc_app.conf import jsonrpc_settings


class Command(BaseCommand):
    help = (
        "Write every envelope waiting in the call log's spool (SPOOL_DIR) to the log "
        "database, exactly once, and delete the spool files replayed."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--database",
            default=None,
            help="Database alias to write to (default: JSONRPC['LOG_DATABASE']).",
        )
        parser.add_argument(
            "--spool-dir",
            default=None,
            help="Spool directory to replay (default: JSONRPC['SPOOL_DIR']).",
        )

    def handle(self, *args, database=None, spool_dir=None, **options):
        using = database or jsonrpc_settings.LOG_DATABASE
        # What this process's background writer holds goes first (to the
        # log, or to the spool replayed below).
        writer.flush()
        result = store.flush(using=using, directory=spool_dir)
        left = spool.status(result.directory)
        if result.error is not None:
            raise CommandError(
                "The call log database %r cannot be written (%s: %s); wrote %d envelopes, "
                "%d stay in the spool in %s."
                % (
                    using,
                    type(result.error).__name__,
                    str(result.error).strip(),
                    result.written,
                    left.pending,
                    result.directory,
                )
            )
        self.stdout.write(
            "Wrote %d envelopes to the call log %r from %d spool files in %s "
            "(%d were already there)."
            % (result.written, using, result.files, result.directory, result.present)
        )
        if result.busy:
            self.stdout.write("%d spool files are being replayed by another process." % result.busy)
        if left.pending:
            self.stdout.write("%d envelopes are still waiting in the spool." % left.pending)
        if left.rejected:
            self.stderr.write(
                "%d lines the database refused are kept in %s/*%s (not replayed)."
                % (left.rejected, result.directory, spool.REJECTED)
            )
