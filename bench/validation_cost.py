"""
What checking params against annotations costs per call.

The same five-parameter method, unannotated and annotated, called through
three layers: the binder alone, the dispatcher (parsed envelope -> response,
call log off), and the whole endpoint (Django test request -> bytes, call
log off). Prints CPU microseconds per call (the fastest of several rounds).

    python -m bench.validation_cost [--calls 20000] [--rounds 7]

Not a test: run it by hand, numbers depend on the machine.
"""

import argparse
import dataclasses
import datetime
import decimal
import json
import os
import sys
import time
from pathlib import Path
from typing import Literal

if not __package__:
    # Run as a file: bench/ itself must not shadow the standard library (bench/profile.py).
    sys.path[0] = str(Path(__file__).resolve().parent.parent)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

import django  # noqa: E402

django.setup()

from django.test import RequestFactory, override_settings  # noqa: E402

from jsonrpc_app import CallContext, MethodRegistry  # noqa: E402
from jsonrpc_app.dispatch import execute  # noqa: E402
from jsonrpc_app.protocol import parse  # noqa: E402
from jsonrpc_app.views import JsonRpcView  # noqa: E402


def plain(a, b, c, d, e):
    return a


def cheap(a: int, b: str, c: float, d: bool, e: int | None = None):
    return a


@dataclasses.dataclass
class Line:
    sku: str
    qty: int


def rich(
    a: datetime.date,
    b: decimal.Decimal,
    c: list[int],
    d: Literal["x", "y"],
    e: Line,
):
    return 1


CASES = {
    "unannotated": (plain, [1, "s", 2.5, True, 3], {"a": 1, "b": "s", "c": 2.5, "d": True, "e": 3}),
    "5 x int/str/float/bool": (cheap, [1, "s", 2.5, True, 3], {"a": 1, "b": "s", "c": 2.5, "d": True, "e": 3}),
    "5 x date/Decimal/list[int]/Literal/dataclass": (
        rich,
        ["2024-05-01", "1.50", [1, 2, 3], "x", {"sku": "A", "qty": 2}],
        {"a": "2024-05-01", "b": "1.50", "c": [1, 2, 3], "d": "x", "e": {"sku": "A", "qty": 2}},
    ),
}


def time_once(fn, calls):
    # Process CPU time: what other work on a shared machine disturbs least.
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    calls, rounds = args.calls, args.rounds
    http_calls = max(calls // 10, 100)

    registry = MethodRegistry("bench")
    rf = RequestFactory()
    view = JsonRpcView.as_view(registry=registry, authentication_classes=[], permission_classes=[])
    rows = []
    with override_settings(JSONRPC={"LOG_POLICY": "none"}):
        for label, (func, by_position, by_name) in CASES.items():
            method = registry.register(func, label.replace(" ", "_").replace("/", "_"))
            for shape, params in (("by position", by_position), ("by name", by_name)):
                body = json.dumps({"jsonrpc": "2.0", "method": method.name, "params": params, "id": 1}).encode()
                envelope = parse(body)
                context = CallContext(registry=registry, log=False)
                response, _ = execute(envelope, context)
                assert "result" in response, response

                def bind(binder=method.binder, params=params):
                    return binder.bind(params)

                def dispatch(envelope=envelope, context=context):
                    return execute(envelope, context)

                def http(body=body):
                    return view(rf.post("/rpc/", body, content_type="application/json"))

                assert json.loads(http().content).get("result") is not None
                rows.append([label, shape, method.binder.simple, (bind, dispatch, http), [[], [], []]])
        # Rounds interleave every case, so that a disturbance hits them alike;
        # each figure is the fastest round.
        for _ in range(rounds):
            for row in rows:
                for i, (fn, n) in enumerate(zip(row[3], (calls, calls, http_calls))):
                    row[4][i].append(time_once(fn, n))

    print(
        "python %s, %d calls (%d through the endpoint) x %d interleaved rounds, fastest round, "
        "CPU microseconds per call" % (sys.version.split()[0], calls, http_calls, rounds)
    )
    print("%-46s %-12s %-9s %8s %10s %10s" % ("params", "shape", "fast path", "bind", "dispatch", "endpoint"))
    for label, shape, simple, _fns, samples in rows:
        bind_us, dispatch_us, http_us = (min(s) for s in samples)
        print(
            "%-46s %-12s %-9s %8.2f %10.2f %10.1f"
            % (label, shape, "yes" if simple else "no", bind_us, dispatch_us, http_us)
        )


if __name__ == "__main__":
    main()
