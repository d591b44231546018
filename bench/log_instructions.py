"""
What the call log costs, in machine instructions (valgrind's callgrind):
repeatable whatever else the machine is doing, where bench/log_cost.py's CPU
times move by tens of percent on a shared machine.

    python -m bench.log_instructions                 # SQLite (a temporary file)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench python -m bench.log_instructions

Requests are handed to Django's WSGIHandler (the demo project's settings, as
gunicorn calls it) with LOG_WRITER "journal" and LOG_LOADER "command": a
single ``subtract`` call and a batch of 100 of them, with LOG_POLICY "none"
and "all". Counted per request:

- ``request``: the request alone, what the request thread executes (for the
  journal: the append);
- ``loader``: what ``loader.load_pending()`` executes, in a thread of its
  own as in production, to write those requests' lines into the database (outside the database server's own
  process: SQLite's work is counted, PostgreSQL's server is not);
- ``all``: the two together, issue 13's "all the process's CPU".

Only the requests (or the load) are counted: collection is switched on inside
``functools.reduce`` (``--toggle-collect``), which runs them, so start-up and
warm-up are left out. ``PYTHONHASHSEED=0`` keeps the counts from run to run.
"""

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .workloads import wsgi_environ as _environ

ROOT = Path(__file__).resolve().parent.parent


def _bodies():
    single = json.dumps({"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}).encode()
    batch = json.dumps(
        [{"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i} for i in range(100)]
    ).encode()
    return {"single": single, "batch": batch}


def run_one(what, kind, policy, count):
    """In a process under callgrind: warm up, then run what is counted inside functools.reduce."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    import django

    django.setup()
    from django.conf import settings
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.management import call_command

    from jsonrpc_app.conf import jsonrpc_settings
    from jsonrpc_app.log import loader
    from jsonrpc_app.models import Call

    call_command("migrate", verbosity=0)
    settings.JSONRPC = {
        **(getattr(settings, "JSONRPC", None) or {}),
        "LOG_POLICY": policy, "LOG_WRITER": "journal", "LOG_LOADER": "command",
    }
    jsonrpc_settings.reload()
    handler = WSGIHandler()
    body = _bodies()[kind]

    def start_response(status, headers):
        if not status.startswith("200"):
            raise SystemExit("the endpoint answered %s" % status)

    def request(acc, _):
        b"".join(handler(_environ(body), start_response))
        return acc

    # The loader in a thread of its own, as LOG_LOADER "thread" and the command run it:
    # its connection (and the driver's statement cache) lasts from load to load, where
    # each request closes the connections of the thread it runs in (CONN_MAX_AGE 0).
    own_thread = ThreadPoolExecutor(1)

    def load():
        own_thread.submit(loader.load_pending).result()

    for _ in range(10):  # warm-up: imports, the connection, the journal file, caches
        request(None, None)
    load()
    before = Call.objects.count()
    if what == "request":
        functools.reduce(request, range(count), None)
        load()
    else:
        for _ in range(count):
            request(None, None)
        own_thread.submit(functools.reduce, lambda acc, _: loader.load_pending(), range(1), None).result()
    logged = Call.objects.count() - before
    expected = 0 if policy == "none" else count * (100 if kind == "batch" else 1)
    if logged != expected:
        raise SystemExit("logged %d calls, expected %d" % (logged, expected))


def count(what, kind, policy, requests, env):
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--collect-atstart=no",
         "--toggle-collect=functools_reduce", sys.executable, "-m", "bench.log_instructions",
         "--one", what, kind, policy, str(requests)],
        cwd=ROOT, env=dict(env, PYTHONHASHSEED="0"), capture_output=True, text=True, timeout=1800,
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or not found:
        raise SystemExit("callgrind failed for %s %s %s:\n%s" % (what, kind, policy, out.stderr[-3000:]))
    return int(found.group(1)) / requests


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.log_instructions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=40, help="requests counted per figure (batches: a quarter)")
    args = parser.parse_args(argv)
    if args.one:
        what, kind, policy, n = args.one
        run_one(what, kind, policy, int(n))
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, JSONRPC_JOURNAL_DIR=str(Path(tmp) / "journal"), JSONRPC_SPOOL_DIR=str(Path(tmp) / "spool"))
        env.setdefault("DATABASE_URL", "sqlite:///%s/bench.sqlite3" % tmp)
        vendor = env["DATABASE_URL"].split(":", 1)[0]
        print("Instructions per request (callgrind), WSGIHandler, LOG_WRITER journal, %s" % vendor)
        print()
        print("| request | logging off | request, on | ratio | loader | all, on | ratio |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for kind in ("single", "batch"):
            n = args.requests if kind == "single" else max(1, args.requests // 4)
            off = count("request", kind, "none", n, env)
            on = count("request", kind, "all", n, env)
            load = count("loader", kind, "all", n, env)
            print("| %s | %.0f | %.0f | %.2f× | %.0f | %.0f | %.2f× |" % (
                "single call" if kind == "single" else "batch of 100", off, on, on / off, load, on + load,
                (on + load) / off))


if __name__ == "__main__":
    main()
