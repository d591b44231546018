"""
``python manage.py jsonrpc_prune --older-than 30d`` -- delete old call log rows.

Deletes envelopes (and their calls) received before a cut-off and/or all but
the newest N envelopes, in chunks of its own transaction each, so that a log
of millions of rows is pruned without one giant transaction or lock.

On PostgreSQL it deletes ranges of envelopes with their calls, a
transaction each (``_delete_by_ranges``): ~293,000 envelopes and ~411,000
calls, 30 days out of a 2-year log of 10,000,000 calls, in about 3 s (docs/scale.md,
"The log at scale"); elsewhere chunks of ids through the ORM.
"""

import datetime
import re

from django.core.management.base import BaseCommand, CommandError
from django.db import connections, router, transaction
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
            default=None,
            metavar="ROWS",
            help="Rows deleted per transaction (default 1000; on PostgreSQL, envelopes "
            "deleted with their calls per transaction, default 5000).",
        )
        parser.add_argument(
            "--database",
            help="The database alias of the log (default: where the router sends it, "
            "JSONRPC['LOG_DATABASE']).",
        )

    def handle(self, *args, older_than=None, keep=None, dry_run=False, chunk_size=None,
               database=None, verbosity=1, **options):
        if older_than is None and keep is None:
            raise CommandError("Say what to delete: --older-than AGE, --keep N, or both.")
        if keep is not None and keep < 0:
            raise CommandError("--keep must be 0 or more.")
        if chunk_size is not None and chunk_size < 1:
            raise CommandError("--chunk-size must be 1 or more.")
        using = database or router.db_for_write(Envelope)
        by_ranges = connections[using].vendor == "postgresql"
        if chunk_size is None:
            chunk_size = 5000 if by_ranges else 1000
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

        if by_ranges:
            deleted_envelopes, deleted_calls, chunks = self._delete_by_ranges(using, envelopes, chunk_size, verbosity)
        else:
            deleted_envelopes, deleted_calls, chunks = self._delete_by_chunks(using, envelopes, chunk_size, verbosity)
        self.stdout.write(
            "Deleted %d envelopes and %d calls (%s) in %d chunks of at most %d rows."
            % (deleted_envelopes, deleted_calls, description, chunks, chunk_size)
        )

    def _delete_by_chunks(self, using, envelopes, chunk_size, verbosity):
        """
        Any database: ``chunk_size`` envelope ids at a time, oldest first;
        their calls first, ``chunk_size`` at a time, then the envelopes (the
        ORM's delete: replays of what goes lose their link), each delete in a
        transaction of its own.
        """
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
            self._progress(verbosity, deleted_envelopes, deleted_calls)
        return deleted_envelopes, deleted_calls, chunks

    def _delete_by_ranges(self, using, envelopes, chunk_size, verbosity):
        """
        PostgreSQL: the envelopes in ranges of the (created_at, id) index,
        ``chunk_size`` envelopes a range, oldest first, each range with its
        calls and the unlinking of its replays in one transaction: a DELETE
        of the calls and one of the envelopes, each on one array of ids (one
        parameter however many ids), and an UPDATE of the few replays found
        in the id range (through the partial replay_of index).

        Each range starts after the last one (keyset), bounded below by the
        last range's time so that the index scan starts there: PostgreSQL
        keeps a deleted row's index entries until VACUUM, so "the oldest
        left" would read every entry deleted so far again, range after range.
        The transactions commit without waiting for the WAL to reach the disk
        (``synchronous_commit = off``): a crash can only undo the last ranges
        deleted, which the next prune deletes again.
        """
        connection = connections[using]
        quote = connection.ops.quote_name
        env_table, call_table = quote(Envelope._meta.db_table), quote(Call._meta.db_table)
        pk, replay_of = quote(Envelope._meta.pk.column), quote(Envelope.replay_of.field.column)
        delete_calls = "DELETE FROM %s WHERE %s = ANY(%%s)" % (call_table, quote(Call.envelope.field.column))
        find_replays = "SELECT {pk}, {r} FROM {t} WHERE {r} IS NOT NULL AND {r} BETWEEN %s AND %s".format(
            pk=pk, r=replay_of, t=env_table)
        unlink = "UPDATE %s SET %s = NULL WHERE %s = ANY(%%s)" % (env_table, replay_of, pk)
        delete_envelopes = "DELETE FROM %s WHERE %s = ANY(%%s)" % (env_table, pk)
        # A range whose ids are all doomed (the usual case: ids follow time) is
        # deleted as a range, one scan along each index instead of a probe per id.
        count_range = "SELECT count(*) FROM %s WHERE %s BETWEEN %%s AND %%s" % (env_table, pk)
        delete_call_range = "DELETE FROM %s WHERE %s BETWEEN %%s AND %%s" % (
            call_table, quote(Call.envelope.field.column))
        delete_envelope_range = "DELETE FROM %s WHERE %s BETWEEN %%s AND %%s AND %s <= %%s" % (
            env_table, pk, quote(Envelope._meta.get_field("created_at").column))
        deleted_envelopes = deleted_calls = chunks = 0
        after = None
        while True:
            page = envelopes
            if after is not None:
                page = page.filter(
                    Q(created_at__gte=after[0]),  # the index scan's start
                    Q(created_at__gt=after[0]) | Q(created_at=after[0], pk__gt=after[1]),
                )
            # The ids only: a timestamptz costs Django's psycopg loader ~10 µs to parse.
            ids = list(page.order_by("created_at", "pk").values_list("pk", flat=True)[:chunk_size])
            if not ids:
                break
            after = (Envelope.objects.using(using).values_list("created_at", flat=True).get(pk=ids[-1]), ids[-1])
            doomed = set(ids)
            low, high = min(ids), max(ids)
            with transaction.atomic(using=using), connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit = off")
                cursor.execute(count_range, [low, high])
                whole_range = cursor.fetchone()[0] == len(ids)
                if whole_range:
                    cursor.execute(delete_call_range, [low, high])
                else:
                    cursor.execute(delete_calls, [ids])
                deleted_calls += cursor.rowcount
                # Replays of what goes keep their rows and lose the link (SET_NULL).
                cursor.execute(find_replays, [low, high])
                replays = [r for r, original in cursor.fetchall() if original in doomed and r not in doomed]
                if replays:
                    cursor.execute(unlink, [replays])
                if whole_range:
                    cursor.execute(delete_envelope_range, [low, high, after[0]])
                else:
                    cursor.execute(delete_envelopes, [ids])
                deleted_envelopes += cursor.rowcount
            chunks += 1
            self._progress(verbosity, deleted_envelopes, deleted_calls)
        return deleted_envelopes, deleted_calls, chunks

    def _progress(self, verbosity, envelopes, calls):
        if verbosity >= 2:
            self.stdout.write("  deleted %d envelopes so far, %d calls" % (envelopes, calls))

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
