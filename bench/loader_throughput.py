"""
How fast the call log's loader empties a journal into the database: a
journal of N calls (default 200,000) is written by the real request path
(the demo's ``subtract``, in batches and single calls), then loaded alone,
timed by wall clock and by CPU.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python bench/loader_throughput.py
    .venv/bin/python bench/loader_throughput.py --db sqlite --calls 50000

The target database's log tables are emptied first: never point it at a
database whose log you want to keep.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]


def run(calls, batch, journal_dir, copy):
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from jsonrpc_app import service
    from jsonrpc_app.conf import jsonrpc_settings
    from jsonrpc_app.context import CallContext
    from jsonrpc_app.log import journal, loader
    from jsonrpc_app.models import Call, Envelope

    settings.JSONRPC = {
        **settings.JSONRPC,
        "LOG_WRITER": "journal",
        "LOG_LOADER": "command",
        "LOG_JOURNAL_DIR": journal_dir,
        "LOG_JOURNAL_FSYNC": "never",
        "LOG_LOADER_COPY": copy,
    }
    jsonrpc_settings.reload()
    call_command("migrate", verbosity=0)
    Call.objects.all().delete()
    Envelope.objects.all().delete()

    t0 = time.perf_counter()
    sent = 0
    i = 0
    while sent < calls:
        n = min(batch, calls - sent)
        if n == 1:
            body = {"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i}
        else:
            body = [{"jsonrpc": "2.0", "method": "subtract", "params": [i + k, 1], "id": i + k} for k in range(n)]
        service.answer(json.dumps(body), CallContext(source="http", log=True))
        sent += n
        i += n
    journal.close()
    appended = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in journal.journals(journal_dir))

    w0, c0 = time.perf_counter(), time.process_time()
    result = loader.load_pending()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    assert result.error is None, result.error
    logged = Call.objects.count()
    print(json.dumps({
        "vendor": connection.vendor,
        "calls": calls,
        "batch": batch,
        "envelopes": result.written,
        "loaded_calls": result.calls,
        "logged": logged,
        "journal_mb": size / 1e6,
        "append_s": appended,
        "load_wall_s": wall,
        "load_cpu_s": cpu,
    }))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--batches", type=int, nargs="+", default=[100, 1], metavar="N",
                        help="calls per envelope, one run each (default: 100 1)")
    parser.add_argument("--db", choices=["postgres", "sqlite", "mysql"], default=None,
                        help="default: DATABASE_URL's, else SQLite")
    parser.add_argument("--target", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=100, help=argparse.SUPPRESS)
    parser.add_argument("--journal", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--no-copy", action="store_true", help="PostgreSQL: multi-row INSERTs instead of COPY")
    args = parser.parse_args()
    if args.target:
        run(args.calls, args.batch, args.journal, not args.no_copy)
        return
    url = os.environ.get("DATABASE_URL", "")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.db == "sqlite" or (args.db is None and not url):
            url = "sqlite:///%s/loader.sqlite3" % tmp
        for batch in args.batches:
            done = subprocess.run(
                [sys.executable, __file__, "--target", "--calls", str(args.calls), "--batch", str(batch),
                 "--journal", str(Path(tmp) / ("journal-%d" % batch))] + (["--no-copy"] if args.no_copy else []),
                env=dict(os.environ, DATABASE_URL=url, DJANGO_DEBUG="0"), capture_output=True, text=True, cwd=ROOT,
            )
            if done.returncode:
                sys.exit(done.stderr)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("The call log's loader alone: a journal of %d calls into the database" % args.calls)
    print()
    print("| database | calls per envelope | envelopes | journal MB | load wall s | calls/s (wall) | load CPU s | calls/s (CPU) | logged |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s%s | %d | %d | %.1f | %.2f | %.0f | %.2f | %.0f | %d |" % (
            r["vendor"], " (INSERT)" if args.no_copy and r["vendor"] == "postgresql" else "",
            r["batch"], r["envelopes"], r["journal_mb"], r["load_wall_s"],
            r["loaded_calls"] / r["load_wall_s"], r["load_cpu_s"], r["loaded_calls"] / r["load_cpu_s"], r["logged"]))
    print()
    print("Python %s, %d CPUs, load average %s" % (
        sys.version.split()[0], os.cpu_count() or 0, " ".join("%.1f" % x for x in os.getloadavg())))


if __name__ == "__main__":
    main()
