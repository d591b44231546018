import json
from importlib.metadata import entry_points

import pytest

# The rpc/async_rpc fixtures of jsonrpc_app.pytest_plugin: loaded by its pytest11
# entry point where the package is installed, by name here where it is not.
if not any(ep.value == "jsonrpc_app.pytest_plugin" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["jsonrpc_app.pytest_plugin"]


@pytest.fixture(autouse=True)
def _spool_per_test(settings, tmp_path, monkeypatch):
    """
    Give each test its own call-log spool, replayed inline (no background
    thread), and its own journal directory.

    The tests write the log at once (LOG_WRITER "request") unless they ask
    for another writer: most of them read the rows right after the call.
    tests/test_journal.py tests the journal, the library's default, and that
    it stores the same rows.
    """
    from jsonrpc_app import conf

    # The settings' defaults for the tests (conf.DEFAULTS itself stays as written).
    monkeypatch.setattr(conf.jsonrpc_settings, "defaults", {
        **conf.DEFAULTS,
        "LOG_WRITER": "request",
        "LOG_JOURNAL_DIR": str(tmp_path / "jsonrpc-journal"),
        "LOG_LOADER": "command",
    })
    conf.jsonrpc_settings.reload()
    settings.JSONRPC = {
        **getattr(settings, "JSONRPC", {}),
        "SPOOL_DIR": str(tmp_path / "jsonrpc-spool"),
        "SPOOL_FLUSH_INTERVAL": None,
    }
    yield
    # A test that started the call log's writer thread or the spool's
    # background flush thread must not leave them running: the writer would
    # write into the next test's database, the flusher replay the next
    # test's spool from under it. The writer first: it may spool.
    from jsonrpc_app.log import journal, loader, store, writer

    assert writer.stop(timeout=30), "the call log writer thread did not stop"
    store.stop_flusher()
    # Nor its outage: a failed write keeps the next ones off that database for
    # SPOOL_RETRY_DELAY, and only the outage's first failure is logged at ERROR.
    outage = store._current()
    outage.retry_at.clear()
    outage.failing.clear()
    outage.pending = None
    assert loader.stop(timeout=30), "the call log loader thread did not stop"
    journal.close()
    monkeypatch.undo()
    conf.jsonrpc_settings.reload()


# The endpoints every test through the rpc/call fixtures runs against: the
# sync view (WSGI) and the async one (ASGI; the test client awaits it).
ENDPOINTS = {"sync": "/rpc/", "async": "/rpc-async/"}


@pytest.fixture(params=list(ENDPOINTS))
def endpoint(request):
    """The path of the endpoint under test: each test using it runs once per endpoint of ENDPOINTS."""
    return ENDPOINTS[request.param]


@pytest.fixture
def rpc(client, endpoint):
    """POST a body (bytes, str, or anything JSON-able) to the endpoint under test and return the response."""

    def post(body, content_type="application/json", **extra):
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        return client.generic("POST", endpoint, body, content_type=content_type, **extra)

    return post


@pytest.fixture
def call(rpc):
    """POST a body and return the decoded JSON answer (None for 204)."""

    def post(body, **extra):
        response = rpc(body, **extra)
        assert response.status_code in (200, 204), response.status_code
        if response.status_code == 204:
            assert response.content == b""
            return None
        assert response["Content-Type"] == "application/json"
        return json.loads(response.content)

    return post


@pytest.fixture(params=["sync", "async"])
def secure_view(request, settings):
    """
    Serve tests/security_urls.py's endpoints by each view in turn: the modules
    that use them (pytest.mark.urls("tests.security_urls") and this fixture)
    run once against JsonRpcView and once against AsyncJsonRpcView, same paths.
    """
    if request.param == "async":
        settings.ROOT_URLCONF = "tests.security_urls_async"
    return request.param


@pytest.fixture
def fresh_security_endpoints():
    """Start and end with an empty cache (the throttles' history) and tests.security_urls.RUNS at zero."""
    from django.core.cache import cache

    from tests.security_urls import RUNS

    cache.clear()
    RUNS["count"] = 0
    yield
    cache.clear()


@pytest.fixture
def alice(db):
    from django.contrib.auth.models import User

    return User.objects.create_user("alice", "alice@example.com", "alice-pw")
