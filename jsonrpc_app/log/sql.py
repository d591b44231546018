"""
Writing the call log's rows: the one way ``Envelope`` and ``Call`` rows get
into the database, for the live log and for the spool's replay alike.

- ``write_rows()`` writes one envelope's rows (a rows.LogRows) in one
  transaction on ``LOG_DATABASE``, never inside the caller's transaction
  where the database allows a second writer (``write_uncommitted()`` writes
  again, when the request has finished, what a caller's SQLite transaction
  did not commit);
- ``write_many()`` writes several envelopes in one transaction of its own,
  for the background writer (jsonrpc_app.log.writer);
- ``insert_many()`` is write_many() inside a transaction the caller holds,
  for the spool's replay (jsonrpc_app.log.spool).
Each adds the calls it writes to the usage rollups (jsonrpc_app.log.rollup) in its transaction.

The INSERT statements are written here by hand rather than by the ORM's
compiler, which costs more than the rest of logging a call: one statement
for an envelope and one for all its calls, on PostgreSQL one statement for
both, on MySQL/MariaDB as many for the calls as keep each under the
server's packet limit (_by_size()). JSON values go to PostgreSQL in a form it reads back unchanged
(``db_values()``, see escaping.db_json()).
"""

import datetime
import itertools
import threading
from contextlib import contextmanager

import orjson
from django.db import connections, models, transaction
from django.db.models.sql import InsertQuery

from ..conf import jsonrpc_settings
from ..models import Call, Envelope, Outcome
from . import rollup
from .adapt import CALL_FIELDS, ENVELOPE_FIELDS, adapted_columns, envelope_params, insert_head, per_connection
from .escaping import db_json
from .rows import LogRows, report_failure

_ENVELOPE_FIELDS, _CALL_FIELDS = ENVELOPE_FIELDS, CALL_FIELDS
_side = threading.local()


@contextmanager
def db_values(instances, connection):
    """Hand JSON values to ``connection`` in a form it reads back unchanged."""
    swapped = []
    if connection.vendor == "postgresql":
        for obj in instances:
            for attname in _json_attnames(type(obj)):
                value = obj.__dict__.get(attname)
                if value is not None and type(value) in (list, dict, float):
                    db_value = db_json(value, connection)
                    if db_value is not value:
                        swapped.append((obj, attname, value))
                        obj.__dict__[attname] = db_value
    try:
        yield
    finally:
        for obj, attname, value in swapped:
            obj.__dict__[attname] = value


_JSON_ATTNAMES = {}


def _json_attnames(model):
    try:
        return _JSON_ATTNAMES[model]
    except KeyError:
        names = _JSON_ATTNAMES[model] = tuple(
            f.attname for f in model._meta.concrete_fields if isinstance(f, models.JSONField)
        )
        return names


def write_rows(rows, using=None):
    """
    Write ``rows`` in one transaction on ``using`` (default: LOG_DATABASE).

    When the caller is inside a transaction of its own on that database (a
    project with ATOMIC_REQUESTS, a view wrapped in atomic()), the rows go
    through a second connection so that they are committed whatever becomes
    of the caller's transaction. SQLite allows one writer at a time, and the
    caller's transaction may hold it: there the rows are written in a
    savepoint of the caller's transaction and, if that transaction does not
    commit them, written again when the request has finished.
    """
    using = using or jsonrpc_settings.LOG_DATABASE
    conn = connections[using]
    with db_values(rows.calls, conn):
        if not _in_caller_transaction(conn):
            if conn.vendor == "postgresql" and not conn.in_atomic_block and _insert_at_once(conn, rows):
                pass  # one statement in autocommit: a transaction of its own, one round trip
            else:
                with transaction.atomic(using=using):
                    _insert(conn, rows)
        elif conn.vendor != "sqlite":
            _write_on_side_connection(using, rows)
        else:
            _write_in_caller_transaction(conn, using, rows)
    rows.envelope._state.adding = False
    rows.envelope._state.db = using
    return rows.envelope


_uncommitted = threading.local()


