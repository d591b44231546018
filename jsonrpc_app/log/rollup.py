"""
Usage rollups: the per-method, per-time-bucket aggregates of the call log
(jsonrpc_app.models.UsageRollup), kept in step with Call by every path that
writes calls, in the transaction (or the one statement) that writes them.

- ``aggregate(calls)`` folds Call instances into one row of sums per key
  (width, start, method, source, is_error, error_code): a call counts in its
  minute, its hour and the all-time row of its method;
- ``upsert_sql(conn, n)`` is the one statement that adds ``n`` such rows to
  the table: ``INSERT ... ON CONFLICT DO UPDATE`` on PostgreSQL and SQLite,
  ``INSERT ... ON DUPLICATE KEY UPDATE`` on MySQL/MariaDB;
- ``record(conn, calls)`` does both for the calls just written (one statement
  per chunk of the database's parameter limit, however many calls);
- ``rebuild(using)`` recomputes the table from Call, chunk by chunk;
- ``trim(using)`` deletes minute rows older than USAGE_MINUTE_DAYS.

Every Call row counts, whatever its source (HTTP, admin try-it, replay, CLI)
and whether it is a notification or an invalid request (method ""): the
rollups equal a recomputation from Call, and the source is part of the key,
so the pages may show HTTP traffic alone. The keys are written in sorted
order, so that two transactions adding to the same rows take their locks in
the same order and never deadlock.
"""

import bisect
import datetime
import itertools

import orjson
from django.db import connections, transaction

from ..conf import jsonrpc_settings
from ..models import HISTOGRAM_BOUNDS_MS, HISTOGRAM_FIELDS, Call, Outcome, UsageRollup, Width

KEY = ("width", "start", "method", "source", "is_error", "error_code")
SUMS = ("calls", "notifications", "duration_sum") + HISTOGRAM_FIELDS
COLUMNS = KEY + SUMS + ("duration_min", "duration_max")
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_UTC = datetime.timezone.utc
_BOUNDS = HISTOGRAM_BOUNDS_MS


def enabled():
    return bool(jsonrpc_settings.USAGE_ROLLUPS)


def bucket_index(duration_ms):
    """The histogram bucket of a duration: the first whose upper bound is >= it."""
    return bisect.bisect_left(_BOUNDS, duration_ms)


def _utc(value):
    if value.tzinfo is _UTC:
        return value  # timezone.now()'s
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=_UTC)
    return value.astimezone(_UTC)


def aggregate(calls, into=None):
    """
    Fold ``calls`` (Call instances, or dicts of their values) into ``into``
    ({key tuple: list of the values of COLUMNS after the key}); return it.
    """
    values = [c if type(c) is dict else c.__dict__ for c in calls]
    return aggregate_columns({name: [v[name] for v in values] for name in COLUMNS_READ}, into)


# What aggregate_columns() reads of each call.
COLUMNS_READ = ("created_at", "method", "source", "outcome", "error_code", "duration_ms", "is_notification")


