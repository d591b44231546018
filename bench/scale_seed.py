"""
The seeded log of ``bench.scale``: N calls over two years, written the way
jsonrpc_app.log writes them, but in bulk -- COPY on PostgreSQL, executemany()
in big transactions on SQLite -- with the secondary indexes and foreign keys
dropped while rows go in and built once at the end.

The mix: 40 methods (the demo's and made-up ones, Zipf-like shares), 85%
single calls, 7% single notifications, 8% batches of 2-10 calls (10% of
them notifications), about 2% of calls failing (-32602, -32603 with a
traceback, an application error 1001 with data), one call in a thousand
with params of ~6 KB, a quarter of the envelopes by one of 50 users, a few
from the admin's try-it, replays and the command line, and one envelope in
5,000 rejected as a whole (a parse error, no calls).

The stream is deterministic (a seeded ``random.Random``) and runs in time
order, so that the first days of it can be generated again
(``restore_prefix``) after ``bench.scale`` has pruned them.
"""

import datetime
import json
import random

SEED_VERSION = 2
DAYS = 730

DEMO_METHODS = ["subtract", "sum", "echo", "update", "get_data", "notify_hello", "shop.reserve"]
MADE_UP_METHODS = [
    "orders.get", "orders.list", "orders.create", "orders.cancel", "users.get", "users.search",
    "users.update", "inventory.count", "inventory.reserve", "inventory.release", "payments.authorize",
    "payments.capture", "payments.refund", "reports.daily", "reports.export", "search.query",
    "search.suggest", "auth.token", "auth.refresh", "cart.add", "cart.remove", "cart.get",
    "shipping.quote", "shipping.track", "catalog.get", "catalog.list", "catalog.price", "notify.email",
    "notify.sms", "audit.log", "health.ping", "metrics.push", "files.upload",
]
METHODS = DEMO_METHODS + MADE_UP_METHODS
assert len(METHODS) == 40

USER_AGENTS = ["python-requests/2.32.3", "curl/8.5.0", "okhttp/4.12.0", "Go-http-client/1.1", "jsonrpc-js/3.1"]
BIG_PARAMS = json.dumps({"items": [{"sku": "SKU-%05d" % i, "qty": i % 7, "note": "n" * 10} for i in range(150)]},
                        separators=(",", ":"))
TRACEBACK = (
    'Traceback (most recent call last):\n  File "/srv/app/rpc_methods.py", line 42, in handler\n'
    "    return backend.fetch(key)\nKeyError: 'missing'\n"
)


def _zipf_table(size=4096):
    weights = [1 / (i + 1) ** 1.1 for i in range(len(METHODS))]
    total = sum(weights)
    table, acc = [], 0.0
    for i, w in enumerate(weights):
        acc += w / total
        while len(table) < round(acc * size):
            table.append(i)
    while len(table) < size:
        table.append(len(METHODS) - 1)
    return table


# Median duration (ms) of each method: most are quick, some slow.
BASE_MS = [0.3 + (i * 7919 % 40) * 0.6 for i in range(len(METHODS))]