def _write_in_caller_transaction(conn, using, rows):
    pending = getattr(_uncommitted, "rows", None)
    if pending is None:
        pending = _uncommitted.rows = {}
    key = id(rows)
    if conn.needs_rollback:
        # The caller's transaction is doomed (set_rollback, a caught error):
        # nothing can be written in it; write when the request has finished.
        pending[key] = (using, rows)
        return
    with transaction.atomic(using=using):
        _insert(conn, rows)
    pending[key] = (using, rows)
    # Not called if the caller's transaction (or a savepoint around this
    # write) is rolled back: the rows then stay pending.
    transaction.on_commit(lambda: pending.pop(key, None), using=using)


def write_uncommitted(**kwargs):
    """
    Write again the rows of this thread that were written inside a caller's
    transaction which then did not commit them (request_finished receiver).
    """
    pending = getattr(_uncommitted, "rows", None)
    if not pending:
        return
    items = list(pending.values())
    pending.clear()
    for using, rows in items:
        rows.envelope.pk = None
        rows.envelope._state.adding = True
        try:
            write_rows(rows, using)
        except Exception:
            report_failure(rows)


def _in_caller_transaction(conn):
    if not conn.get_autocommit() and not conn.in_atomic_block:
        return True  # managed by hand with set_autocommit(False)
    # Django's TestCase wraps each test in atomic blocks it marks as its own;
    # they stand for autocommit, as they do for atomic(durable=True).
    return any(not getattr(block, "_from_testcase", False) for block in conn.atomic_blocks)


def _write_on_side_connection(using, rows):
    conns = getattr(_side, "connections", None)
    if conns is None:
        conns = _side.connections = {}
    conn = conns.get(using)
    if conn is None:
        conn = conns[using] = connections.create_connection(using)
    conn.close_if_unusable_or_obsolete()
    conn.ensure_connection()
    conn.set_autocommit(False)
    try:
        _insert(conn, rows)
        conn.commit()
    except Exception:
        try:
            conn.rollback()
        except Exception:
            conn.close()
        raise
    finally:
        if conn.connection is not None:
            conn.set_autocommit(True)
        # Keep it only as long as CONN_MAX_AGE keeps the request's connections.
        conn.close_if_unusable_or_obsolete()


def write_many(rows_list, using=None):
    """
    Write the rows of several envelopes in one transaction on ``using``
    (default: LOG_DATABASE), as insert_many() does.

    For the background writer (jsonrpc_app.log.writer), whose connection is
    its own: raise TransactionManagementError inside a transaction of the
    caller's, where write_rows() is the way to write each envelope.
    """
    using = using or jsonrpc_settings.LOG_DATABASE
    if _in_caller_transaction(connections[using]):
        raise transaction.TransactionManagementError(
            "write_many() writes a transaction of its own; use write_rows() inside one."
        )
    with transaction.atomic(using=using):
        insert_many(rows_list, using)
    return [rows.envelope for rows in rows_list]


def insert_many(rows_list, using):
    """
    INSERT the rows of several envelopes on ``using`` inside the transaction
    the caller holds: one INSERT per envelope, then the calls of all of them
    in one INSERT (on PostgreSQL, as many as its parameter limit needs).
    """
    conn = connections[using]
    with db_values([c for rows in rows_list for c in rows.calls], conn):
        calls, fresh = [], []  # all the calls; those not written by _insert_at_once()
        for rows in rows_list:
            env = rows.envelope
            calls.extend(rows.calls)
            if conn.vendor == "postgresql" and _insert_at_once(conn, rows, with_rollups=False):
                continue
            # The envelope alone, the way _insert() writes it.
            _insert(conn, LogRows(env, ()))
            _link(rows.calls, env.pk)
            fresh.extend(rows.calls)
        _insert_calls(conn, fresh)
        rollup.record(conn, calls)
    for rows in rows_list:
        rows.envelope._state.adding = False
        rows.envelope._state.db = using