def aggregate_columns(columns, into=None):
    """
    aggregate() for calls given column by column: ``columns`` maps each of
    COLUMNS_READ to a sequence, one value per call (the loader's split
    lines are read into columns, no Call built).

    The calls come in runs of one key (time, method, source, outcome,
    error code: a batch's calls share their time, often their method):
    each run is folded at once, its histogram counted in C; the minute rows
    are then folded into their hours and the all-time rows (a few per chunk).
    """
    rows = {} if into is None else into
    minutes = {}
    bounds = _BOUNDS
    low, high = _LOW, _HIGH
    durations = columns["duration_ms"]
    if None in durations:
        durations = [ms or 0.0 for ms in durations]
    notifications = columns["is_notification"]
    keys = zip(*(columns[n] for n in ("created_at", "method", "source", "outcome", "error_code")))
    # The minute of the run before: calls come in time order, so most fall
    # in it, which two comparisons tell (cheaper than a dict of their times).
    lo = hi = minute = None
    start = 0
    for (at, method, source, outcome, code), run in itertools.groupby(keys):
        end = start + len(list(run))
        ms, start = durations[start:end], end
        if type(at) is str:
            at = datetime.datetime.fromisoformat(at)
        if lo is None or not (lo <= at < hi):
            lo = at.replace(second=0, microsecond=0)
            hi = lo + _ONE_MINUTE
            minute = _utc(lo)
        if outcome == "error":
            key = (minute, method or "", source, True, code or 0)
        else:
            key = (minute, method or "", source, False, 0)
        row = minutes.get(key)
        if row is None:
            row = minutes[key] = [0, 0, 0.0] + [0] * _N_BUCKETS + [ms[0], ms[0]]
        row[0] += len(ms)
        row[1] += sum(map(bool, notifications[end - len(ms):end]))
        total = row[2]
        for one in ms:  # in order, one by one: the float sum of call by call (sum() may differ)
            total += one
        row[2] = total
        # A call of d ms goes in the first bucket whose bound is >= d.
        if len(ms) < 8:
            for one in ms:
                row[3 + bisect.bisect_left(bounds, one)] += 1
            fastest, slowest = min(ms), max(ms)
        else:
            # The calls up to bound i are bisect_right(ordered, bound i): a bisect a bound, not a call.
            ordered = sorted(ms)
            below = 0
            for i, bound in enumerate(bounds):
                upto = bisect.bisect_right(ordered, bound)
                row[3 + i] += upto - below
                below = upto
            row[3 + len(bounds)] += len(ordered) - below
            fastest, slowest = ordered[0], ordered[-1]
        if fastest < row[low]:
            row[low] = fastest
        if slowest > row[high]:
            row[high] = slowest
    for (minute, method, source, error, code), row in minutes.items():
        hour = minute.replace(minute=0)
        for key in ((_MINUTE, minute, method, source, error, code), (_HOUR, hour, method, source, error, code),
                    (_TOTAL, EPOCH, method, source, error, code)):
            into_row = rows.get(key)
            if into_row is None:
                rows[key] = list(row)
                continue
            for i in range(low):
                into_row[i] += row[i]
            if row[low] < into_row[low]:
                into_row[low] = row[low]
            if row[high] > into_row[high]:
                into_row[high] = row[high]
    return rows


_ONE_MINUTE = datetime.timedelta(minutes=1)
_N_BUCKETS = len(HISTOGRAM_FIELDS)
_LOW = 3 + _N_BUCKETS  # duration_min's place in a row, duration_max's next
_HIGH = _LOW + 1
_MINUTE, _HOUR, _TOTAL = int(Width.MINUTE), int(Width.HOUR), int(Width.TOTAL)


_sql_cache = {}


def upsert_sql(conn, n):
    """The statement adding ``n`` rows of COLUMNS to the table (parameters: row after row)."""
    key = (conn.vendor, conn.alias, n)
    sql = _sql_cache.get(key)
    if sql is not None:
        return sql
    quote = conn.ops.quote_name
    table = quote(UsageRollup._meta.db_table)
    cols = [quote(UsageRollup._meta.get_field(c).column) for c in COLUMNS]
    row = "(%s)" % ", ".join(["%s"] * len(COLUMNS))
    head = "INSERT INTO %s (%s) VALUES %s" % (table, ", ".join(cols), ", ".join([row] * n))
    sums = [quote(c) for c in SUMS]
    low, high = quote("duration_min"), quote("duration_max")
    if conn.vendor == "mysql":
        sets = ["%s = %s + VALUES(%s)" % (c, c, c) for c in sums]
        sets += ["%s = LEAST(%s, VALUES(%s))" % (low, low, low), "%s = GREATEST(%s, VALUES(%s))" % (high, high, high)]
        sql = "%s ON DUPLICATE KEY UPDATE %s" % (head, ", ".join(sets))
    else:
        least, greatest = ("MIN", "MAX") if conn.vendor == "sqlite" else ("LEAST", "GREATEST")
        sets = ["%s = %s.%s + EXCLUDED.%s" % (c, table, c, c) for c in sums]
        sets += [
            "%s = %s(%s.%s, EXCLUDED.%s)" % (low, least, table, low, low),
            "%s = %s(%s.%s, EXCLUDED.%s)" % (high, greatest, table, high, high),
        ]
        target = ", ".join(quote(UsageRollup._meta.get_field(c).column) for c in KEY)
        sql = "%s ON CONFLICT (%s) DO UPDATE SET %s" % (head, target, ", ".join(sets))
    if len(_sql_cache) > 512:
        _sql_cache.clear()
    _sql_cache[key] = sql
    return sql


