"""
What the usage rollups (jsonrpc_app.log.rollup) add to writing the call log:
the same work with USAGE_ROLLUPS on and off, interleaved in one process, on
the database of DATABASE_URL (else a temporary SQLite file).

- loader: a journal of N calls (single calls, and batches of 100) made by the
  real request path, then loaded with the loader's write_chunk() in chunks of
  LOG_LOADER_CHUNK envelopes, the log tables emptied before each round;
- request: a logged request with LOG_WRITER "request" through Django's
  WSGIHandler (a single call, a batch of 100), blocks of requests taking turns.

    .venv/bin/python bench/rollup_cost.py --calls 20000 --rounds 5
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python bench/rollup_cost.py

The target database's log tables are emptied: never point it at a log you want to keep.
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
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]


def target(calls, rounds, requests, journal_dir):
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

    from jsonrpc_app import service
    from jsonrpc_app.conf import jsonrpc_settings
    from jsonrpc_app.context import CallContext
    from jsonrpc_app.log import journal, lines, loader, rollup
    from jsonrpc_app.models import Call, Envelope, UsageRollup

    call_command("migrate", verbosity=0)

    # The time spent in the rollups' own code (folding the calls, the upsert
    # when it is a statement of its own), measured inside the runs with
    # rollups on: less noisy than the difference of two runs on a busy machine.
    inside = [0.0]

    def timed(func):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                inside[0] += time.perf_counter() - t
        return wrapper

    rollup.record = timed(rollup.record)
    rollup.in_with = timed(rollup.in_with)

    def configure(rollups, writer="journal"):
        settings.JSONRPC = {
            **settings.JSONRPC, "LOG_WRITER": writer, "LOG_LOADER": "command", "LOG_JOURNAL_DIR": journal_dir,
            "LOG_JOURNAL_FSYNC": "never", "USAGE_ROLLUPS": rollups,
        }
        jsonrpc_settings.reload()

    def empty():
        UsageRollup.objects.all().delete()
        Call.objects.all().delete()
        Envelope.objects.all().delete()

    out = {"vendor": connection.vendor}
    # -- the loader
    for batch in (1, 100):
        configure(True)
        empty()
        sent = 0
        while sent < calls:
            n = min(batch, calls - sent)
            body = [{"jsonrpc": "2.0", "method": "subtract", "params": [sent + k, 1], "id": sent + k} for k in range(n)]
            service.answer(json.dumps(body[0] if n == 1 else body), CallContext(source="http", log=True))
            sent += n
        journal.close()
        raw = [line for path in journal.journals(journal_dir) for line in path.read_bytes().splitlines() if line]
        for path in journal.journals(journal_dir):
            path.unlink()
        chunk = jsonrpc_settings.LOG_LOADER_CHUNK
        times = {True: [], False: []}
        shares = []
        for _ in range(rounds):
            for rollups in (False, True):
                configure(rollups)
                empty()
                items = [(line, lines.decode(line)) for line in raw]
                inside[0] = 0.0
                w0, c0 = time.perf_counter(), time.process_time()
                for i in range(0, len(items), chunk):
                    written, _present, rejected = loader.write_chunk(items[i:i + chunk], "default")
                    assert not rejected
                times[rollups].append((time.perf_counter() - w0, time.process_time() - c0))
                if rollups:
                    shares.append(inside[0] / (times[rollups][-1][0] - inside[0]))
                assert Call.objects.count() == calls
                assert UsageRollup.objects.exists() == rollups
        out["loader/%d" % batch] = {
            str(k): {"wall": statistics.median(w for w, c in v), "cpu": statistics.median(c for w, c in v)}
            for k, v in times.items()
        }
        out["loader/%d" % batch]["inside"] = statistics.median(shares)
    # -- a logged request, LOG_WRITER "request"
    handler = WSGIHandler()
    single = json.dumps({"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}).encode()
    batch = json.dumps([{"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i} for i in range(100)]).encode()

    def start_response(status, headers):
        assert status.startswith("200"), status

    for name, body, n in (("single", single, requests), ("batch", batch, max(1, requests // 10))):
        times = {True: [], False: []}
        shares = []
        for rollups in (False, True):  # warm-up
            configure(rollups, "request")
            for _ in range(20):
                b"".join(handler(_environ(body), start_response))
        for _ in range(rounds):
            for rollups in (False, True):
                configure(rollups, "request")
                inside[0] = 0.0
                w0, c0 = time.perf_counter(), time.process_time()
                for _ in range(n):
                    b"".join(handler(_environ(body), start_response))
                wall = time.perf_counter() - w0
                times[rollups].append((wall / n, (time.process_time() - c0) / n))
                if rollups:
                    shares.append(inside[0] / (wall - inside[0]))
        out["request/%s" % name] = {
            str(k): {"wall": statistics.median(w for w, c in v) * 1e6, "cpu": statistics.median(c for w, c in v) * 1e6}
            for k, v in times.items()
        }
        out["request/%s" % name]["inside"] = statistics.median(shares)
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls in the loader's journal (default 20000)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300, help="single calls per block (batches: a tenth)")
    parser.add_argument("--target", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--journal", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.target:
        target(args.calls, args.rounds, args.requests, args.journal)
        return
    url = os.environ.get("DATABASE_URL", "")
    with tempfile.TemporaryDirectory() as tmp:
        url = url or "sqlite:///%s/rollups.sqlite3" % tmp
        done = subprocess.run(
            [sys.executable, __file__, "--target", "--calls", str(args.calls), "--rounds", str(args.rounds),
             "--requests", str(args.requests), "--journal", str(Path(tmp) / "journal")],
            env=dict(os.environ, DATABASE_URL=url), capture_output=True, text=True, cwd=ROOT,
        )
        if done.returncode:
            sys.exit(done.stderr)
        r = json.loads(done.stdout.strip().splitlines()[-1])
    print("Usage rollups: their cost on %s, median of %d interleaved rounds" % (r["vendor"], args.rounds))
    print()
    print("| what | rollups off | rollups on | extra (CPU) | extra (wall) | in the rollups' code |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for key, label, unit in (
        ("loader/1", "loader, %d single calls (CPU s / wall s)" % args.calls, "s"),
        ("loader/100", "loader, %d calls in batches of 100" % args.calls, "s"),
        ("request/single", "logged request (LOG_WRITER request), one call, per request", "µs"),
        ("request/batch", "logged request, a batch of 100, per request", "µs"),
    ):
        off, on = r[key]["False"], r[key]["True"]
        fmt = "%.2f" if unit == "s" else "%.0f"
        print("| %s | %s | %s | %+.1f %% | %+.1f %% | %+.1f %% |" % (
            label,
            (fmt + " / " + fmt + " %s") % (off["cpu"], off["wall"], unit),
            (fmt + " / " + fmt + " %s") % (on["cpu"], on["wall"], unit),
            100.0 * (on["cpu"] / off["cpu"] - 1), 100.0 * (on["wall"] / off["wall"] - 1),
            100.0 * r[key]["inside"]))
    print()
    print("The last column: wall time inside the rollups' code (folding, and the upsert where it is a statement")
    print("of its own; on PostgreSQL's one-statement request path it runs inside that statement, not counted)")
    print("in % of the rest of the run, measured in the runs with rollups on.")
    print("CPU / wall; Python %s, %d CPUs, load average %s" % (
        sys.version.split()[0], os.cpu_count() or 0, " ".join("%.1f" % x for x in os.getloadavg())))


if __name__ == "__main__":
    main()
