"""
The call log's loader: the journal's lines (jsonrpc_app.log.journal on disk,
jsonrpc_app.log.redis_journal on Redis Streams) written to the database in
bulk, off the request.

``load_pending()`` loads what waits: chunks of up to ``LOG_LOADER_CHUNK``
envelopes, each in one transaction (on PostgreSQL with ``COPY``, elsewhere
with the log's multi-row INSERTs, jsonrpc_app.log.sql), then marks the chunk
done (the file journal's checkpoint; ``XACK`` on Redis). Exactly once: each
envelope carries its uid, and a chunk skips the uids already in the log, so
a loader that dies between its commit and its checkpoint loads nothing twice.

It runs as a thread of each process (``LOG_LOADER = "thread"``, started by
the first journal append), or only in ``manage.py jsonrpc_log_loader``
(``LOG_LOADER = "command"``: the workers only append).

``write_chunk()`` is also how the spool's replay (jsonrpc_app.log.spool)
writes what it replays.
"""

import json
import logging
import os
import re
import sys
import threading
import time

import orjson
from django.db import IntegrityError, InterfaceError, OperationalError, connections, transaction
from django.db.models import SET_NULL, DateTimeField, FloatField

from ..conf import jsonrpc_settings
from ..models import Call, Envelope
from . import journal, lines
from .escaping import _has_exponent_float, dumps as exact_dumps
from .process import PerProcess
from . import adapt, multirow, rollup
from .sql import insert_many

logger = logging.getLogger("jsonrpc_app")

# Errors that say the database could not be reached rather than what was sent.
UNREACHABLE = (OperationalError, InterfaceError)


class LoadResult:
    """What one ``load_pending()`` did."""

    def __init__(self):
        self.written = 0  # envelopes written to the log
        self.calls = 0  # their calls
        self.present = 0  # envelopes found in the log already (skipped)
        self.rejected = 0  # lines the database refused, kept aside
        self.files = 0  # sealed journals loaded to their end (and deleted)
        self.error = None  # the error that stopped it (database unreachable)

    def __repr__(self):
        return "<LoadResult written=%d calls=%d present=%d rejected=%d files=%d error=%r>" % (
            self.written, self.calls, self.present, self.rejected, self.files, self.error,
        )


# -- one chunk ---------------------------------------------------------------------


def fix_references(rows_list, using):
    """
    Null the SET_NULL foreign keys whose rows are gone (a replayed envelope
    pruned since): what the ORM would have done had the row been written
    before the delete, with or without a database constraint. (The user
    keys are DO_NOTHING: a deleted user's id stays, as in rows written before.)
    """
    for model, objects in (
        (Envelope, lambda: [r.envelope for r in rows_list]),
        (Call, lambda: [c for r in rows_list for c in r.calls]),
    ):
        fields = [
            f for f in model._meta.concrete_fields if f.is_relation and f.remote_field.on_delete is SET_NULL
        ]
        if not fields:
            continue  # (Call has none: its calls stay columns where they are)
        objects = objects()
        for f in fields:
            wanted = {o.__dict__.get(f.attname) for o in objects} - {None}
            if not wanted:
                continue
            target = f.related_model._default_manager.db_manager(using)
            present = set(target.filter(pk__in=wanted).values_list("pk", flat=True))
            for o in objects:
                if o.__dict__.get(f.attname) not in (None, *present):
                    o.__dict__[f.attname] = None