def _pg_upsert_sql(conn):
    """
    PostgreSQL: the upsert of rows handed over as ONE JSON array
    (jsonb_to_recordset), as jsonrpc_app.log.sql hands over calls: the
    driver adapts one parameter instead of 28 per row (client-side binding
    quotes each in Python).
    """
    key = ("pg-json", conn.alias)
    sql = _sql_cache.get(key)
    if sql is not None:
        return sql
    quote = conn.ops.quote_name
    fields = [UsageRollup._meta.get_field(c) for c in COLUMNS]
    cols = ", ".join(quote(f.column) for f in fields)
    record = ", ".join("%s %s" % (quote(f.column), f.db_type(conn).split("(")[0]) for f in fields)
    plain = upsert_sql(conn, 1)
    conflict = plain[plain.index(" ON CONFLICT "):]
    sql = _sql_cache[key] = "INSERT INTO %s (%s) SELECT %s FROM jsonb_to_recordset(%%s::jsonb) AS r(%s)%s" % (
        quote(UsageRollup._meta.db_table), cols, cols, record, conflict
    )
    return sql


def _pg_upsert_param(rows):
    """The JSON array of ``rows`` (from aggregate()), in key order, for _pg_upsert_sql()."""
    names = COLUMNS
    return orjson.dumps([dict(zip(names, key + tuple(rows[key]))) for key in sorted(rows)]).decode()


def upsert_params(conn, rows):
    """The statement's parameters for ``rows`` (from aggregate()), in key order, adapted for ``conn``."""
    adapt = conn.ops.adapt_datetimefield_value
    # The same few minutes and hours come back call after call: adapted once.
    starts = _adapted.setdefault(conn.vendor, {})
    if len(starts) > 4096:
        starts.clear()
    params = []
    for key in sorted(rows):
        width, start, method, source, error, code = key
        db_start = starts.get(start)
        if db_start is None:
            db_start = starts[start] = adapt(start)
        params.extend((width, db_start, method, source, error, code))
        params.extend(rows[key])
    return params


_adapted = {}
_max_rows = {}


def max_rows(conn):
    """How many rows one upsert may carry on ``conn`` (SQLite's parameter limit is the tightest)."""
    conn.ensure_connection()
    key = id(conn.connection)
    n = _max_rows.get(key)
    if n is None:
        if len(_max_rows) > 256:
            _max_rows.clear()
        n = _max_rows[key] = _max_rows_of(conn)
    return n


