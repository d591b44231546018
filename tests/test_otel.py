"""
OpenTelemetry (jsonrpc_app.contrib.otel): one SERVER span per call after the
semantic conventions for JSON-RPC, the duration histogram, the
OTEL_SEMCONV_STABILITY_OPT_IN modes, and no work without a provider.
Everything is recorded by the real SDK (in-memory span exporter and metric reader).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jsonrpc_app import dispatch, observe, service
from jsonrpc_app.context import CallContext
from jsonrpc_app.contrib.otel import NEW_DURATION_BUCKETS, OpenTelemetryObserver, stability_mode
from jsonrpc_app.registry import MethodRegistry

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db

OLD_KEYS = {
    "rpc.system",
    "rpc.jsonrpc.version",
    "rpc.jsonrpc.request_id",
    "rpc.jsonrpc.error_code",
    "rpc.jsonrpc.error_message",
}
NEW_KEYS = {
    "rpc.system.name",
    "rpc.method_original",
    "jsonrpc.protocol.version",
    "jsonrpc.request.id",
    "rpc.status_code",
    "error.type",
}


class Telemetry:
    """A real SDK tracer and meter provider recording in memory."""

    def __init__(self):
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def observer(self, mode=None):
        return OpenTelemetryObserver(self.tracer_provider, self.meter_provider, mode=mode)

    def spans(self):
        return list(self.exporter.get_finished_spans())

    def metrics(self):
        """{metric name: (unit, [(attributes, data point)])}."""
        found = {}
        data = self.reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    found[metric.name] = (
                        metric.unit,
                        [(dict(p.attributes), p) for p in metric.data.data_points],
                    )
        return found


@pytest.fixture
def otel(settings):
    """Telemetry whose observer (default conventions unless otel.use(mode)) is the configured one."""
    telemetry = Telemetry()

    def use(mode=None):
        settings.JSONRPC = {**settings.JSONRPC, "OBSERVERS": [telemetry.observer(mode)]}
        return telemetry

    telemetry.use = use
    use()
    yield telemetry
    telemetry.tracer_provider.shutdown()
    telemetry.meter_provider.shutdown()


def req(method, params=None, id=None, notification=False):
    body = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    if not notification:
        body["id"] = id
    return body


def by_name(spans):
    return {span.name: span for span in spans}


# -- one span per call, its place in the trace ----------------------------------------


def test_a_call_is_one_server_span_named_after_the_method_with_the_long_published_attributes(otel, call):
    assert call(req("subtract", [42, 23], id=7)) == {"jsonrpc": "2.0", "result": 19, "id": 7}
    [span] = otel.spans()
    assert span.name == "subtract"
    assert span.kind is SpanKind.SERVER
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes) == {
        "rpc.system": "jsonrpc",
        "rpc.method": "subtract",
        "rpc.jsonrpc.version": "2.0",
        "rpc.jsonrpc.request_id": "7",
    }
    assert span.instrumentation_scope.name == "jsonrpc_app"
    assert span.instrumentation_scope.schema_url == "https://opentelemetry.io/schemas/1.37.0"


def test_the_span_is_a_child_of_the_span_current_when_the_call_runs(otel, call):
    tracer = otel.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("outer") as outer:
        call(req("subtract", [1, 1], id=1))
    spans = by_name(otel.spans())
    assert spans["subtract"].parent.span_id == outer.get_span_context().span_id
    assert spans["subtract"].context.trace_id == outer.get_span_context().trace_id


def test_the_span_is_a_child_of_the_django_request_span_when_django_is_instrumented(otel, client):
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumentor = DjangoInstrumentor()
    instrumentor.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    try:
        response = client.post("/rpc/", json.dumps(req("subtract", [5, 3], id=1)), content_type="application/json")
    finally:
        instrumentor.uninstrument()
    assert json.loads(response.content)["result"] == 2
    spans = otel.spans()
    [http] = [s for s in spans if s.name != "subtract"]
    rpc_span = by_name(spans)["subtract"]
    assert http.kind is SpanKind.SERVER and http.attributes.get("http.method", http.attributes.get("http.request.method")) == "POST"
    assert rpc_span.parent.span_id == http.context.span_id


def test_the_method_runs_with_its_span_current_so_its_own_spans_are_children(otel):
    seen = {}
    registry = MethodRegistry("otel-test")

    def traced():
        seen["span_id"] = trace.get_current_span().get_span_context().span_id
        with otel.tracer_provider.get_tracer("app").start_as_current_span("inner"):
            pass
        return "ok"

    registry.register(traced, name="traced")
    answer = service.answer(json.dumps(req("traced", id=1)), CallContext(registry=registry, source="test", log=False))
    assert json.loads(answer.content)["result"] == "ok"
    spans = by_name(otel.spans())
    assert seen["span_id"] == spans["traced"].context.span_id
    assert spans["inner"].parent.span_id == spans["traced"].context.span_id
    # Detached afterwards: nothing is left current.
    assert not trace.get_current_span().get_span_context().is_valid


def test_a_batch_is_one_sibling_span_per_call_in_order(otel, call):
    tracer = otel.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("outer") as outer:
        call([req("subtract", [3, 1], id=1), req("sum", [1, 2], id=2), req("notify_hello", [1], notification=True)])
    spans = [s for s in otel.spans() if s.name != "outer"]
    assert [s.name for s in spans] == ["subtract", "sum", "notify_hello"]
    assert {s.parent.span_id for s in spans} == {outer.get_span_context().span_id}


# -- errors -----------------------------------------------------------------------------


def test_every_jsonrpc_error_sets_the_span_status_to_error_with_its_code_and_message(otel, call):
    answers = call([
        req("subtract", ["a", 1], id=1),  # -32602
        req("testapp.boom", id=2),  # -32603
        req("testapp.app_error", id=3),  # the method's own JsonRpcError
        req("testapp.private", id=4),  # refused: login required
    ])
    codes = [a["error"]["code"] for a in answers]
    spans = by_name(otel.spans())
    assert len(spans) == 4
    for answer, name in zip(answers, ["subtract", "testapp.boom", "testapp.app_error", "testapp.private"]):
        span = spans[name]
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == answer["error"]["message"]
        assert span.attributes["rpc.jsonrpc.error_code"] == answer["error"]["code"]
        assert span.attributes["rpc.jsonrpc.error_message"] == answer["error"]["message"]
    assert codes[:2] == [-32602, -32603] and len(set(codes)) >= 3


def test_an_unknown_method_name_is_not_made_a_span_name(otel, call):
    call(req("no.such.method", id=1))
    [span] = otel.spans()
    assert span.name == "jsonrpc"
    assert span.attributes["rpc.method"] == "no.such.method"
    assert span.attributes["rpc.jsonrpc.error_code"] == -32601
    assert span.status.status_code is StatusCode.ERROR


def test_a_notification_has_no_request_id_and_a_null_id_an_empty_one(otel, call):
    call([req("notify_hello", [1], notification=True), req("subtract", [2, 1], id=None)])
    spans = by_name(otel.spans())
    assert "rpc.jsonrpc.request_id" not in spans["notify_hello"].attributes
    assert spans["subtract"].attributes["rpc.jsonrpc.request_id"] == ""


def test_a_failing_notification_is_an_error_span_though_nothing_is_answered(otel, call, settings):
    settings.JSONRPC = {**settings.JSONRPC, "LOG_POLICY": "none"}
    assert call(req("testapp.boom", notification=True)) is None
    [span] = otel.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["rpc.jsonrpc.error_code"] == -32603


def test_an_invalid_element_of_a_batch_is_an_error_span_named_jsonrpc_without_method(otel, call):
    answers = call([req("subtract", [2, 1], id=1), {"jsonrpc": "2.0", "method": 5, "id": 2}, 7])
    assert [a.get("error", {}).get("code") for a in answers] == [None, -32600, -32600]
    spans = otel.spans()
    assert [s.name for s in spans] == ["subtract", "jsonrpc", "jsonrpc"]
    for span in spans[1:]:
        assert span.status.status_code is StatusCode.ERROR
        assert "rpc.method" not in span.attributes
        assert span.attributes["rpc.jsonrpc.error_code"] == -32600
    # Not calls: no duration is recorded for them.
    _unit, points = otel.metrics()["rpc.server.duration"]
    assert [a["rpc.method"] for a, _p in points] == ["subtract"]


def test_a_body_that_is_not_json_is_no_call_and_makes_no_span(otel, rpc):
    response = rpc(b"{not json")
    assert json.loads(response.content)["error"]["code"] == -32700
    assert otel.spans() == []


# -- the duration histogram -----------------------------------------------------------


def test_rpc_server_duration_is_a_histogram_in_ms_per_method_and_error_code(otel, call):
    call([req("subtract", [3, 1], id=1), req("subtract", [4, 1], id=2), req("nope", id=3), req("testapp.boom", id=4)])
    unit, points = otel.metrics()["rpc.server.duration"]
    assert unit == "ms"
    counts = {tuple(sorted(a.items())): p.count for a, p in points}
    assert counts == {
        (("rpc.method", "subtract"), ("rpc.system", "jsonrpc")): 2,
        (("rpc.jsonrpc.error_code", -32601), ("rpc.method", "_OTHER"), ("rpc.system", "jsonrpc")): 1,
        (("rpc.jsonrpc.error_code", -32603), ("rpc.method", "testapp.boom"), ("rpc.system", "jsonrpc")): 1,
    }
    assert "rpc.server.call.duration" not in otel.metrics()
    # Milliseconds: each call takes far less than a second but more than nothing.
    assert all(0 < p.sum < 1000 for _a, p in points)


# -- OTEL_SEMCONV_STABILITY_OPT_IN ----------------------------------------------------


@pytest.mark.parametrize(
    "value, mode",
    [
        ("", "default"),
        ("http", "default"),
        ("database/dup", "default"),
        ("rpc", "rpc"),
        ("http/dup, rpc", "rpc"),
        ("rpc/dup", "rpc/dup"),
        ("rpc,rpc/dup", "rpc/dup"),
        ("rpc/dup , http", "rpc/dup"),
    ],
)
def test_the_opt_in_is_read_as_a_comma_separated_list_where_dup_wins(value, mode):
    assert stability_mode(value) == mode


def test_the_observer_reads_the_opt_in_from_the_environment(monkeypatch):
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http,rpc")
    assert Telemetry().observer().mode == "rpc"
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN")
    assert Telemetry().observer().mode == "default"


def test_rpc_opt_in_emits_only_the_new_conventions(otel, call):
    otel.use("rpc")
    call([req("subtract", [3, 1], id=1), req("nope", id="a"), req("sum", [1], id=None)])
    spans = otel.spans()
    assert {k for s in spans for k in s.attributes} & OLD_KEYS == set()
    subtract, unknown, null_id = spans
    assert dict(subtract.attributes) == {
        "rpc.system.name": "jsonrpc",
        "rpc.method": "subtract",
        "jsonrpc.protocol.version": "2.0",
        "jsonrpc.request.id": "1",
    }
    assert unknown.name == "jsonrpc"
    assert unknown.attributes["rpc.method"] == "_OTHER"
    assert unknown.attributes["rpc.method_original"] == "nope"
    assert unknown.attributes["rpc.status_code"] == "-32601"
    assert unknown.attributes["error.type"] == "-32601"
    assert unknown.status.status_code is StatusCode.ERROR
    assert "jsonrpc.request.id" not in null_id.attributes
    assert subtract.instrumentation_scope.schema_url == "https://opentelemetry.io/schemas/1.45.0"
    metrics = otel.metrics()
    assert "rpc.server.duration" not in metrics
    unit, points = metrics["rpc.server.call.duration"]
    assert unit == "s"
    assert {a["rpc.method"]: a.get("error.type") for a, _p in points} == {"subtract": None, "_OTHER": "-32601", "sum": None}
    assert all(a["rpc.system.name"] == "jsonrpc" for a, _p in points)
    # The advised boundaries, in seconds.
    assert tuple(points[0][1].explicit_bounds) == NEW_DURATION_BUCKETS
    assert all(0 < p.sum < 1 for _a, p in points)


def test_rpc_dup_opt_in_emits_both_conventions(otel, call):
    otel.use("rpc/dup")
    call([req("subtract", [3, 1], id=1), req("testapp.app_error", id=2)])
    ok, failed = otel.spans()
    assert OLD_KEYS - {"rpc.jsonrpc.error_code", "rpc.jsonrpc.error_message"} <= set(ok.attributes)
    assert {"rpc.system.name", "jsonrpc.protocol.version", "jsonrpc.request.id"} <= set(ok.attributes)
    assert OLD_KEYS <= set(failed.attributes)
    assert {"rpc.status_code", "error.type"} <= set(failed.attributes)
    assert str(failed.attributes["rpc.jsonrpc.error_code"]) == failed.attributes["rpc.status_code"]
    metrics = otel.metrics()
    assert metrics["rpc.server.duration"][0] == "ms"
    assert metrics["rpc.server.call.duration"][0] == "s"
    assert sum(p.count for _a, p in metrics["rpc.server.duration"][1]) == 2
    assert sum(p.count for _a, p in metrics["rpc.server.call.duration"][1]) == 2


# -- no provider, no extra ------------------------------------------------------------


def _python(code, env=None):
    full_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT), **(env or {})}
    full_env.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_without_a_provider_the_observer_is_left_out_until_one_is_set():
    # In a child process: the global providers can be set only once per process.
    out = _python(
        """