def _max_rows(conn, fields):
    """How many rows one INSERT statement may carry on ``conn``."""
    if conn.vendor == "sqlite":
        try:
            import sqlite3

            conn.ensure_connection()
            params = conn.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        except (AttributeError, TypeError):
            params = conn.features.max_query_params
        return max(1, params // len(fields))
    if conn.vendor in ("postgresql", "mysql"):
        # MySQL's driver splices the values in itself (no bound parameters,
        # whose limit is 65,535 there too); Django's bulk_batch_size() has no
        # limit for it, and asked about one row answers one.
        return 65535 // len(fields)
    return conn.ops.bulk_batch_size(fields, [None]) or 1


def _insert(conn, rows):
    env = rows.envelope
    if conn.vendor == "postgresql" and _insert_at_once(conn, rows):
        return
    if not _insert_returning(conn, env):
        query = InsertQuery(Envelope)
        query.insert_values(_ENVELOPE_FIELDS, [env])
        returned = query.get_compiler(connection=conn).execute_sql([Envelope._meta.pk])
        env.pk = returned[0][0]
    calls = rows.calls
    if not calls:
        return
    _link(calls, env.pk)
    _insert_calls(conn, calls)
    rollup.record(conn, calls)


def _link(calls, pk):
    for c in calls:
        # Straight into the instance: the attribute's descriptor would look
        # for a cached related object on every call of the batch.
        c.__dict__["envelope_id"] = pk


def _insert_calls(conn, calls):
    """INSERT ``calls`` (their envelope_id set): one statement, or chunks within the parameter limit."""
    if not calls:
        return
    # One statement for all of them, unless the database's parameter limit needs chunks.
    step = _max_rows(conn, _CALL_FIELDS)
    for start in range(0, len(calls), step):
        chunk = calls[start:start + step]
        if not _insert_plain(conn, Call, _CALL_FIELDS, chunk):
            query = InsertQuery(Call)
            query.insert_values(_CALL_FIELDS, chunk)
            query.get_compiler(connection=conn).execute_sql(None)
    for c in calls:
        c._state.adding = False
        c._state.db = conn.alias


# The columns of a call row as PostgreSQL reads them from JSON (jsonb_to_recordset):
# every column but the id and the envelope's, which the statement supplies.
_RECORD_FIELDS = [f for f in _CALL_FIELDS if f.attname != "envelope_id"]
_RECORD_NAMES = [f.attname for f in _RECORD_FIELDS]
_RECORD_TYPES = frozenset({str, int, float, bool, dict, list, datetime.datetime, Outcome})
_AT_ONCE_CALL_FIELDS = _RECORD_FIELDS + [Call._meta.get_field("envelope")]


def _insert_at_once(conn, rows, with_rollups=True):
    """
    PostgreSQL: INSERT the envelope and all its calls in ONE statement, the
    calls handed over as one JSON array (jsonb_to_recordset) and linked to
    the envelope's new id inside the statement. One round trip instead of
    four (BEGIN, two INSERTs, COMMIT) and no array per column for the driver
    to build: a logged single call went from ~1,850 to ~800 µs of wall time,
    a 100-call batch from ~6,100 to ~2,500 µs.

    The calls' usage rollups are an upsert in the same WITH, unless
    ``with_rollups`` is False (insert_many() adds all its envelopes' at once).

    Return False (having run nothing) when a value is an expression or
    cannot go through JSON as it is (an integer beyond 64 bits): the
    statements of _insert() write those.
    """
    env = rows.envelope
    env_params = envelope_params(conn, env)
    if env_params is None:
        return False
    records = []
    for call in rows.calls:
        values = call.__dict__
        record = {}
        for name in _RECORD_NAMES:
            value = values[name]
            if value is None:
                continue  # a key left out is SQL NULL (a JSON null would be jsonb 'null')
            if type(value) not in _RECORD_TYPES:
                return False
            record[name] = value
        records.append(record)
    try:
        data = orjson.dumps(records).decode()
    except TypeError:
        return False
    statement, params = _at_once_sql(conn), env_params + [data]
    if with_rollups:
        statement, params = rollup.in_with(conn, statement, params, rows.calls)
    with conn.cursor() as cursor:
        cursor.execute(statement, params)
        pk = cursor.fetchone()[0]
    env.pk = pk
    _link(rows.calls, pk)
    for c in rows.calls:
        c._state.adding = False
        c._state.db = conn.alias
    return True


def _at_once_sql(conn):
    per_conn = per_connection(conn)
    sql = per_conn.get("at once")
    if sql is None:
        quote = conn.ops.quote_name
        pk = quote(Envelope._meta.pk.column)
        record = ", ".join(
            "%s %s" % (quote(f.attname), f.db_type(conn).split("(")[0]) for f in _RECORD_FIELDS
        )
        sql = per_conn["at once"] = (
            "WITH env AS (%s VALUES (%s) RETURNING %s), "
            "calls AS (%s SELECT %s, env.%s FROM env, jsonb_to_recordset(%%s::jsonb) AS r(%s)) "
            "SELECT %s FROM env"
        ) % (
            insert_head(conn, Envelope, _ENVELOPE_FIELDS),
            ", ".join(["%s"] * len(_ENVELOPE_FIELDS)),
            pk,
            insert_head(conn, Call, _AT_ONCE_CALL_FIELDS),
            ", ".join("r.%s" % quote(f.attname) for f in _RECORD_FIELDS),
            pk,
            record,
            pk,
        )
    return sql


def _insert_returning(conn, env):
    """
    INSERT the envelope row with INSERT ... RETURNING and set its pk, each
    value adapted as the ORM would; return False (having run nothing) where
    the database cannot return the pk or a value is an expression. The
    ORM's compiler costs more than the rest of logging a single call.
    """
    if not conn.features.can_return_columns_from_insert:
        return False
    params = envelope_params(conn, env)
    if params is None:
        return False
    sql = "%s VALUES (%s) RETURNING %s" % (
        insert_head(conn, Envelope, _ENVELOPE_FIELDS),
        ", ".join(["%s"] * len(_ENVELOPE_FIELDS)),
        conn.ops.quote_name(Envelope._meta.pk.column),
    )
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        env.pk = cursor.fetchone()[0]
    return True


def _insert_plain(conn, model, fields, objs):
    """
    INSERT ``objs`` in one statement, each value adapted as the ORM would;
    return False (having run nothing) if a value is an expression, which
    only the ORM's compiler can write.

    PostgreSQL gets one array per column through UNNEST, as Django's own
    bulk_create does there: a statement of a thousand rows has 17 parameters,
    not 17,000 for the driver to splice in.
    """
    columns = adapted_columns(conn, fields, objs)
    if columns is None:
        return False
    head = insert_head(conn, model, fields)
    if conn.vendor == "postgresql":
        # varchar[] rather than varchar(255)[]: no silent truncation.
        types = [f.db_type(conn).split("(")[0] for f in fields]
        sql = "%s SELECT * FROM UNNEST(%s)" % (head, ", ".join("(%%s)::%s[]" % t for t in types))
        params = [list(c) for c in columns]
    else:
        row = "(%s)" % ", ".join(["%s"] * len(fields))
        rows = list(zip(*columns))
        groups = _by_size(rows) if conn.vendor == "mysql" else (rows,)
        with conn.cursor() as cursor:
            for group in groups:
                sql = "%s VALUES %s" % (head, ", ".join([row] * len(group)))
                cursor.execute(sql, list(itertools.chain.from_iterable(group)))
        return True
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
    return True


# MySQL/MariaDB refuse a statement longer than max_allowed_packet (16 MiB by
# default on MariaDB, 4 MiB on old MySQL), and mysqlclient sends the values
# spliced into the statement: a batch of 1,000 calls, each result up to
# LOG_MAX_VALUE_BYTES, would be one statement of up to 64 MiB, refused, and
# refused again at every replay of the spool. Text of up to this many
# characters per statement stays under 4 MiB even with every character
# escaped (two bytes) or of two UTF-8 bytes.
_MYSQL_STATEMENT_CHARS = 1024 * 1024


def _by_size(rows):
    """Split ``rows`` (tuples of adapted values) into groups of at most _MYSQL_STATEMENT_CHARS of text."""
    groups, group, size = [], [], 0
    for r in rows:
        n = 64 + sum(len(v) for v in r if type(v) is str)
        if group and size + n > _MYSQL_STATEMENT_CHARS:
            groups.append(group)
            group, size = [], 0
        group.append(r)
        size += n
    groups.append(group)
    return groups