def write_chunk(items, using):
    """
    Write ``items`` (pairs of (line, rows.LogRows)) to ``using``, each
    envelope exactly once; return (written, present, rejected pairs of (line,
    reason)).

    One transaction for the chunk; when the database refuses it for what was
    sent (not for being unreachable), envelope by envelope, and the ones it
    refuses are returned as rejected. Raise the errors that say the database
    cannot be reached (nothing of the chunk is then written).
    """
    manager = Envelope.objects.using(using)
    try:
        with transaction.atomic(using=using):
            present = set(
                manager.filter(uid__in=[r.envelope.uid for _line, r in items]).values_list("uid", flat=True)
            )
            todo, seen = [], set(present)
            for _line, rows in items:
                uid = rows.envelope.uid
                if uid not in seen:
                    seen.add(uid)
                    todo.append(rows)
            if todo:
                fix_references(todo, using)
                _insert(todo, using)
    except UNREACHABLE:
        raise
    except Exception:
        # One envelope the database (or a column's adapter) refuses, or a
        # race on a uid: one by one, so that one bad line blocks nothing.
        pass
    else:
        return len(todo), len(items) - len(todo), []
    written = present = 0
    rejected = []
    for line, rows in items:
        _unsave(rows)
        try:
            with transaction.atomic(using=using):
                if manager.filter(uid=rows.envelope.uid).exists():
                    present += 1
                    continue
                fix_references([rows], using)
                _insert([rows], using)
        except UNREACHABLE:
            raise
        except IntegrityError as exc:
            if manager.filter(uid=rows.envelope.uid).exists():
                present += 1
            else:
                rejected.append((line, exc))
        except Exception as exc:
            rejected.append((line, exc))
        else:
            written += 1
    return written, present, rejected


def _unsave(rows):
    rows.envelope.pk = None
    rows.envelope._state.adding = True
    for c in rows.calls:
        c.__dict__["id"] = None
        c.__dict__["envelope_id"] = None


def _insert(rows_list, using):
    """Write the chunk's rows and add its calls to the usage rollups, in the caller's transaction."""
    conn = connections[using]
    if conn.vendor == "postgresql" and jsonrpc_settings.LOG_LOADER_COPY:
        rollup.record_columns(conn, _copy(conn, rows_list))
        return
    columns = _insert_sqlite(conn, rows_list) if conn.vendor == "sqlite" else None
    if columns is None:
        insert_many(rows_list, using)  # with the rollups (jsonrpc_app.log.sql)
    else:
        rollup.record_columns(conn, columns)


_CALL_NAMES = [f.attname for f in adapt.CALL_FIELDS]


def _call_columns(rows_list, ids):
    """
    The chunk's calls column by column ({attname: list}), ``envelope_id``
    from ``ids`` (one per envelope): a split line's columns as they are,
    other envelopes' from their Call instances.
    """
    out = {name: [] for name in _CALL_NAMES}
    for pk, rows in zip(ids, rows_list):
        split = rows.columns()
        if split is not None:
            for name, values in out.items():
                values.extend(split.column(name) if name != "envelope_id" else [pk] * split.count)
        elif rows.calls:
            dicts = [c.__dict__ for c in rows.calls]
            for name, values in out.items():
                values.extend([d[name] for d in dicts] if name != "envelope_id" else [pk] * len(dicts))
    return out


# -- SQLite: multi-row INSERTs ---------------------------------------------------------


