"""
Machine instructions per request, counted by valgrind (callgrind): repeatable
for the same code and inputs whatever else the machine is doing, where the
timed benchmarks move by tens of percent on a shared machine.

    python -m bench.instructions            # the table below, about 5 minutes
    python -m bench.instructions --one asgi /rpc-async/ single 100   # one count (what the table runs)

Two measures, each the difference between N requests and none (so start-up
is left out), divided by N:

- ``execute``: ``dispatch.execute()`` of a parsed body, logging off and on:
  the sync executor itself (a single call, and each call of a batch of 100);
- ``asgi``: the whole ASGI handler, called in-process (no server, no socket),
  for the bare async view and ``AsyncJsonRpcView`` with and without
  ``blocking=False`` methods.

``PYTHONHASHSEED=0`` keeps the counts the same from run to run. Needs
valgrind (Debian: apt-get install valgrind).
"""

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    os.environ["BENCH_LOG"] = "0"
    import django

    django.setup()


def _body(name):
    from .workloads import WORKLOADS

    return WORKLOADS[name][1]


def run_execute(name, count, log):
    _setup()
    from jsonrpc_app import dispatch, protocol
    from jsonrpc_app.context import CallContext

    parsed = protocol.parse(_body(name), 1000, 64)
    context = CallContext(source="http", log=log)
    for _ in range(count):
        dispatch.execute(parsed, context)


def run_asgi(path, name, count):
    _setup()
    from django.core.asgi import get_asgi_application

    app = get_asgi_application()
    body = _body(name)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1234), "server": ("127.0.0.1", 8000),
    }

    async def one():
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if pending:
                return pending.pop()
            await asyncio.sleep(3600)

        sent = []

        async def send(message):
            sent.append(message)

        await app(dict(scope), receive, send)
        if sent[0]["status"] != 200:
            raise SystemExit("%s answered %s" % (path, sent[0]["status"]))

    async def main():
        await one()  # the first request imports and connects: not counted
        for _ in range(count):
            await one()

    asyncio.run(main())


def count_instructions(args):
    """Run ``python -m bench.instructions --one ARGS`` under callgrind; return the instructions it executed."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-m", "bench.instructions", "--one", *map(str, args)],
        cwd=ROOT, env=dict(os.environ, PYTHONHASHSEED="0"), capture_output=True, text=True, timeout=1800,
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or not found:
        raise SystemExit("callgrind failed for %s:\n%s" % (" ".join(map(str, args)), out.stderr[-2000:]))
    return int(found.group(1))


def per_request(kind, *args, count):
    return (count_instructions([kind, *args, count]) - count_instructions([kind, *args, 0])) / count


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.instructions")
    parser.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=100, help="ASGI requests counted per figure")
    args = parser.parse_args(argv)
    if args.one:
        kind, *rest = args.one
        if kind == "execute":
            name, log, count = rest
            run_execute(name, int(count), log == "log")
        else:
            path, name, count = rest
            run_asgi(path, name, int(count))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    print("| dispatch.execute() | instructions |")
    print("| --- | ---: |")
    print("| single call, logging off | %.0f |" % per_request("execute", "single", "nolog", count=2000))
    for log in ("nolog", "log"):
        per_call = per_request("execute", "batch", log, count=50) / 100
        print("| each call of a batch of 100, logging %s | %.0f |" % ("off" if log == "nolog" else "on", per_call))
    print()
    print("| ASGI handler, logging off | single call | batch of 100 |")
    print("| --- | ---: | ---: |")
    for label, path in (("bare async view", "/bare-async/"), ("AsyncJsonRpcView", "/rpc-async/"),
                        ("AsyncJsonRpcView, blocking=False", "/rpc-async-inline/")):
        single = per_request("asgi", path, "single", count=args.requests)
        batch = per_request("asgi", path, "batch", count=args.requests)
        print("| %s | %.2f M | %.2f M |" % (label, single / 1e6, batch / 1e6))


if __name__ == "__main__":
    main()
