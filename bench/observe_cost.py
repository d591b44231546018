"""
What the observers cost per call: the same bodies answered with no observer,
with OpenTelemetry but no provider configured, with OpenTelemetry and the real
SDK (in-memory span exporter and metric reader), with Prometheus, and with both.

    .venv/bin/python bench/observe_cost.py [--rounds 7] [--calls 20000]

Bodies go through ``service.answer()`` with the call log off (the log's cost
is bench/log_cost.py's), so what differs between the rows is only the
observers: a batch of 100 ``subtract`` calls (µs per call) and a single call
(µs per envelope). The targets take turns within each round (each round starting with the next
one, after a garbage collection), and each figure
is the median of the rounds. Absolute times vary on a shared machine; compare
the rows of one run.
"""

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, bench/ would come first on sys.path and shadow the standard library.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))


def setup():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    import django

    django.setup()


def targets():
    """[(label, list of observers, cleanup)] — nothing here sets a global provider."""
    import prometheus_client
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from jsonrpc_app.contrib.otel import OpenTelemetryObserver
    from jsonrpc_app.contrib.prometheus import PrometheusObserver

    def sdk(mode=None):
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        return OpenTelemetryObserver(tracer_provider, meter_provider, mode=mode), exporter.clear

    otel, otel_clear = sdk()
    dup, dup_clear = sdk("rpc/dup")
    both, both_clear = sdk()
    return [
        ("no observer", [], None),
        ("OpenTelemetry, no provider", [OpenTelemetryObserver()], None),
        ("OpenTelemetry + SDK (in-memory)", [otel], otel_clear),
        ("OpenTelemetry + SDK, rpc/dup", [dup], dup_clear),
        ("Prometheus", [PrometheusObserver(prometheus_client.CollectorRegistry())], None),
        ("OpenTelemetry + SDK and Prometheus", [both, PrometheusObserver(prometheus_client.CollectorRegistry())],
         both_clear),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20000, help="calls per target per round (in batches of 100)")
    args = parser.parse_args()
    setup()
    from django.conf import settings

    from jsonrpc_app import observe, service
    from jsonrpc_app.conf import jsonrpc_settings
    from jsonrpc_app.context import CallContext

    batch = json.dumps([{"jsonrpc": "2.0", "method": "subtract", "params": [i, 1], "id": i} for i in range(100)])
    single = json.dumps({"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1})
    batch, single = batch.encode(), single.encode()
    rows = targets()

    def use(observers):
        settings.JSONRPC = {**(getattr(settings, "JSONRPC", None) or {}), "OBSERVERS": observers}
        jsonrpc_settings.reload()
        observe.reset()

    def timed(body, n):
        t0 = time.perf_counter()
        for _ in range(n):
            service.answer(body, CallContext(source="bench", log=False))
        return (time.perf_counter() - t0) / n

    batches = max(1, args.calls // 100)
    results = {label: {"call": [], "single": []} for label, _o, _c in rows}
    for label, observers, clear in rows:  # warm-up
        use(observers)
        timed(batch, 20)
        timed(single, 200)
    for round_ in range(args.rounds):
        # Each round starts with another target, so that none always runs first.
        shift = round_ % len(rows)
        for label, observers, clear in rows[shift:] + rows[:shift]:
            use(observers)
            gc.collect()
            results[label]["call"].append(timed(batch, batches) / 100)
            results[label]["single"].append(timed(single, batches * 10))
            if clear is not None:
                clear()  # the in-memory exporter keeps every span: bound it
    base = {k: statistics.median(v) for k, v in results["no observer"].items()}
    print("Cost of the observers: median of %d interleaved rounds" % args.rounds)
    print("(service.answer() with the call log off; per call = a batch of 100 subtract calls / 100;")
    print(" single = one body of one call; extra = minus the no-observer row)")
    print()
    print("| observers | µs per call | extra µs per call | ratio | µs per single call | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, _o, _c in rows:
        call = statistics.median(results[label]["call"])
        one = statistics.median(results[label]["single"])
        print("| %s | %.2f | %+.2f | %.2f× | %.1f | %.2f× |" % (
            label, call * 1e6, (call - base["call"]) * 1e6, call / base["call"], one * 1e6, one / base["single"]))
    print()
    print("Python %s, %s, %d CPUs, load average %s" % (
        sys.version.split()[0], sys.platform, os.cpu_count() or 0,
        " ".join("%.1f" % x for x in os.getloadavg())))


if __name__ == "__main__":
    main()