def _insert_sqlite(conn, rows_list):
    """
    SQLite: the envelopes, then all the calls, in multi-row INSERTs of a few
    fixed sizes on the driver's cursor (jsonrpc_app.log.multirow), where
    Django's cursor would cost a regular expression over every placeholder
    of each statement; the envelopes' new ids come back by RETURNING, told
    apart by their uids. Values are adapted as the ORM would
    (jsonrpc_app.log.adapt). Return the calls' columns as they were before
    adapting (for the rollups), or None (having run nothing) where that
    cannot be done (a value is an expression; a SQLite before 3.35).
    """
    if not conn.features.can_return_columns_from_insert:
        return None
    envelopes = adapt.adapted_columns(conn, adapt.ENVELOPE_FIELDS, [rows.envelope for rows in rows_list])
    if envelopes is None:
        return None
    # Adapted before anything is written; the envelope ids are filled in after.
    columns = _call_columns(rows_list, [0] * len(rows_list))
    splits = [rows.columns() for rows in rows_list]
    typed = frozenset.intersection(*(s.typed for s in splits)) if splits and None not in splits else frozenset()
    adapted = adapt.adapt_columns(conn, adapt.CALL_FIELDS, [columns[n] for n in _CALL_NAMES], typed)
    if adapted is None:
        return None
    quote = conn.ops.quote_name
    conn.ensure_connection()
    max_params = multirow.max_params(conn.connection)
    cursor = conn.connection.cursor()
    try:
        returned = multirow.insert(
            cursor, adapt.insert_head(conn, Envelope, adapt.ENVELOPE_FIELDS), envelopes, max_params,
            returning="%s, %s" % (quote(Envelope._meta.pk.column), quote(_UID_COLUMN)),
        )
        pk_of = {uid: pk for pk, uid in returned}
        ids = []
        for rows, uid in zip(rows_list, envelopes[_UID_AT]):
            pk = rows.envelope.__dict__["id"] = pk_of[uid]
            ids.extend([pk] * rows.call_count())
        if ids:
            adapted = list(adapted)
            adapted[_CALL_NAMES.index("envelope_id")] = ids
            multirow.insert(cursor, adapt.insert_head(conn, Call, adapt.CALL_FIELDS), adapted, max_params)
    finally:
        cursor.close()
    for rows in rows_list:
        rows.envelope._state.adding = False
        rows.envelope._state.db = conn.alias
    return columns


_UID_AT = [f.attname for f in adapt.ENVELOPE_FIELDS].index("uid")
_UID_COLUMN = Envelope._meta.get_field("uid").column


# -- PostgreSQL: COPY ---------------------------------------------------------------

_ENVELOPE_FIELDS = [f for f in Envelope._meta.concrete_fields if not f.primary_key]
_CALL_FIELDS = [f for f in Call._meta.concrete_fields if not f.primary_key]
_CALL_JSON = frozenset(f.attname for f in _CALL_FIELDS if f.get_internal_type() == "JSONField")
_EXPONENT = re.compile(rb"[0-9][eE]")
_sequences = {}


def _json_text(value):
    """The text of a JSON column's value as PostgreSQL reads it back unchanged (see escaping.db_json)."""
    try:
        data = orjson.dumps(value)
    except TypeError:
        data = json.dumps(value, separators=(",", ":")).encode()
    if _EXPONENT.search(data) is not None and _has_exponent_float(value):
        return exact_dumps(value)
    return data.decode()


def _json_texts(column):
    """The JSON texts of a JSON column's values (None for SQL NULL); ints as str() writes them (as orjson)."""
    if column and type(column[0]) is int and set(map(type, column)) == _INT:
        try:
            return list(map(int.__repr__, column))
        except ValueError:
            pass  # beyond the digits str() allows
    return [None if v is None else _json_text(v) for v in column]


def _datetime_texts(column):
    """
    str() of each datetime, as psycopg's COPY writes one, made once for each
    run of one value (a batch's calls share their envelope's time): a
    datetime's str() is a fifth of what COPY costs the loader otherwise.
    """
    out, last, text = [], None, None
    append = out.append
    for value in column:
        if value is not last:
            last, text = value, value if value is None or type(value) is str else str(value)
        append(text)
    return out


_INT = {int}
_CALL_TIMES = frozenset(f.attname for f in _CALL_FIELDS if isinstance(f, DateTimeField))
# A duration's text for COPY: 17 significant digits read back as the same double
# (psycopg writes repr(), the shortest such text, at twice the cost).
_CALL_FLOATS = frozenset(f.attname for f in _CALL_FIELDS if isinstance(f, FloatField))
_FLOAT_TEXT = "%.17g".__mod__


def _float_texts(column):
    if None in column:
        return [None if v is None else _FLOAT_TEXT(v) for v in column]
    return list(map(_FLOAT_TEXT, column))