import json, django
from django.conf import settings
django.setup()
from jsonrpc_app import dispatch, observe, service
from jsonrpc_app.context import CallContext
settings.JSONRPC = {"OBSERVERS": ["jsonrpc_app.contrib.otel.OpenTelemetryObserver"]}
from jsonrpc_app.conf import jsonrpc_settings
jsonrpc_settings.reload(); observe.reset()
[observer] = observe.observers()
observer.recheck_interval = 3600
print(observe.wrap(dispatch.run) is dispatch.run)
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
# Looked for again at most once per recheck_interval: not yet...
print(observe.wrap(dispatch.run) is dispatch.run)
# ...but once the interval is over.
observer._next_check = 0.0
print(observe.wrap(dispatch.run) is dispatch.run)
body = json.dumps({"jsonrpc": "2.0", "method": "subtract", "params": [2, 1], "id": 1})
service.answer(body, CallContext(source="test", log=False))
print([s.name for s in exporter.get_finished_spans()])
"""
    )
    assert out.split("\n")[:4] == ["True", "True", "False", "['subtract']"]


def test_with_no_observer_configured_neither_extra_is_imported():
    out = _python(
        """
import json, sys, django
django.setup()
from jsonrpc_app import service
from jsonrpc_app.context import CallContext
body = json.dumps({"jsonrpc": "2.0", "method": "subtract", "params": [2, 1], "id": 1})
print(service.answer(body, CallContext(source="test", log=False)).content.decode())
print(sorted(m for m in sys.modules if m.split(".")[0] in ("opentelemetry", "prometheus_client")))
print("jsonrpc_app.contrib.otel" in sys.modules, "jsonrpc_app.contrib.prometheus" in sys.modules)
"""
    )
    lines = out.split("\n")
    assert json.loads(lines[0])["result"] == 1
    assert lines[1:3] == ["[]", "False False"]


def test_without_the_extra_installed_the_system_check_says_which_extra_to_install():
    # opentelemetry made unimportable, as on a machine without jsonrpc-app[otel].
    out = _python(
        """
