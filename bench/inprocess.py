"""
One target, in-process: requests handed straight to Django's WSGIHandler (the
full middleware stack, as gunicorn calls it), in a process of its own.

    python -m bench.inprocess TARGET [--budget SECONDS]
    python -m bench.inprocess TARGET --serve     (driven by python -m bench)

Prints one JSON object: microseconds per call for each workload, of the
process's CPU time ("us") and of wall-clock time ("wall_us"), and for the
logging target the SQL statements one envelope costs. CPU time is what a
shared, busy machine disturbs least: time spent waiting for other processes
to leave a core is not counted.
"""

import argparse
import io
import json
import os
import statistics
import sys
import time

from .workloads import TARGETS, WORKLOADS


def _start_response(status, headers, exc_info=None):
    if not status.startswith("200"):
        raise AssertionError("answered %s" % status)


def make_environ(path, body):
    return {
        "REQUEST_METHOD": "POST",
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1",
        "HTTP_USER_AGENT": "jsonrpc_app-bench",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }


def post(handler, environ, body):
    env = environ.copy()
    env["wsgi.input"] = io.BytesIO(body)
    response = handler(env, _start_response)
    try:
        return b"".join(response)
    finally:
        response.close()


# Run at the end of each timed chunk: for the background writer, its flush(),
# for the journal, the loader, so that a chunk's figures include the writes
# its requests caused (the CPU time is the process's, the writer thread's included).
_after_chunk = None


def time_chunk(handler, environ, body, count):
    """Return (CPU seconds, wall seconds) per body over ``count`` bodies."""
    cpu, wall = time.process_time, time.perf_counter
    c, w = cpu(), wall()
    for _ in range(count):
        post(handler, environ, body)
    if _after_chunk is not None:
        _after_chunk()
    return (cpu() - c) / count, (wall() - w) / count


def timed(handler, environ, body, budget, warmup):
    """
    Return (CPU seconds, wall seconds) per body over ``budget`` seconds of CPU:
    the median of chunks of a few bodies each, so that a spell in which the
    machine's other work slows this process down weighs as one chunk, not as
    its whole length.
    """
    for _ in range(warmup):
        post(handler, environ, body)
    per_chunk = max(1, warmup // 2)
    cpus, walls = [], []
    deadline = time.process_time() + budget
    while True:
        c, w = time_chunk(handler, environ, body, per_chunk)
        cpus.append(c)
        walls.append(w)
        if time.process_time() >= deadline and len(cpus) >= 5:
            return statistics.median(cpus), statistics.median(walls)


def clear_log():
    from django.db import connection

    from jsonrpc_app.models import Call, Envelope

    with connection.cursor() as cursor:
        for model in (Call, Envelope):
            cursor.execute("DELETE FROM %s" % connection.ops.quote_name(model._meta.db_table))


def queries_per_envelope(handler, environ, body):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        post(handler, environ, body)
    out = []
    for q in ctx.captured_queries:
        sql = q["sql"]
        if " times: " in sql.split("(", 1)[0]:
            # executemany, as Django's debug cursor records it: "100 times: INSERT ..."
            times, sql = sql.split(" times: ", 1)
            out.append("%s(executemany, %s rows)" % (sql.split(" ", 1)[0].upper(), times))
        else:
            out.append(sql.split(" ", 1)[0].upper())
    return out


def setup(target):
    """Set up Django for ``target`` in this process; return (handler, path, log)."""
    path, log = TARGETS[target]
    os.environ["BENCH_LOG"] = log
    os.environ["BENCH_TARGET"] = target
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

    import django
    from django.core.handlers.wsgi import WSGIHandler

    django.setup(set_prefix=False)
    handler = WSGIHandler()
    if log in ("1", "2", "3", "4"):
        clear_log()
    global _after_chunk
    if log == "2":
        from jsonrpc_app.log import writer

        _after_chunk = writer.flush
    if log == "3":
        # The journal: loaded in this thread after each chunk (no loader thread),
        # so that a chunk's CPU time includes the loading its requests caused.
        from django.conf import settings

        from jsonrpc_app.conf import jsonrpc_settings
        from jsonrpc_app.log import loader

        settings.JSONRPC = {**settings.JSONRPC, "LOG_LOADER": "command"}
        jsonrpc_settings.reload()
        _after_chunk = loader.load_pending
    return handler, path, log


def check_answers(handler, path, target, names):
    """Post each workload once and stop unless the answer is the expected one."""
    for name in names:
        _label, body, expected, _calls = WORKLOADS[name]
        answer = json.loads(post(handler, make_environ(path, body), body))
        if answer != expected:
            raise SystemExit("%s answered %s with %r" % (target, name, answer))


def serve(target):
    """
    Lockstep mode, driven by ``python -m bench`` through stdin and stdout.

    Prints "ready" once set up, then answers each line "WORKLOAD COUNT" with
    the JSON of one timed chunk ({"us": ..., "wall_us": ...} per call),
    "queries WORKLOAD" with the SQL statements one envelope costs, and
    stops at end of input. The parent hands chunks to every target in turn,
    so that whatever else the machine does hits every target alike, chunk
    by chunk, and ratios can be taken between neighbouring chunks.
    """
    handler, path, log = setup(target)
    check_answers(handler, path, target, WORKLOADS)
    environs = {name: make_environ(path, WORKLOADS[name][1]) for name in WORKLOADS}
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "queries":
            name = words[1]
            out = queries_per_envelope(handler, environs[name], WORKLOADS[name][1]) if log == "1" else []
        else:
            name, count = words[0], int(words[1])
            calls = WORKLOADS[name][3]
            cpu, wall = time_chunk(handler, environs[name], WORKLOADS[name][1], count)
            out = {"us": cpu / calls * 1e6, "wall_us": wall / calls * 1e6}
        print(json.dumps(out), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--budget", type=float, default=0.4, help="CPU seconds timed per workload")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--serve", action="store_true", help="lockstep mode (see serve())")
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.target)
        return
    handler, path, log = setup(args.target)
    names = args.workloads.split(",")
    check_answers(handler, path, args.target, names)
    out = {"target": args.target, "us": {}}
    for name in names:
        _label, body, _expected, calls = WORKLOADS[name]
        environ = make_environ(path, body)
        batches = max(2, 200 // calls)
        cpu, wall = timed(handler, environ, body, args.budget, warmup=batches)
        out["us"][name] = cpu / calls * 1e6
        out.setdefault("wall_us", {})[name] = wall / calls * 1e6
        if log == "1":
            out.setdefault("queries", {})[name] = queries_per_envelope(handler, environ, body)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