def _copy(conn, rows_list):
    """
    COPY the envelopes and their calls: their ids taken from the envelope
    table's sequence first (one query), so that the calls can name them.
    The calls go column by column (a split line's as decode() read them);
    return those columns (for the rollups).
    """
    quote = conn.ops.quote_name
    table = Envelope._meta.db_table
    with conn.cursor() as cursor:
        seq = _sequences.get(conn.alias)
        if seq is None:
            cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [quote(table), Envelope._meta.pk.column])
            seq = _sequences[conn.alias] = cursor.fetchone()[0]
        cursor.execute("SELECT nextval(%s) FROM generate_series(1, %s)", [seq, len(rows_list)])
        ids = [r[0] for r in cursor.fetchall()]
        raw = cursor.cursor
        env_names = [f.attname for f in _ENVELOPE_FIELDS]
        columns = ", ".join(quote(c) for c in [Envelope._meta.pk.column] + [f.column for f in _ENVELOPE_FIELDS])
        with raw.copy("COPY %s (%s) FROM STDIN" % (quote(table), columns)) as copy:
            write = copy.write_row
            for pk, rows in zip(ids, rows_list):
                values = rows.envelope.__dict__
                values["id"] = pk
                write([pk] + [values[n] for n in env_names])
        columns = _call_columns(rows_list, ids)
        names = [f.attname for f in _CALL_FIELDS]
        values = [
            _json_texts(columns[n]) if n in _CALL_JSON
            else _datetime_texts(columns[n]) if n in _CALL_TIMES
            else _float_texts(columns[n]) if n in _CALL_FLOATS
            else columns[n]
            for n in names
        ]
        call_columns = ", ".join(quote(f.column) for f in _CALL_FIELDS)
        with raw.copy("COPY %s (%s) FROM STDIN" % (quote(Call._meta.db_table), call_columns)) as copy:
            write = copy.write_row
            for row in zip(*values):
                write(row)
    for rows in rows_list:
        rows.envelope._state.adding = False
        rows.envelope._state.db = conn.alias
    return columns


# -- the file journal ------------------------------------------------------------------


def _decode_all(raw_lines):
    """Return (pairs of (line, LogRows), rejected pairs of (line, reason))."""
    items, bad = [], []
    for line in raw_lines:
        try:
            items.append((line, lines.decode(line)))
        except Exception as exc:
            bad.append((line, exc))
    return items, bad


def _report_rejected(where, rejected):
    for line, reason in rejected:
        logger.error("Call log journal: a line cannot be loaded (%s); kept in %s", reason, where)


def _load_file(path, using, result, deadline):
    checkpoint = journal.Checkpoint.take(path)
    if checkpoint is None:
        return  # another loader holds it
    try:
        # Sealed before reading: nothing is appended after what is read.
        sealed = journal.is_sealed(path)
        chunk = jsonrpc_settings.LOG_LOADER_CHUNK
        while True:
            raw, end = journal.read_lines(path, checkpoint.offset, chunk)
            if not raw:
                break
            items, bad = _decode_all(raw)
            written, present, rejected = write_chunk(items, using) if items else (0, 0, [])
            rejected = bad + rejected
            if rejected:
                target = journal.reject(path, [line for line, _reason in rejected])
                _report_rejected(target, rejected)
            checkpoint.advance(end)
            result.written += written
            result.present += present
            result.rejected += len(rejected)
            result.calls += sum(r.call_count() for _line, r in items)
            if deadline is not None and time.monotonic() > deadline:
                return
        if sealed:
            tail = journal.torn_tail(path, checkpoint.offset)
            if tail.strip():
                # The process died (power loss) while writing its last line, before answering it.
                target = journal.reject(path, [tail])
                _report_rejected(target, [(tail, "torn line")])
                result.rejected += 1
            checkpoint.finish()
            result.files += 1
    finally:
        checkpoint.release()