import sys
sys.modules["opentelemetry"] = None
import json, django
from django.conf import settings
django.setup()
settings.JSONRPC = {"OBSERVERS": ["jsonrpc_app.contrib.otel.OpenTelemetryObserver"]}
from jsonrpc_app.conf import jsonrpc_settings
jsonrpc_settings.reload()
from jsonrpc_app import observe, service
from jsonrpc_app.context import CallContext
observe.reset()
[error] = observe.check_observers()
print(error.id, error.hint)
body = json.dumps({"jsonrpc": "2.0", "method": "subtract", "params": [2, 1], "id": 1})
print(service.answer(body, CallContext(source="test", log=False)).content.decode())
"""
    )
    lines = out.split("\n")
    assert lines[0] == 'jsonrpc_app.E060 pip install "jsonrpc-app[otel]"'
    # Calls are still answered, without the observer.
    assert json.loads(lines[1])["result"] == 1


def test_an_observer_configured_by_dotted_path_uses_the_global_providers(settings):
    settings.JSONRPC = {**settings.JSONRPC, "OBSERVERS": ["jsonrpc_app.contrib.otel.OpenTelemetryObserver"]}
    [observer] = observe.observers()
    assert isinstance(observer, OpenTelemetryObserver)
    # This process sets no global provider: the dispatcher runs unwrapped.
    assert observe.wrap(dispatch.run) is dispatch.run
