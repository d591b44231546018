"""
What the call log costs: the same requests with LOG_POLICY "none" and "all",
interleaved in one run, on SQLite and on PostgreSQL, for each LOG_WRITER
(``--writers journal request``).

For the journal, "request cpu" is the request thread's CPU time alone (what
the request pays: the append), and "all cpu" adds the loader's, which runs
after each timed block until it has caught up (LOG_LOADER "command", so that
the two are measured apart).

    .venv/bin/python bench/log_cost.py                 # SQLite (a temporary file), then
                                                       # PostgreSQL if DATABASE_URL is set
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python bench/log_cost.py

Requests are handed to Django's WSGIHandler (the demo project's settings and
middleware, as gunicorn calls it): a single ``subtract`` call, and a batch of
100 of them. Each target runs ROUNDS rounds of (none, all), and the table
shows the median per request. Absolute times vary from run to run on a
shared machine; compare the rows of one run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, bench/ would come first on sys.path and its modules would shadow
# the standard library's (bench/profile.py for the profile module cProfile imports).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]


def run_target(requests, rounds, writer):
    """Run in a process whose DATABASE_URL names the database; print JSON results."""
    sys.path.insert(0, str(ROOT))
    from bench.workloads import wsgi_environ as _environ
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    import django

    django.setup()
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.management import call_command
    from django.db import connection

    from jsonrpc_app.conf import jsonrpc_settings
    from jsonrpc_app.log import loader
    from jsonrpc_app.models import Call, Envelope

    call_command("migrate", verbosity=0)
    Call.objects.all().delete()
    Envelope.objects.all().delete()
    handler = WSGIHandler()

    single = json.dumps({"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}).encode()
    batch = json.dumps(
        [{"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i} for i in range(100)]
    ).encode()

    def start_response(status, headers):
        assert status.startswith("200"), status

    def timed(body, n):
        # Wall time includes waiting for the disk (the log's commit is durable);
        # CPU time is what the process itself spent: the request thread's, and
        # all of it with the loader catching up after the block.
        t0, c0, r0 = time.perf_counter(), time.process_time(), time.thread_time()
        for _ in range(n):
            b"".join(handler(_environ(body), start_response))
        wall, request_cpu = time.perf_counter() - t0, time.thread_time() - r0
        if writer == "journal":
            loader.load_pending()
        return wall / n, (time.process_time() - c0) / n, request_cpu / n

    def set_policy(policy):
        settings.JSONRPC = {
            **(getattr(settings, "JSONRPC", None) or {}),
            "LOG_POLICY": policy,
            "LOG_WRITER": writer,
            "LOG_LOADER": "command",
        }
        jsonrpc_settings.reload()

    results = {(kind, policy): [] for kind in ("single", "batch") for policy in ("none", "all")}
    for policy in ("none", "all"):  # warm-up
        set_policy(policy)
        timed(single, 50)
        timed(batch, 5)
    for _ in range(rounds):
        for policy in ("none", "all"):
            set_policy(policy)
            results["single", policy].append(timed(single, requests))
            results["batch", policy].append(timed(batch, max(1, requests // 10)))
    logged_calls = Call.objects.count()
    print(json.dumps({
        "vendor": connection.vendor,
        "logged_calls": logged_calls,
        "wall_us": {"%s/%s" % k: statistics.median(w for w, c, r in v) * 1e6 for k, v in results.items()},
        "cpu_us": {"%s/%s" % k: statistics.median(c for w, c, r in v) * 1e6 for k, v in results.items()},
        "request_cpu_us": {"%s/%s" % k: statistics.median(r for w, c, r in v) * 1e6 for k, v in results.items()},
    }))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="single calls per round (batches: a tenth)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--conn-max-age", type=int, nargs="+", default=[0, 60], metavar="SECONDS",
                        help="CONN_MAX_AGE values to run each database with (default: 0 60)")
    parser.add_argument("--writers", nargs="+", default=["journal", "request"],
                        choices=["journal", "request", "background"], help="LOG_WRITER values to run")
    parser.add_argument("--target", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--writer", default="journal", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.target:
        run_target(args.requests, args.rounds, args.writer)
        return

    targets = []
    with tempfile.TemporaryDirectory() as tmp:
        databases = [("SQLite", "sqlite:///%s/bench.sqlite3" % tmp)]
        if os.environ.get("DATABASE_URL", "").startswith("postgres"):
            databases.append(("PostgreSQL", os.environ["DATABASE_URL"]))
        # A connection per request (the demo's CONN_MAX_AGE=0) and a kept one.
        for writer in args.writers:
            for max_age in args.conn_max_age:
                for name, url in databases:
                    targets.append(("%s, %s, CONN_MAX_AGE=%s" % (writer, name, max_age), url, max_age, writer))
        rows = []
        for label, url, max_age, writer in targets:
            env = dict(os.environ, DATABASE_URL=url, CONN_MAX_AGE=str(max_age),
                       JSONRPC_SPOOL_DIR=str(Path(tmp) / "spool"),
                       JSONRPC_JOURNAL_DIR=str(Path(tmp) / "journal"))
            done = subprocess.run(
                [sys.executable, __file__, "--target", "--requests", str(args.requests),
                 "--rounds", str(args.rounds), "--writer", writer],
                env=env, capture_output=True, text=True, cwd=ROOT,
            )
            if done.returncode:
                sys.exit("%s failed:\n%s" % (label, done.stderr))
            out = done.stdout
            data = json.loads(out.strip().splitlines()[-1])
            rows.append((label, data))
    print("Cost of the call log: median of %d interleaved rounds, µs per request" % args.rounds)
    print("(WSGIHandler, demo settings; batch = 100 subtract calls in one body;")
    print(" wall = elapsed on the request, including the wait for a durable commit;")
    print(" request cpu = the request thread's CPU; all cpu = the process's, the journal's loader included)")
    print()
    print("| writer, database | request | wall, none | wall, all | wall ratio "
          "| request cpu, none | request cpu, all | request cpu ratio | all cpu, all | all cpu ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, data in rows:
        w, c, r = data["wall_us"], data["cpu_us"], data["request_cpu_us"]
        for kind, name in (("single", "single call"), ("batch", "batch of 100")):
            wn, wa = w["%s/none" % kind], w["%s/all" % kind]
            rn, ra = r["%s/none" % kind], r["%s/all" % kind]
            cn, ca = c["%s/none" % kind], c["%s/all" % kind]
            print("| %s | %s | %.0f | %.0f | %.2f× | %.0f | %.0f | %.2f× | %.0f | %.2f× |"
                  % (label, name, wn, wa, wa / wn, rn, ra, ra / rn, ca, ca / cn))
    print()
    print("Python %s, %s, %d CPUs, load average %s" % (
        sys.version.split()[0], sys.platform, os.cpu_count() or 0,
        " ".join("%.1f" % x for x in os.getloadavg())))


if __name__ == "__main__":
    main()