def load_pending(using=None, directory=None, max_seconds=None):
    """
    Load every journal line that waits (LOG_JOURNAL: the directory's files,
    or the Redis stream) into ``using`` (LOG_DATABASE); return a LoadResult.

    Stops at the first error that says the database cannot be reached (in
    ``result.error``), or after ``max_seconds``; what was not loaded waits
    for the next call.
    """
    using = using or jsonrpc_settings.LOG_DATABASE
    result = LoadResult()
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    try:
        if jsonrpc_settings.LOG_JOURNAL == "redis":
            from . import redis_journal

            redis_journal.load(using, result, deadline, write_chunk, _decode_all)
        else:
            for path in journal.journals(directory):
                _load_file(path, using, result, deadline)
                if deadline is not None and time.monotonic() > deadline:
                    break
    except UNREACHABLE as exc:
        result.error = exc
        try:
            connections[using].close()
        except Exception:
            pass
    return result


# -- the loader thread -----------------------------------------------------------------


class _ProcessState:
    def __init__(self):
        self.lock = threading.Lock()
        self.thread = None
        self.wake = threading.Event()
        self.stopping = False
        self.failing = False


_current = PerProcess(_ProcessState).get


def ensure_running():
    """Start this process's loader thread unless it runs (LOG_LOADER = "thread"); cheap when it does."""
    state = _current()
    thread = state.thread
    if thread is not None and thread.is_alive():
        return
    if jsonrpc_settings.LOG_LOADER != "thread":
        return
    with state.lock:
        if state.thread is not None and state.thread.is_alive():
            return
        state.stopping = False
        thread = threading.Thread(target=_run, args=(state,), name="jsonrpc-log-loader", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # interpreter shutting down
            return
        state.thread = thread


def wake():
    """Ask this process's loader thread to load now rather than at its next interval."""
    _current().wake.set()


def stop(timeout=30):
    """Stop this process's loader thread after its current chunk (the next append starts another)."""
    state = _current()
    thread = state.thread
    if thread is None:
        return True
    state.stopping = True
    state.wake.set()
    thread.join(timeout)
    state.thread = None
    return not thread.is_alive()


def lower_thread_priority(nice):
    """
    Lower the calling thread's CPU priority, and only its, by ``nice`` (as
    nice(1) counts, to 19 at most); return whether it was. Linux gives each
    thread a priority of its own (setpriority() of its id); elsewhere nothing is done.
    """
    if not nice or not sys.platform.startswith("linux") or not hasattr(os, "setpriority"):
        return False
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError:
        return False
    return True


def _run(state):
    lower_thread_priority(jsonrpc_settings.LOG_LOADER_NICE)
    try:
        while not state.stopping and state is _current():
            delay = jsonrpc_settings.LOG_LOADER_INTERVAL
            if state.failing:
                delay = max(delay, jsonrpc_settings.SPOOL_RETRY_DELAY or 1.0)
            state.wake.wait(delay)
            state.wake.clear()
            if state.stopping:
                break
            try:
                result = load_pending()
            except Exception:
                logger.exception("The call log loader failed")
                state.failing = True
                continue
            if result.error is not None:
                if not state.failing:
                    logger.warning(
                        "The call log loader cannot write to %r (%s); the journal keeps the envelopes.",
                        jsonrpc_settings.LOG_DATABASE,
                        result.error,
                    )
                state.failing = True
            elif state.failing:
                state.failing = False
                logger.warning("The call log loader writes to %r again.", jsonrpc_settings.LOG_DATABASE)
    finally:
        connections.close_all()


EXIT_SECONDS = 10.0


def at_exit():
    """Seal this process's journal and, with a loader thread, load what it can before exiting."""
    if journal.own_path() is None:
        return
    try:
        journal.close()
        if jsonrpc_settings.LOG_LOADER == "thread":
            stop(EXIT_SECONDS)
            load_pending(max_seconds=EXIT_SECONDS)
    except Exception:
        logger.exception("The call log loader could not finish at exit; the journal keeps the envelopes.")