def generate(n_calls, start, stop_at=None, vendor="postgresql"):
    """
    Yield (envelope row, [call rows]) in time order until ``n_calls`` calls
    (or, with ``stop_at``, the first envelope received at or after it). Rows
    are tuples in the order of ENVELOPE_COLUMNS / CALL_COLUMNS, their values
    as the vendor's bulk path takes them.
    """
    rng = random.Random(20261203)
    zipf = _zipf_table()
    # Lognormal factors (sigma 0.6) of each method's median duration, drawn once.
    spread = [rng.lognormvariate(0, 0.6) for _ in range(4096)]
    span_us = DAYS * 86400 * 1_000_000
    pg = vendor == "postgresql"
    true, false = (True, False) if pg else (1, 0)
    suffix = "+00" if pg else ""
    naive_start = start.replace(tzinfo=None)
    start_ms = int(start.timestamp() * 1000)
    env_id = call_id = 0
    rand, bits = rng.random, rng.getrandbits
    timedelta = datetime.timedelta

    def randint(a, b):
        return a + int(rand() * (b - a + 1))

    while call_id < n_calls:
        offset = span_us * call_id // n_calls + int(rand() * 1000)
        at = start + timedelta(microseconds=offset)
        if stop_at is not None and at >= stop_at:
            return
        created = (naive_start + timedelta(microseconds=offset)).isoformat(" ", "microseconds") + suffix
        env_id += 1
        ms = start_ms + offset // 1000
        r = bits(80)
        uid = "%012x7%03x%x%015x" % (ms, r & 0xFFF, 8 | ((r >> 12) & 3), r >> 20 & (16**15 - 1))
        if pg:
            uid = "%s-%s-%s-%s-%s" % (uid[:8], uid[8:12], uid[12:16], uid[16:20], uid[20:])
        k = rand()
        user_id, username, source, replay_of = None, "", "http", None
        if k < 0.25:
            u = randint(0, 49)
            user_id, username = 2 + u, "client%02d" % u
        s = rand()
        if s < 0.0005:
            source, user_id, username = "admin", 1, "admin"
        elif s < 0.0007 and env_id > 1000:
            source, user_id, username, replay_of = "replay", 1, "admin", env_id - randint(1, 1000)
        elif s < 0.0008:
            source = "cli"
        addr = "10.%d.%d.%d" % (randint(0, 3), randint(0, 255), randint(1, 254))
        agent = USER_AGENTS[randint(0, 4)]
        if rand() < 0.0002:  # rejected as a whole: no calls
            body = '{"jsonrpc":"2.0","method":"sum","params":[1,2'
            response = '{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}'
            yield (
                (env_id, uid, created, "/rpc/", source, false, body, response, 200, round(0.05 + rand() * 0.2, 3),
                 user_id, username, addr, agent, replay_of, -32700, "Parse error", "", 0, 0),
                [],
            )
            continue
        kind = rand()
        if kind < 0.85:
            size, notify_share, batch = 1, 0.0, False
        elif kind < 0.92:
            size, notify_share, batch = 1, 1.0, False
        else:
            size, notify_share, batch = randint(2, 10), 0.1, True
        size = min(size, n_calls - call_id)
        calls, requests, answers, names = [], [], [], []
        errors = 0
        total_ms = 0.0
        for position in range(size):
            call_id += 1
            m = zipf[int(rand() * 4096)]
            method = METHODS[m]
            if method not in names:
                names.append(method)
            notification = notify_share and rand() < notify_share
            params = BIG_PARAMS if rand() < 0.001 else "[%d,%d]" % (call_id % 1000, position)
            duration = round(BASE_MS[m] * spread[int(rand() * 4096)], 3)
            total_ms += duration
            request_id = None if notification else str(call_id)
            result = error_code = error_data = None
            error_message = traceback = ""
            outcome = "ok"
            e = rand()
            if e < 0.02 and not notification:
                outcome, errors = "error", errors + 1
                if e < 0.01:
                    error_code, error_message = -32602, "Invalid params"
                    error_data = '{"params":["missing argument: key"]}'
                elif e < 0.014:
                    error_code, error_message, traceback = -32603, "Internal error", TRACEBACK
                else:
                    error_code, error_message, error_data = 1001, "Out of stock", '{"sku":"SKU-00042"}'
            elif not notification:
                result = str(call_id % 997)
            requests.append('{"jsonrpc":"2.0","method":"%s","params":%s%s}'
                            % (method, params, "" if notification else ',"id":%s' % request_id))
            if not notification:
                if outcome == "ok":
                    answers.append('{"jsonrpc":"2.0","result":%s,"id":%s}' % (result, request_id))
                else:
                    answers.append('{"jsonrpc":"2.0","error":{"code":%d,"message":"%s"},"id":%s}'
                                   % (error_code, error_message, request_id))
            calls.append((
                call_id, env_id, position, created, method, request_id, true if notification else false, params,
                result, outcome, error_code, error_message, error_data, traceback, duration, user_id, username,
                source,
            ))
        if batch:
            body, response = "[%s]" % ",".join(requests), ("[%s]" % ",".join(answers)) if answers else ""
        else:
            body, response = requests[0], answers[0] if answers else ""
        yield (
            (env_id, uid, created, "/rpc/", source, true if batch else false, body, response,
             200 if answers else 204, round(total_ms + 0.2, 3), user_id, username, addr, agent, replay_of, None,
             "", ", ".join(names)[:255], size, errors),
            calls,
        )


ENVELOPE_COLUMNS = [
    "id", "uid", "created_at", "endpoint", "source", "is_batch", "request_body", "response_body",
    "http_status", "duration_ms", "user_id", "username", "remote_addr", "user_agent", "replay_of_id",
    "error_code", "error_message", "methods", "call_count", "error_count",
]
CALL_COLUMNS = [
    "id", "envelope_id", "position", "created_at", "method", "request_id", "is_notification", "params",
    "result", "outcome", "error_code", "error_message", "error_data", "traceback", "duration_ms", "user_id",
    "username", "source",
]
ENVELOPE_TABLE = "jsonrpc_app_envelope"
CALL_TABLE = "jsonrpc_app_call"


# -- PostgreSQL ------------------------------------------------------------------


def _pg_secondary(cursor):
    """Return [(drop sql, create sql)] of the two tables' constraints and indexes but their primary keys."""
    tables = (ENVELOPE_TABLE, CALL_TABLE)
    cursor.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid::regclass::text = ANY(%s) AND contype IN ('u', 'f') ORDER BY contype DESC",
        [list(tables)],
    )
    out = [('ALTER TABLE %s DROP CONSTRAINT "%s"' % (t, name), 'ALTER TABLE %s ADD CONSTRAINT "%s" %s' % (t, name, d))
           for t, name, d in cursor.fetchall()]
    cursor.execute(
        "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = ANY(%s) AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
        [list(tables)],
    )
    out += [('DROP INDEX "%s"' % name, d) for name, d in cursor.fetchall()]
    return out


