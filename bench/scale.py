"""
The call log at scale (``make scale``): seed a large log, time the admin
pages a staff user opens, and prune a month of it under load.

    python -m bench.scale                          # PostgreSQL 10,000,000 calls, then SQLite 1,000,000
    python -m bench.scale --db postgres --calls 1000000
    python -m bench.scale --reseed                 # seed again even when the database holds N calls
    python -m bench.scale --no-prune --no-load     # pages only
    python -m bench.scale --db postgres --no-rollup --no-prune --pages search --pages "last page"

Each database is seeded once (bench.scale_seed: COPY on PostgreSQL,
executemany() on SQLite) and reused while it holds the same N calls. The
pages are fetched in-process by django.test.Client as a superuser (demo
project settings, DEBUG off): each page's median of --repeat runs in
milliseconds and its number of queries. A page that takes more than
--page-budget seconds in all is cut short (its runs say how many), and a
query that runs longer than --statement-timeout seconds fails the page.

Then the oldest 30 days of the two years are pruned with ``jsonrpc_prune``
while the load test's client (bench.load_test: gunicorn -w 4, journal
writer) sends calls to the same database, and every acknowledged call is
looked for in the log (``lost``). The pruned rows are put back afterwards,
so the database can be reused.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
MARKER = "jsonrpc_scale_seed"


def say(text):
    print(text, flush=True)


# -- the parent: one child process per database ------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--calls", type=int, default=10_000_000, help="calls on PostgreSQL")
    parser.add_argument("--sqlite-calls", type=int, default=1_000_000, help="calls on SQLite")
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--page-budget", type=float, default=6.0,
                        help="stop timing a page once its runs took this many seconds in all (at least one run)")
    parser.add_argument("--statement-timeout", type=float, default=60.0)
    parser.add_argument("--explain", action="store_true",
                        help="print the plans (EXPLAIN ANALYZE) of the slowest queries of each page over its target")
    parser.add_argument("--no-prune", action="store_true")
    parser.add_argument("--no-rollup", action="store_true",
                        help="skip jsonrpc_rollup --rebuild (the rollups of a reused log are already built)")
    parser.add_argument("--pages", action="append", metavar="TEXT",
                        help="time only the pages whose label contains TEXT (repeatable)")
    parser.add_argument("--no-load", action="store_true", help="prune without the load test beside it")
    parser.add_argument("--load-calls", type=int, default=20_000)
    parser.add_argument("--pg-url", default=os.environ.get("SCALE_PG_URL", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--pg-db", default="jsonrpc_scale")
    parser.add_argument("--sqlite-path", default=str(RESULTS / "scale.sqlite3"))
    parser.add_argument("--stage", choices=["postgres", "sqlite"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        return stage(args)
    started = time.monotonic()
    dbs = ["postgres", "sqlite"] if args.db == "both" else [args.db]
    failed = False
    for db in dbs:
        env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="project.settings",
            DJANGO_DEBUG="0",
            CONN_MAX_AGE="600",
            PYTHONPATH=str(ROOT),
        )
        work = Path(tempfile.mkdtemp(prefix="jsonrpc-scale-"))
        env["JSONRPC_SPOOL_DIR"], env["JSONRPC_JOURNAL_DIR"] = str(work / "spool"), str(work / "journal")
        env["JSONRPC_LOG_LOADER"] = "command"
        if db == "postgres":
            _pg_create(args.pg_url, args.pg_db, args.reseed)
            env["DATABASE_URL"] = "%s/%s" % (args.pg_url.rstrip("/"), args.pg_db)
        else:
            RESULTS.mkdir(parents=True, exist_ok=True)
            if args.reseed and os.path.exists(args.sqlite_path):
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(args.sqlite_path + suffix):
                        os.remove(args.sqlite_path + suffix)
            env["DATABASE_URL"] = "sqlite:///%s" % args.sqlite_path
        argv = [sys.executable, "-m", "bench.scale", "--stage", db] + sys.argv[1:]
        failed |= subprocess.run(argv, env=env, cwd=ROOT).returncode != 0
    say("make scale: %.1f min in all" % ((time.monotonic() - started) / 60))
    sys.exit(1 if failed else 0)


def _pg_create(url, name, reseed):
    import psycopg

    with psycopg.connect(url.rstrip("/") + "/postgres", autocommit=True) as conn:
        if reseed:
            conn.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute('CREATE DATABASE "%s"' % name)


# -- the child: one database -------------------------------------------------------------


def stage(args):
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.db.backends.signals import connection_created

    pg = connection.vendor == "postgresql"
    n_calls = args.calls if pg else args.sqlite_calls
    timeout_ms = int(args.statement_timeout * 1000)

    def limit(sender, connection, **kwargs):
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET statement_timeout = %d" % timeout_ms)

    connection_created.connect(limit)
    _register_methods()
    say("== %s: %s calls" % ("PostgreSQL" if pg else "SQLite", format(n_calls, ",")))
    call_command("migrate", "--noinput", verbosity=0)
    seed = _read_marker(connection)
    if seed is None or seed["calls"] != n_calls:
        seed = _seed(connection, n_calls, args)
    else:
        say("reusing the seeded log (seeded %s in %.0f s; --reseed to seed again)" % (seed["at"], seed["seconds"]))
    if args.no_rollup:
        say("jsonrpc_rollup --rebuild: skipped (--no-rollup)")
    else:
        _rollup(call_command)
    rows = time_pages(connection, args)
    print_table("%s, %s calls" % ("PostgreSQL" if pg else "SQLite", format(n_calls, ",")), rows, pg)
    if not args.no_prune:
        prune_under_load(connection, seed, n_calls, args)
    return 0


def _register_methods():
    """The made-up methods of the seeded log, registered so that the method browser lists all 40."""
    from jsonrpc_app.registry import registry

    from .scale_seed import METHODS

    for name in METHODS:
        if registry.get(name) is None:
            def method(key: str = "") -> str:
                return key

            registry.register(method, name)


def _read_marker(connection):
    with connection.cursor() as cursor:
        if MARKER not in connection.introspection.table_names(cursor):
            return None
        cursor.execute("SELECT data FROM %s" % MARKER)
        row = cursor.fetchone()
    if row is None:
        return None
    seed = json.loads(row[0])
    from .scale_seed import SEED_VERSION

    return seed if seed.get("version") == SEED_VERSION else None


def _write_marker(connection, seed):
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS %s (data text)" % MARKER)
        cursor.execute("DELETE FROM %s" % MARKER)
        if seed is not None:
            cursor.execute("INSERT INTO %s (data) VALUES (%%s)" % MARKER, [json.dumps(seed)])


def _seed(connection, n_calls, args):
    from django.contrib.auth import get_user_model

    from . import scale_seed

    pg = connection.vendor == "postgresql"
    _write_marker(connection, None)
    with connection.cursor() as cursor:
        for table in (scale_seed.CALL_TABLE, scale_seed.ENVELOPE_TABLE):
            cursor.execute(("TRUNCATE %s CASCADE" if pg else "DELETE FROM %s") % table)
    started = time.monotonic()
    start = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=scale_seed.DAYS)).replace(
        microsecond=0)
    say("seeding %s calls over %d days from %s" % (format(n_calls, ","), scale_seed.DAYS, start.isoformat()))
    seeder = scale_seed.seed_postgresql if pg else scale_seed.seed_sqlite
    envelopes, calls = seeder(connection, n_calls, start, say)
    phase = time.monotonic()
    with connection.cursor() as cursor:
        if pg:
            cursor.execute("VACUUM (ANALYZE) %s" % scale_seed.ENVELOPE_TABLE)
            cursor.execute("VACUUM (ANALYZE) %s" % scale_seed.CALL_TABLE)
        else:
            cursor.execute("ANALYZE")
    say("  %s in %.1f s" % ("VACUUM (ANALYZE)" if pg else "ANALYZE", time.monotonic() - phase))
    User = get_user_model()
    if not User.objects.filter(username="scale-admin").exists():
        User.objects.create_superuser("scale-admin", "scale@example.com", None)
    seconds = time.monotonic() - started
    say("seeded %s envelopes, %s calls in %.1f s" % (format(envelopes, ","), format(calls, ","), seconds))
    seed = {"version": scale_seed.SEED_VERSION, "calls": calls, "envelopes": envelopes, "start": start.isoformat(),
            "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "seconds": seconds}
    _write_marker(connection, seed)
    return seed


def _rollup(call_command):
    from django.core.management import get_commands

    if "jsonrpc_rollup" not in get_commands():
        say("jsonrpc_rollup: no such command here (the rollups are not in this tree)")
        return
    started = time.monotonic()
    call_command("jsonrpc_rollup", "--rebuild", verbosity=0)
    say("jsonrpc_rollup --rebuild: %.1f s" % (time.monotonic() - started))


# -- the pages ---------------------------------------------------------------------------


def pages(connection):
    """Return [(label, url)]: every admin page of the log a staff user opens, on this log's rows."""
    from django.urls import NoReverseMatch, reverse

    from jsonrpc_app.models import Call, Envelope

    env_list = reverse("admin:jsonrpc_app_envelope_changelist")
    call_list = reverse("admin:jsonrpc_app_call_changelist")
    batch = Envelope.objects.filter(is_batch=True, error_count__gt=0).order_by("-created_at").first() \
        or Envelope.objects.order_by("-created_at").first()
    call = Call.objects.filter(outcome="error").order_by("-created_at").first() or Call.objects.first()
    user = Call.objects.filter(user_id__isnull=False).order_by("-created_at").values_list("user_id", flat=True).first()
    day = (batch.created_at - datetime.timedelta(days=365)) if batch else datetime.datetime(2026, 1, 1)
    last_env = Envelope.objects.order_by("-id").values_list("id", flat=True).first() or 0
    # The last page: ?p= counts from 1 in the URL (Django's PAGE_VAR), 50 rows a page.
    env_pages = max(1, -(-Envelope.objects.count() // 50)) if connection.vendor != "postgresql" else None
    if env_pages is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM jsonrpc_app_envelope")
            env_pages = max(1, -(-cursor.fetchone()[0] // 50))
            cursor.execute("SELECT count(*) FROM jsonrpc_app_call")
            call_pages = max(1, -(-cursor.fetchone()[0] // 50))
    else:
        call_pages = max(1, -(-Call.objects.count() // 50))
    drill = "created_at__year=%d&created_at__month=%d&created_at__day=%d" % (day.year, day.month, day.day)
    out = [
        ("envelopes", env_list),
        ("envelopes ?outcome=error", env_list + "?outcome=error"),
        ("envelopes ?outcome=ok", env_list + "?outcome=ok"),
        ("envelopes ?outcome=invalid", env_list + "?outcome=invalid"),
        ("envelopes ?method=orders.get", env_list + "?method=orders.get"),
        ("envelopes ?error_code=-32603", env_list + "?error_code=-32603"),
        ("envelopes ?source=replay", env_list + "?source__exact=replay"),
        ("envelopes ?is_batch=1", env_list + "?is_batch__exact=1"),
        ("envelopes ?user=%s" % user, env_list + "?user=%s" % user),
        ("envelopes search ?q=shop.reserve", env_list + "?q=shop.reserve"),
        ("envelopes last page", env_list + "?p=%d" % env_pages),
        ("envelopes ?year", env_list + "?created_at__year=%d" % day.year),
        ("envelopes ?year&month", env_list + "?created_at__year=%d&created_at__month=%d" % (day.year, day.month)),
        ("envelopes ?year&month&day", env_list + "?" + drill),
        ("calls", call_list),
        ("calls ?method=orders.get", call_list + "?method=orders.get"),
        ("calls ?outcome=error", call_list + "?outcome__exact=error"),
        ("calls ?outcome=ok", call_list + "?outcome__exact=ok"),
        ("calls ?error_code=-32603", call_list + "?error_code=-32603"),
        ("calls ?source=admin", call_list + "?source__exact=admin"),
        ("calls ?user=%s" % user, call_list + "?user=%s" % user),
        ("calls ?is_notification=1", call_list + "?is_notification__exact=1"),
        ("calls search ?q=payments.refund", call_list + "?q=payments.refund"),
        ("calls last page", call_list + "?p=%d" % call_pages),
        ("calls ?year&month&day", call_list + "?" + drill),
        ("calls of an envelope", call_list + "?envelope__id__exact=%d" % (batch.pk if batch else 1)),
        ("envelope page (batch)", reverse("admin:jsonrpc_app_envelope_change", args=[batch.pk if batch else 1])),
        ("envelope page (newest)", reverse("admin:jsonrpc_app_envelope_change", args=[last_env])),
        ("call page (error)", reverse("admin:jsonrpc_app_call_change", args=[call.pk if call else 1])),
        ("method browser", reverse("admin:jsonrpc_app_methodentry_changelist")),
        ("method page subtract", reverse("admin:jsonrpc_app_methodentry_detail", args=["subtract"])),
        ("method page orders.get", reverse("admin:jsonrpc_app_methodentry_detail", args=["orders.get"])),
    ]
    try:
        usage = reverse("admin:jsonrpc_usage")
    except NoReverseMatch:
        say("usage dashboard: admin:jsonrpc_usage does not resolve here (not in this tree); not timed")
    else:
        out += [("usage dashboard", usage), ("usage dashboard orders.get", usage + "?method=orders.get")]
    return out


def time_pages(connection, args):
    """Return [(label, url, median ms, runs, queries, status)]."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(get_user_model().objects.get(username="scale-admin"))
    client.get("/admin/")  # the session, the admin's first imports
    rows = []
    for label, url in pages(connection):
        if args.pages and not any(text in label for text in args.pages):
            continue
        times, queries, status = [], None, None
        for _ in range(args.repeat):
            try:
                with CaptureQueriesContext(connection) as ctx:
                    started = time.perf_counter()
                    response = client.get(url)
                    times.append((time.perf_counter() - started) * 1000)
                status = response.status_code
                queries = len(ctx.captured_queries)
            except Exception as exc:  # a statement timeout: the page fails
                status = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:60])
                connection.close()
                break
            if sum(times) > args.page_budget * 1000:
                break
        median = statistics.median(times) if times else None
        rows.append((label, url, median, len(times), queries, status))
        say("  %-36s %10s ms  %2d runs  %3s queries  %s" % (
            label, "%.1f" % median if median is not None else "-", len(times), queries, status))
        slow = median is None or median > (300 if connection.vendor == "postgresql" else 1000)
        if args.explain and slow and status == 200:
            explain_slowest(connection, ctx.captured_queries)
    return rows


def explain_slowest(connection, captured, top=2):
    """Print the plan, with its times, of the page's slowest queries (EXPLAIN ANALYZE / EXPLAIN QUERY PLAN)."""
    slowest = sorted(captured, key=lambda q: -float(q["time"]))[:top]
    for query in slowest:
        sql = query["sql"]
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        say("      %s s: %s" % (query["time"], sql[:240]))
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
                plan = [r[0] for r in cursor.fetchall()]
            else:
                cursor.execute("EXPLAIN QUERY PLAN " + sql)
                plan = [r[-1] for r in cursor.fetchall()]
        for line in plan[:14]:
            say("        " + line)


def print_table(title, rows, pg):
    target_ms, target_q = (300, 15) if pg else (1000, None)
    say("\n### %s\n" % title)
    say("| page | median ms | runs | queries | status | target |")
    say("| --- | ---: | ---: | ---: | --- | --- |")
    for label, _url, median, runs, queries, status in rows:
        ok = status == 200 and median is not None and median <= target_ms and (
            target_q is None or (queries or 0) <= target_q)
        say("| %s | %s | %d | %s | %s | %s |" % (
            label, "%.1f" % median if median is not None else "-", runs, queries if queries is not None else "-",
            status, "met" if ok else "MISSED"))
    say("")


# -- pruning a month under load ----------------------------------------------------------


def prune_under_load(connection, seed, n_calls, args):
    from django.core.management import call_command

    from . import scale_seed

    start = datetime.datetime.fromisoformat(seed["start"])
    cutoff = start + datetime.timedelta(days=30)
    pg = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM jsonrpc_app_call WHERE created_at < %s", [cutoff])
        doomed = cursor.fetchone()[0]
        cursor.execute("SELECT coalesce(max(id), 0) FROM jsonrpc_app_call")
        max_call_before = cursor.fetchone()[0]
    _write_marker(connection, None)  # until the pruned month is back
    load = None
    if pg and not args.no_load:
        load = _Load(args, connection.settings_dict, max_call_before)
        load.start()
        load.wait_until_sending()
    age = int((datetime.datetime.now(datetime.timezone.utc) - cutoff).total_seconds())
    from io import StringIO

    out = StringIO()
    started = time.monotonic()
    call_command("jsonrpc_prune", "--older-than", "%ds" % age, stdout=out)
    seconds = time.monotonic() - started
    say("prune of the oldest 30 days (%s calls): jsonrpc_prune --older-than %ds: %.2f s%s"
        % (format(doomed, ","), age, seconds, " with the load test sending" if load else ""))
    say("  " + out.getvalue().strip())
    if load is not None:
        load.join()
        say("  load beside it: " + load.summary)
    started = time.monotonic()
    restorer = scale_seed.restore_postgresql if pg else scale_seed.restore_sqlite
    restored = restorer(connection, n_calls, start, cutoff)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM jsonrpc_app_call WHERE id > %s", [max_call_before])
        cursor.execute("DELETE FROM jsonrpc_app_envelope WHERE id > %s", [seed["envelopes"]])
        cursor.execute("ANALYZE jsonrpc_app_envelope" if pg else "ANALYZE")
        if pg:
            cursor.execute("ANALYZE jsonrpc_app_call")
    _write_marker(connection, seed)
    say("  the pruned month put back (%s calls) and the load's rows removed in %.1f s"
        % (format(restored, ","), time.monotonic() - started))


class _Load(threading.Thread):
    """The load test's client and server (bench.load_test) on the scale database, no restart."""

    def __init__(self, args, settings_dict, max_call_before):
        super().__init__(daemon=True)
        self.args, self.db, self.max_call_before = args, settings_dict, max_call_before
        self.sending = threading.Event()
        self.summary = "did not run"

    def wait_until_sending(self):
        self.sending.wait(120)
        time.sleep(1.0)  # the workers warm, the first calls logged

    def run(self):
        try:
            self.summary = self._run()
        except Exception as exc:
            self.summary = "FAILED: %r" % exc
        finally:
            self.sending.set()

    def _run(self):
        from . import load_test

        work = Path(tempfile.mkdtemp(prefix="jsonrpc-scale-load-"))
        url = "postgres://%s@%s:%s/%s" % (self.db["USER"], self.db["HOST"] or "127.0.0.1", self.db["PORT"] or 5432,
                                          self.db["NAME"])
        env = dict(os.environ, DATABASE_URL=url, JSONRPC_SPOOL_DIR=str(work / "spool"),
                   JSONRPC_JOURNAL_DIR=str(work / "journal"), JSONRPC_LOG_WRITER="journal",
                   JSONRPC_LOG_LOADER="thread", CONN_MAX_AGE="60")
        port = load_test.free_port()
        bodies = load_test.build_bodies(self.args.load_calls)
        server = load_test.start_server(env, port, 4, work / "gunicorn.log")
        acked, stats, lock = set(), {"5xx": 0, "unanswered": 0, "bad": 0}, threading.Lock()
        todo = list(reversed(bodies))

        def client():
            while True:
                with lock:
                    if not todo:
                        return
                    body, markers, expects = todo.pop()
                self.sending.set()
                try:
                    status, content = load_test.post(port, body)
                except OSError:
                    with lock:
                        stats["unanswered"] += 1
                    continue
                with lock:
                    if status >= 500:
                        stats["5xx"] += 1
                    elif load_test.check_answer(status, content, markers, expects):
                        acked.update(markers)
                    else:
                        stats["bad"] += 1

        started = time.monotonic()
        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        load_test.stop_server(server)
        load_test.run([sys.executable, "manage.py", "jsonrpc_log_loader", "--once"], env, check=False)
        load_test.run([sys.executable, "manage.py", "jsonrpc_flush_spool"], env, check=False)
        import psycopg

        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT request_id::text, params::text FROM jsonrpc_app_call WHERE id > %s",
                                [self.max_call_before]).fetchall()
        logged = set()
        for request_id, params in rows:
            rid = json.loads(request_id) if request_id is not None else None
            if isinstance(rid, str):
                logged.add(rid)
            elif params is not None:
                p = json.loads(params)
                if isinstance(p, list) and p and isinstance(p[0], str):
                    logged.add(p[0])
        lost = len(acked - logged)
        return "sent %d in %.1f s, ok %d, 5xx %d, unanswered %d, bad answers %d, logged %d, lost %d" % (
            self.args.load_calls, elapsed, len(acked), stats["5xx"], stats["unanswered"], stats["bad"],
            len(logged & acked), lost)


if __name__ == "__main__":
    sys.exit(main())
