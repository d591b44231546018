"""
What partitioning the call table by time would cost and buy, measured on the
seeded scale database (``make scale`` first): not part of ``make scale``.

    python -m bench.scale_partitions [--pg-url URL] [--pg-db jsonrpc_scale]

Copies jsonrpc_app_call into a table partitioned by month (declarative range
partitions on created_at, the same columns and indexes; the primary key has
to become (id, created_at), as PostgreSQL asks of every unique index on a
partitioned table), times the copy and the index builds (what converting an
existing install costs), then times dropping the oldest month both ways:
DETACH + DROP of its partition, and the range delete jsonrpc_prune runs
(``DELETE ... WHERE envelope_id = ANY(...)`` over the same rows of the
original table, in a transaction that is rolled back). Drops its tables at the end.
"""

import argparse
import datetime
import os
import time

import psycopg

TABLE = "jsonrpc_app_call"
COPY = "scale_call_partitioned"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", default=os.environ.get("SCALE_PG_URL", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--pg-db", default="jsonrpc_scale")
    args = parser.parse_args()
    with psycopg.connect("%s/%s" % (args.pg_url.rstrip("/"), args.pg_db), autocommit=True) as conn:
        run(conn)


def timed(conn, label, sql, params=None):
    started = time.monotonic()
    cur = conn.execute(sql, params)
    seconds = time.monotonic() - started
    print("  %-58s %8.3f s" % (label, seconds), flush=True)
    return cur, seconds


def run(conn):
    first, last, rows = conn.execute("SELECT min(created_at), max(created_at), count(*) FROM %s" % TABLE).fetchone()
    print("%s: %s rows from %s to %s" % (TABLE, format(rows, ","), first, last))
    conn.execute("DROP TABLE IF EXISTS %s CASCADE" % COPY)
    conn.execute("SET maintenance_work_mem = '512MB'")
    conn.execute("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS) PARTITION BY RANGE (created_at)" % (COPY, TABLE))
    month = datetime.datetime(first.year, first.month, 1, tzinfo=datetime.timezone.utc)
    months = []
    while month <= last + datetime.timedelta(days=62):  # two months ahead, as a loader would create them
        following = (month + datetime.timedelta(days=32)).replace(day=1)
        name = "%s_%04d%02d" % (COPY, month.year, month.month)
        conn.execute("CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')"
                     % (name, COPY, month.isoformat(), following.isoformat()))
        months.append((name, month, following))
        month = following
    print("%d monthly partitions" % len(months))
    _, copy_s = timed(conn, "copy %s rows into the partitioned table" % format(rows, ","),
                      "INSERT INTO %s SELECT * FROM %s" % (COPY, TABLE))
    index_s = 0.0
    _, s = timed(conn, "primary key (id, created_at)", "ALTER TABLE %s ADD PRIMARY KEY (id, created_at)" % COPY)
    index_s += s
    for columns, where in [("created_at, id", ""), ("method, created_at", ""), ("envelope_id", ""),
                           ("created_at", "WHERE outcome = 'error'"),
                           ("error_code, created_at", "WHERE error_code IS NOT NULL"),
                           ("user_id, created_at", "WHERE user_id IS NOT NULL"),
                           ("source, created_at", "WHERE NOT source = 'http'")]:
        _, s = timed(conn, "index (%s) %s" % (columns, where), "CREATE INDEX ON %s (%s) %s" % (COPY, columns, where))
        index_s += s
    conn.execute("ANALYZE %s" % COPY)
    print("  conversion in all: %.1f s (copy %.1f s, indexes %.1f s)" % (copy_s + index_s, copy_s, index_s))

    name, start, end = months[0]
    n = conn.execute("SELECT count(*) FROM %s" % name).fetchone()[0]
    print("the oldest partition %s: %s rows (%s to %s)" % (name, format(n, ","), start.date(), end.date()))
    _, detach_s = timed(conn, "ALTER TABLE ... DETACH PARTITION", "ALTER TABLE %s DETACH PARTITION %s" % (COPY, name))
    _, drop_s = timed(conn, "DROP TABLE (the detached partition)", "DROP TABLE %s" % name)
    print("  detach + drop: %.3f s for %s calls" % (detach_s + drop_s, format(n, ",")))

    ids = [r[0] for r in conn.execute(
        "SELECT DISTINCT envelope_id FROM %s WHERE created_at >= %%s AND created_at < %%s" % TABLE, [start, end])]
    conn.execute("BEGIN")
    started = time.monotonic()
    deleted = 0
    for at in range(0, len(ids), 1000):
        deleted += conn.execute("DELETE FROM %s WHERE envelope_id = ANY(%%s)" % TABLE, [ids[at:at + 1000]]).rowcount
    seconds = time.monotonic() - started
    conn.execute("ROLLBACK")
    print("  the same month by range deletes of 1,000 envelopes' calls: %.3f s for %s calls (rolled back)"
          % (seconds, format(deleted, ",")))
    conn.execute("DROP TABLE %s CASCADE" % COPY)


if __name__ == "__main__":
    main()