def seed_postgresql(connection, n_calls, start, report):
    """COPY the stream into the (migrated, empty) tables; return (envelopes, calls)."""
    import psycopg

    connection.ensure_connection()
    with connection.cursor() as cursor:
        secondary = _pg_secondary(cursor)
        for drop, _ in secondary:
            cursor.execute(drop)
    settings = connection.settings_dict
    dsn = "host=%s port=%s user=%s dbname=%s" % (
        settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432, settings["USER"], settings["NAME"])
    envelopes = calls = 0
    started = _now()
    with psycopg.connect(dsn) as env_conn, psycopg.connect(dsn) as call_conn:
        for c in (env_conn, call_conn):
            c.execute("SET synchronous_commit = off")
        env_cur, call_cur = env_conn.cursor(), call_conn.cursor()
        with env_cur.copy("COPY %s (%s) FROM STDIN" % (ENVELOPE_TABLE, ", ".join(ENVELOPE_COLUMNS))) as env_copy, \
                call_cur.copy("COPY %s (%s) FROM STDIN" % (CALL_TABLE, ", ".join(CALL_COLUMNS))) as call_copy:
            write_env, write_call = env_copy.write_row, call_copy.write_row
            for envelope, rows in generate(n_calls, start):
                write_env(envelope)
                for row in rows:
                    write_call(row)
                envelopes += 1
                calls += len(rows)
                if envelopes % 1_000_000 == 0:
                    report("  %d envelopes, %d calls copied (%.0f s)" % (envelopes, calls, _now() - started))
    report("  COPY done: %d envelopes, %d calls in %.1f s" % (envelopes, calls, _now() - started))
    started = _now()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '512MB'")
        for _, create in secondary:
            cursor.execute(create)
        for table in (ENVELOPE_TABLE, CALL_TABLE):
            cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), (SELECT max(id) FROM " + table + "))",
                           [table])
    report("  indexes and constraints built in %.1f s" % (_now() - started))
    return envelopes, calls


def restore_postgresql(connection, n_calls, start, stop_at):
    """COPY back the stream's rows received before ``stop_at`` (what a prune removed); return the calls."""
    calls = 0
    raw = connection.connection
    with raw.cursor() as cur:
        with cur.copy("COPY %s (%s) FROM STDIN" % (ENVELOPE_TABLE, ", ".join(ENVELOPE_COLUMNS))) as copy:
            pending = []
            for envelope, rows in generate(n_calls, start, stop_at=stop_at):
                copy.write_row(envelope)
                pending.extend(rows)
        with cur.copy("COPY %s (%s) FROM STDIN" % (CALL_TABLE, ", ".join(CALL_COLUMNS))) as copy:
            for row in pending:
                copy.write_row(row)
            calls = len(pending)
    raw.commit()
    return calls


# -- SQLite ----------------------------------------------------------------------


def seed_sqlite(connection, n_calls, start, report, chunk=200_000):
    """executemany() the stream in transactions of ``chunk`` envelopes; return (envelopes, calls)."""
    connection.ensure_connection()
    raw = connection.connection
    indexes = raw.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name IN (?, ?) AND sql IS NOT NULL",
        (ENVELOPE_TABLE, CALL_TABLE),
    ).fetchall()
    for name, _ in indexes:
        raw.execute('DROP INDEX "%s"' % name)
    raw.execute("PRAGMA synchronous = OFF")
    envelopes = calls = 0
    started = _now()
    env_sql, call_sql = _insert(ENVELOPE_TABLE, ENVELOPE_COLUMNS), _insert(CALL_TABLE, CALL_COLUMNS)
    env_rows, call_rows = [], []

    def flush():
        raw.execute("BEGIN")
        raw.executemany(env_sql, env_rows)
        raw.executemany(call_sql, call_rows)
        raw.execute("COMMIT")
        env_rows.clear()
        call_rows.clear()

    for envelope, rows in generate(n_calls, start, vendor="sqlite"):
        env_rows.append(envelope)
        call_rows.extend(rows)
        envelopes += 1
        calls += len(rows)
        if len(env_rows) >= chunk:
            flush()
    flush()
    report("  inserted %d envelopes, %d calls in %.1f s" % (envelopes, calls, _now() - started))
    started = _now()
    for _, create in indexes:
        raw.execute(create)
    raw.execute("PRAGMA synchronous = NORMAL")
    report("  indexes built in %.1f s" % (_now() - started))
    return envelopes, calls


def restore_sqlite(connection, n_calls, start, stop_at):
    raw = connection.connection
    env_rows, call_rows = [], []
    for envelope, rows in generate(n_calls, start, stop_at=stop_at, vendor="sqlite"):
        env_rows.append(envelope)
        call_rows.extend(rows)
    raw.execute("BEGIN")
    raw.executemany(_insert(ENVELOPE_TABLE, ENVELOPE_COLUMNS), env_rows)
    raw.executemany(_insert(CALL_TABLE, CALL_COLUMNS), call_rows)
    raw.execute("COMMIT")
    return len(call_rows)


def _insert(table, columns):
    return "INSERT INTO %s (%s) VALUES (%s)" % (table, ", ".join(columns), ", ".join("?" * len(columns)))


def _now():
    import time

    return time.monotonic()
