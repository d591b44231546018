"""The request bodies every target is timed on, and the answers they must give."""

import io
import json
import sys

BATCH = 100

TARGETS = {
    # name: (path, BENCH_LOG)
    "bare": ("/bare/", "0"),
    "bare-orjson": ("/bare-orjson/", "0"),
    "app": ("/rpc/", "0"),
    "app-log": ("/rpc/", "1"),
    "app-log-bg": ("/rpc/", "2"),
    "app-log-journal": ("/rpc/", "3"),
    "app-log-append": ("/rpc/", "4"),
    "app-log-idle": ("/rpc/", "4"),
    "modern-rpc": ("/modern-rpc/", "0"),
}
# Targets timed over HTTP only: in-process, app-log-idle is app-log-append.
HTTP_ONLY = {"app-log-idle"}
INPROCESS_TARGETS = {name: target for name, target in TARGETS.items() if name not in HTTP_ONLY}

# Served by uvicorn (bench.over_asgi), logging off.
ASGI_TARGETS = {
    "bare-async": ("/bare-async/", "0"),
    "app-async": ("/rpc-async/", "0"),
    "app-async-inline": ("/rpc-async-inline/", "0"),
    "modern-rpc-async": ("/modern-rpc-async/", "0"),
}

LABELS = {
    "bare-async": "bare async Django view (json)",
    "app-async": "jsonrpc_app AsyncJsonRpcView, logging off (sync methods in Django's sync thread)",
    "app-async-inline": "jsonrpc_app AsyncJsonRpcView, logging off, methods blocking=False (on the event loop)",
    "modern-rpc-async": "django-modern-rpc 2.1.0, async view",
    "bare": "bare Django view (json)",
    "bare-orjson": "bare Django view (orjson)",
    "app": "jsonrpc_app, logging off",
    "app-log": "jsonrpc_app, logging on, written on the request",
    "app-log-bg": "jsonrpc_app, logging on, background writer",
    "app-log-journal": "jsonrpc_app, logging on, journal (the default)",
    "app-log-append": "jsonrpc_app, logging on, journal, workers only append (loader command)",
    "app-log-idle": "jsonrpc_app, logging on, journal, workers append, jsonrpc_log_loader --nice 19 beside them",
    "modern-rpc": "django-modern-rpc 2.1.0",
}


def _subtract(i):
    return {"jsonrpc": "2.0", "method": "subtract", "params": [42 + i, 23], "id": i + 1}


def _describe(i):
    return {
        "jsonrpc": "2.0",
        "method": "describe",
        "params": {"name": "item %d" % i, "count": i, "ratio": 0.5, "active": True, "tags": ["a", "b"]},
        "id": i + 1,
    }


def _expected(call):
    p = call["params"]
    result = p[0] - p[1] if call["method"] == "subtract" else p["count"] + len(p["tags"])
    return {"jsonrpc": "2.0", "result": result, "id": call["id"]}


def _single(make):
    request = make(0)
    return json.dumps(request).encode(), _expected(request), 1


def _batch(make):
    requests = [make(i) for i in range(BATCH)]
    return json.dumps(requests).encode(), [_expected(r) for r in requests], BATCH


# name: (label, body, expected answer, calls per body)
WORKLOADS = {
    "single": ("single call", *_single(_subtract)),
    "batch": ("batch of %d, per call" % BATCH, *_batch(_subtract)),
    "typed": ("5 annotated params, single", *_single(_describe)),
    "typed-batch": ("5 annotated params, batch of %d, per call" % BATCH, *_batch(_describe)),
}


def wsgi_environ(body, path="/rpc/"):
    """The WSGI environ of a POST of ``body`` to ``path``, as gunicorn hands it to Django's WSGIHandler."""
    return {
        "REQUEST_METHOD": "POST", "PATH_INFO": path, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
        "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "127.0.0.1", "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr, "wsgi.version": (1, 0), "wsgi.multithread": False,
        "wsgi.multiprocess": False, "wsgi.run_once": False,
    }
