"""
``python manage.py jsonrpc_prune --older-than 30d`` -- delete old call log rows.

Deletes envelopes (and their calls) received before a cut-off and/or all but
the newest N envelopes, in chunks of its own transaction each, so that a log
of millions of rows is pruned without one giant transaction or lock.
"""

import datetime
import re

from django.core.management.base import BaseCommand, CommandError
from django.db import router, transaction
from django.db.models import Q
from django.utils import timezone

from jsonrpc_app.models import Call, Envelope

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_AGE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$", re.IGNORECASE)


def parse_age(text):
    """Return the timedelta of an age such as ``30d``, ``12h``, ``2w``, ``90m`` or ``45s``."""
    match = _AGE.match(text or "")
    if match is None:
        raise ValueError(
            "%r is not an age: write a number and a unit, s, m, h, d or w (e.g. 30d)." % text
        )
    return datetime.timedelta(**{_UNITS[match.group(2).lower()]: int(match.group(1))})


class Command(BaseCommand):
    help = (
        "Delete JSON-RPC call log envelopes and their calls: those older than "
        "--older-than, and/or all but the newest --keep. Deletes in chunks."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than",
            metavar="AGE",
            help="Delete envelopes received more than AGE ago: 30d, 12h, 2w, 90m, 45s.",
        )
        parser.add_argument(
            "--keep",
            type=int,
            metavar="N",
            help="Keep the newest N envelopes, delete the rest (with --older-than: "
            "delete only what is both old and not among the newest N).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Print what would be deleted, delete nothing.",
        )
        parser.add_argument(
            "--chunk-size",
            type=int,
            default=1000,
            metavar="ROWS",
            help="Rows deleted per transaction (default 1000).",
        )
        parser.add_argument(
            "--database",
            help="The database alias of the log (default: where the router sends it, "
            "JSONRPC['LOG_DATABASE']).",
        )

    def handle(self, *args, older_than=None, keep=None, dry_run=False, chunk_size=1000,
               database=None, verbosity=1, **options):
        if older_than is None and keep is None:
            raise CommandError("Say what to delete: --older-than AGE, --keep N, or both.")
        if keep is not None and keep < 0:
            raise CommandError("--keep must be 0 or more.")
        if chunk_size < 1:
            raise CommandError("--chunk-size must be 1 or more.")
        using = database or router.db_for_write(Envelope)
        condition = Q()
        what = []
        if older_than is not None:
            try:
                age = parse_age(older_than)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            cutoff = timezone.now() - age
            condition &= Q(created_at__lt=cutoff)
            what.append("received before %s" % cutoff.isoformat(timespec="seconds"))
        if keep is not None:
            condition &= self._older_than_newest(using, keep)
            what.append("not among the newest %d" % keep)
        description = " and ".join(what)
        envelopes = Envelope.objects.using(using).filter(condition)

        if dry_run:
            count = envelopes.count()
            calls = Call.objects.using(using).filter(envelope__in=envelopes.values("pk")).count()
            self.stdout.write(
                "Would delete %d envelopes and %d calls (%s); dry run, nothing deleted."
                % (count, calls, description)
            )
            return

        deleted_envelopes = deleted_calls = chunks = 0
        while True:
            ids = list(envelopes.order_by("created_at", "pk").values_list("pk", flat=True)[:chunk_size])
            if not ids:
                break
            # The calls first, chunk by chunk: an envelope may hold a thousand.
            while True:
                call_ids = list(
                    Call.objects.using(using).filter(envelope_id__in=ids)
                    .order_by().values_list("pk", flat=True)[:chunk_size]
                )
                if not call_ids:
                    break
                with transaction.atomic(using=using):
                    n, _ = Call.objects.using(using).filter(pk__in=call_ids).delete()
                deleted_calls += n
                chunks += 1
            with transaction.atomic(using=using):
                # Replays of what goes keep their rows and lose the link (SET_NULL).
                _, per_model = Envelope.objects.using(using).filter(pk__in=ids).delete()
            deleted_envelopes += per_model.get(Envelope._meta.label, 0)
            deleted_calls += per_model.get(Call._meta.label, 0)
            chunks += 1
            if verbosity >= 2:
                self.stdout.write("  deleted %d envelopes so far, %d calls" % (deleted_envelopes, deleted_calls))
        self.stdout.write(
            "Deleted %d envelopes and %d calls (%s) in %d chunks of at most %d rows."
            % (deleted_envelopes, deleted_calls, description, chunks, chunk_size)
        )

    def _older_than_newest(self, using, keep):
        """Return the condition "not among the newest ``keep`` envelopes"."""
        if keep == 0:
            return Q()
        newest = (
            Envelope.objects.using(using)
            .order_by("-created_at", "-pk")
            .values_list("created_at", "pk")[keep - 1:keep]
        )
        row = list(newest)
        if not row:
            return Q(pk__in=[])  # fewer than N envelopes: keep them all
        created_at, pk = row[0]
        return Q(created_at__lt=created_at) | Q(created_at=created_at, pk__lt=pk)