def _max_rows_of(conn):
    if conn.vendor == "sqlite":
        try:
            import sqlite3

            conn.ensure_connection()
            limit = conn.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        except (AttributeError, TypeError):
            limit = 999
        return max(1, limit // len(COLUMNS))
    return 65535 // len(COLUMNS)


def write(conn, rows):
    """Add ``rows`` (from aggregate()) to the table on ``conn``, inside the caller's transaction."""
    if not rows:
        return
    step = max_rows(conn)
    keys = sorted(rows)
    parts = [{k: rows[k] for k in keys[i:i + step]} for i in range(0, len(keys), step)]
    if conn.vendor == "sqlite":
        # The driver's own cursor, "?" marks: Django's wrapper rewrites every
        # "%s" of the statement with a regular expression on each call.
        conn.ensure_connection()
        cursor = conn.connection.cursor()
        try:
            for part in parts:
                cursor.execute(_qmarks(upsert_sql(conn, len(part))), upsert_params(conn, part))
        finally:
            cursor.close()
        return
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(_pg_upsert_sql(conn), [_pg_upsert_param(rows)])
            return
        for part in parts:
            cursor.execute(upsert_sql(conn, len(part)), upsert_params(conn, part))


_qmark_cache = {}


def _qmarks(sql):
    out = _qmark_cache.get(sql)
    if out is None:
        if len(_qmark_cache) > 512:
            _qmark_cache.clear()
        out = _qmark_cache[sql] = sql.replace("%s", "?")
    return out


def in_with(conn, statement, params, calls):
    """
    PostgreSQL: add the upsert of ``calls`` to ``statement`` ("WITH ... SELECT
    ...", jsonrpc_app.log.sql's one-statement insert) as one more part of its
    WITH; return the statement and its parameters.
    """
    if not calls or not enabled():
        return statement, params
    rows = aggregate(calls)
    head, tail = statement.rsplit(" SELECT ", 1)
    statement = "%s, usage AS (%s) SELECT %s" % (head, _pg_upsert_sql(conn), tail)
    return statement, params + [_pg_upsert_param(rows)]


def record(conn, calls):
    """Add ``calls`` (just written, in the caller's transaction on ``conn``) to the rollups."""
    if calls and enabled():
        write(conn, aggregate(calls))


def record_columns(conn, columns):
    """record() for calls given column by column (see aggregate_columns())."""
    if columns["method"] and enabled():
        write(conn, aggregate_columns(columns))


# -- from Call ---------------------------------------------------------------------

_CALL_VALUES = ("id", "created_at", "method", "source", "outcome", "error_code", "duration_ms", "is_notification")


def rebuild(using=None, chunk=20000, progress=None):
    """
    Recompute the rollups of ``using`` (LOG_DATABASE) from Call in one
    transaction: delete them all, then read the calls by id in chunks of
    ``chunk`` (never the whole table in memory), fold each chunk and add it.
    Minute rows are written only for the last USAGE_MINUTE_DAYS days.
    Return the number of calls read.
    """
    using = using or jsonrpc_settings.LOG_DATABASE
    conn = connections[using]
    keep_minutes = _minute_cutoff()
    calls = Call.objects.using(using).order_by("id")
    seen = 0
    with transaction.atomic(using=using):
        UsageRollup.objects.using(using).all().delete()
        last = 0
        while True:
            # Tuples (values_list) made into dicts here: the ORM's values() costs more.
            names = _CALL_VALUES
            batch = [dict(zip(names, row)) for row in calls.filter(id__gt=last).values_list(*names)[:chunk]]
            if not batch:
                break
            last = batch[-1]["id"]
            rows = aggregate(batch)
            if keep_minutes is not None:
                rows = {k: v for k, v in rows.items() if k[0] != Width.MINUTE or k[1] >= keep_minutes}
            write(conn, rows)
            seen += len(batch)
            if progress is not None:
                progress(seen)
    return seen


def _minute_cutoff(now=None):
    days = jsonrpc_settings.USAGE_MINUTE_DAYS
    if days is None:
        return None
    now = now or datetime.datetime.now(_UTC)
    return (now - datetime.timedelta(days=days)).replace(second=0, microsecond=0)


def trim(using=None, now=None):
    """Delete the minute rows older than USAGE_MINUTE_DAYS days; return how many."""
    cutoff = _minute_cutoff(now)
    if cutoff is None:
        return 0
    using = using or jsonrpc_settings.LOG_DATABASE
    deleted, _ = UsageRollup.objects.using(using).filter(width=Width.MINUTE, start__lt=cutoff).delete()
    return deleted
