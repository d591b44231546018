"""
Prometheus (jsonrpc_app.contrib.prometheus): per-method call and error
counters and a duration histogram, read back by scraping the registry as
Prometheus would; method labels only from the registry.
"""

import urllib.request

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from jsonrpc_app import observe
from jsonrpc_app.contrib.prometheus import PrometheusObserver

pytestmark = pytest.mark.django_db

# Named by dotted path in JSONRPC["PROMETHEUS_REGISTRY"] below.
SETTING_REGISTRY = CollectorRegistry()


def req(method, params=None, id=None, notification=False):
    body = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    if not notification:
        body["id"] = id
    return body


def scrape(registry):
    """{(sample name, frozenset of labels): value} from the text exposition format."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


@pytest.fixture
def registry(settings):
    """A registry of its own for the test, the observer configured by dotted path."""
    registry = CollectorRegistry()
    settings.JSONRPC = {
        **settings.JSONRPC,
        "OBSERVERS": ["jsonrpc_app.contrib.prometheus.PrometheusObserver"],
        "PROMETHEUS_REGISTRY": registry,
    }
    return registry


MIXED_BATCH = [
    req("subtract", [42, 23], id=1),
    req("subtract", [1, 2], id=2),
    req("subtract", ["x", 2], id=3),  # -32602
    req("testapp.boom", id=4),  # -32603
    req("testapp.app_error", id=5),  # -32001
    req("no.such.method", id=6),  # -32601
    req("notify_hello", [7], notification=True),
    {"jsonrpc": "2.0", "method": 5, "id": 8},  # -32600
]


def test_a_mixed_batch_is_counted_per_method_and_errors_per_code_when_scraped(registry, call):
    answers = call(MIXED_BATCH)
    assert len(answers) == 7
    samples = scrape(registry)
    assert value(samples, "jsonrpc_calls_total", method="subtract") == 3
    assert value(samples, "jsonrpc_calls_total", method="testapp.boom") == 1
    assert value(samples, "jsonrpc_calls_total", method="testapp.app_error") == 1
    assert value(samples, "jsonrpc_calls_total", method="notify_hello") == 1
    assert value(samples, "jsonrpc_calls_total", method="<unknown>") == 1
    assert value(samples, "jsonrpc_calls_total", method="<invalid>") == 1
    errors = {
        (dict(labels)["method"], dict(labels)["code"]): v
        for (name, labels), v in samples.items()
        if name == "jsonrpc_errors_total"
    }
    assert errors == {
        ("subtract", "-32602"): 1,
        ("testapp.boom", "-32603"): 1,
        ("testapp.app_error", "-32001"): 1,
        ("<unknown>", "-32601"): 1,
        ("<invalid>", "-32600"): 1,
    }
    # The histogram: one observation per call that reached the lookup, none for the invalid element.
    assert value(samples, "jsonrpc_call_duration_seconds_count", method="subtract") == 3
    assert value(samples, "jsonrpc_call_duration_seconds_count", method="notify_hello") == 1
    assert value(samples, "jsonrpc_call_duration_seconds_count", method="<invalid>") is None
    assert 0 < value(samples, "jsonrpc_call_duration_seconds_sum", method="subtract") < 1
    assert value(samples, "jsonrpc_call_duration_seconds_bucket", method="subtract", le="+Inf") == 3
    assert value(samples, "jsonrpc_call_duration_seconds_bucket", method="subtract", le="10.0") == 3


def test_made_up_method_names_never_become_label_values(registry, call):
    call([req("made.up.%d" % i, id=i) for i in range(50)])
    samples = scrape(registry)
    methods = {dict(labels).get("method") for (_name, labels) in samples}
    assert not any(m and m.startswith("made.up") for m in methods)
    assert value(samples, "jsonrpc_calls_total", method="<unknown>") == 50
    assert value(samples, "jsonrpc_errors_total", method="<unknown>", code="-32601") == 50


def test_calls_with_the_log_off_are_counted_too(registry, call, settings):
    settings.JSONRPC = {**settings.JSONRPC, "LOG_POLICY": "none"}
    call([req("subtract", [2, 1], id=1), req("testapp.boom", notification=True)])
    samples = scrape(registry)
    assert value(samples, "jsonrpc_calls_total", method="subtract") == 1
    assert value(samples, "jsonrpc_errors_total", method="testapp.boom", code="-32603") == 1


def test_the_metrics_go_to_the_default_registry_unless_the_setting_names_another(settings, call):
    settings.JSONRPC = {**settings.JSONRPC, "OBSERVERS": ["jsonrpc_app.contrib.prometheus.PrometheusObserver"]}
    default = prometheus_client.REGISTRY
    before = default.get_sample_value("jsonrpc_calls_total", {"method": "sum"}) or 0
    call(req("sum", [1, 2], id=1))
    assert default.get_sample_value("jsonrpc_calls_total", {"method": "sum"}) == before + 1
    assert b"jsonrpc_call_duration_seconds_bucket" in generate_latest(default)


def test_the_registry_setting_may_be_a_dotted_path(settings, call):
    settings.JSONRPC = {
        **settings.JSONRPC,
        "OBSERVERS": ["jsonrpc_app.contrib.prometheus.PrometheusObserver"],
        "PROMETHEUS_REGISTRY": "tests.test_prometheus.SETTING_REGISTRY",
    }
    before = SETTING_REGISTRY.get_sample_value("jsonrpc_calls_total", {"method": "subtract"}) or 0
    call(req("subtract", [5, 1], id=1))
    assert SETTING_REGISTRY.get_sample_value("jsonrpc_calls_total", {"method": "subtract"}) == before + 1


def test_observers_made_anew_share_one_set_of_series_per_registry(registry, call, settings):
    # A change of settings makes the observers anew; the registry must not
    # refuse their metrics as duplicates, and the counts carry on.
    call(req("subtract", [2, 1], id=1))
    settings.JSONRPC = {**settings.JSONRPC, "LOG_POLICY": "errors"}
    call(req("subtract", [2, 1], id=2))
    assert PrometheusObserver(registry).calls is PrometheusObserver(registry).calls
    assert value(scrape(registry), "jsonrpc_calls_total", method="subtract") == 2


def test_prometheus_clients_own_metrics_endpoint_serves_them_over_http(registry, call):
    server, thread = prometheus_client.start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        call(req("subtract", [2, 1], id=1))
        port = server.server_address[1]
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert 'jsonrpc_calls_total{method="subtract"} 1.0' in text


def test_both_observers_together_see_the_same_calls(registry, settings, call):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from jsonrpc_app.contrib.otel import OpenTelemetryObserver

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings.JSONRPC = {
        **settings.JSONRPC,
        "OBSERVERS": [OpenTelemetryObserver(provider), "jsonrpc_app.contrib.prometheus.PrometheusObserver"],
    }
    assert len(observe.observers()) == 2
    call([req("subtract", [2, 1], id=1), req("nope", id=2)])
    assert [s.name for s in exporter.get_finished_spans()] == ["subtract", "jsonrpc"]
    samples = scrape(registry)
    assert value(samples, "jsonrpc_calls_total", method="subtract") == 1
    assert value(samples, "jsonrpc_errors_total", method="<unknown>", code="-32601") == 1
