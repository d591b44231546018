"""
Hard limits against hostile input: body size (MAX_BODY_SIZE and Django's
DATA_UPLOAD_MAX_MEMORY_SIZE, answered before reading where Content-Length
says so, and a bounded read whatever the headers say), batch length and
nesting depth. Each is answered with one JSON-RPC error, "id": null.

Requests that need a stream the test client cannot give (no Content-Length,
a lying one, a body that never ends) go through Django's real WSGI request
and handler stack with a hand-made ``wsgi.input``, and through Django's real
ASGI handler with hand-made ``http.request`` messages.
"""

import asyncio
import json
import time
import tracemalloc

import pytest
from django.core.asgi import get_asgi_application
from django.test import RequestFactory
from django.test.client import ClientHandler

from jsonrpc_app.models import Envelope
from tests.security_urls import RUNS

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.urls("tests.security_urls"),
    pytest.mark.usefixtures("secure_view"),
    pytest.mark.usefixtures("fresh_security_endpoints"),
]

LIMIT = 1024 * 1024


class Stream:
    """A wsgi.input that counts what is read from it; ``size=None`` never ends."""

    def __init__(self, data=b"", size=None, fill=b" "):
        self.data = data
        self.size = size
        self.fill = fill
        self.read_bytes = 0

    def read(self, size=-1):
        if size is None or size < 0:
            if self.size is None:
                raise AssertionError("unbounded read of a body that never ends")
            size = self.size
        if self.size is not None:
            size = min(size, self.size - self.read_bytes)
        start = self.read_bytes
        chunk = self.data[start : start + size]
        if len(chunk) < size and (self.size is None or start + size > len(self.data)):
            chunk += self.fill * (size - len(chunk))
        self.read_bytes += len(chunk)
        return chunk

    def readline(self, size=-1):
        return self.read(size)


def wsgi_post(path, stream, content_length=None, **environ):
    """POST through Django's request handler (middleware, URLs, view) with ``stream`` as body."""
    extra = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "CONTENT_TYPE": "application/json",
        "wsgi.input": stream,
        **environ,
    }
    if content_length is not None:
        extra["CONTENT_LENGTH"] = str(content_length)
    base = RequestFactory()._base_environ(**extra)
    if content_length is None:
        base.pop("CONTENT_LENGTH", None)
    response = ClientHandler()(base)
    assert response.status_code in (200, 204), response.status_code
    return json.loads(response.content) if response.content else None


def body_of(obj):
    return json.dumps(obj).encode()


def too_large(answer, limit=LIMIT):
    assert answer["id"] is None
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"] == "Invalid Request"
    assert "over the limit of %d" % limit in answer["error"]["data"]
    return True


ECHO = body_of({"jsonrpc": "2.0", "method": "public.echo", "params": ["hi"], "id": 1})


# --- body size ------------------------------------------------------------------------


def test_body_over_the_limit_is_answered_without_reading_it():
    stream = Stream(ECHO, size=LIMIT + 1)
    answer = wsgi_post("/secure/", stream, content_length=LIMIT + 1)
    assert too_large(answer)
    assert "request body of %d bytes" % (LIMIT + 1) in answer["error"]["data"]
    assert stream.read_bytes == 0


def test_body_of_exactly_the_limit_is_read_and_answered(client):
    body = ECHO + b" " * (LIMIT - len(ECHO))
    response = client.generic("POST", "/secure/", body, content_type="application/json")
    assert json.loads(response.content)["result"] == "hi"


def test_body_one_byte_over_the_limit_through_the_test_client(client):
    body = ECHO + b" " * (LIMIT + 1 - len(ECHO))
    answer = json.loads(client.generic("POST", "/secure/", body, content_type="application/json").content)
    assert too_large(answer)
    envelope = Envelope.objects.get()
    assert envelope.error_code == -32600
    assert envelope.request_body == ""


def test_data_upload_max_memory_size_is_respected_when_smaller(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = ECHO + b" " * (1001 - len(ECHO))
    answer = json.loads(client.generic("POST", "/secure/", body, content_type="application/json").content)
    assert too_large(answer, 1000)


def test_max_body_size_setting_lowers_the_limit(client, settings):
    settings.JSONRPC = {"MAX_BODY_SIZE": 100}
    answer = json.loads(client.generic("POST", "/secure/", ECHO + b" " * 100, content_type="application/json").content)
    assert too_large(answer, 100)
    answer = json.loads(client.generic("POST", "/secure/", ECHO, content_type="application/json").content)
    assert answer["result"] == "hi"


def test_both_limits_off_reads_any_body(client, settings):
    settings.JSONRPC = {"MAX_BODY_SIZE": None}
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None
    body = ECHO + b" " * (3 * LIMIT)
    answer = json.loads(client.generic("POST", "/secure/", body, content_type="application/json").content)
    assert answer["result"] == "hi"


def test_content_length_smaller_than_the_body_reads_only_that_many_bytes():
    stream = Stream(ECHO, size=LIMIT * 10)
    answer = wsgi_post("/secure/", stream, content_length=10)
    assert answer == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": None}
    assert stream.read_bytes == 10


def test_content_length_that_is_not_a_number_reads_nothing():
    stream = Stream(ECHO, size=len(ECHO))
    answer = wsgi_post("/secure/", stream, content_length="12abc")
    assert answer["error"]["code"] == -32700
    assert stream.read_bytes == 0


def test_missing_content_length_reads_nothing_from_a_server_that_does_not_terminate_input():
    # wsgiref (runserver) hands over the raw socket: without a length there is no body.
    stream = Stream(ECHO, size=None)
    answer = wsgi_post("/secure/", stream, content_length=None)
    assert answer["error"]["code"] == -32700
    assert stream.read_bytes == 0


def test_chunked_body_from_a_server_that_terminates_input_is_read():
    # gunicorn de-chunks the body, sets no CONTENT_LENGTH and wsgi.input_terminated.
    stream = Stream(ECHO, size=len(ECHO))
    answer = wsgi_post(
        "/secure/", stream, content_length=None, **{"wsgi.input_terminated": True, "HTTP_TRANSFER_ENCODING": "chunked"}
    )
    assert answer["result"] == "hi"


def test_chunked_body_that_never_ends_is_cut_at_the_limit():
    stream = Stream(b"[", size=None)
    tracemalloc.start()
    try:
        answer = wsgi_post("/secure/", stream, content_length=None, **{"wsgi.input_terminated": True})
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert too_large(answer)
    assert stream.read_bytes == LIMIT + 1
    # Holding the limit once (plus the last chunk) and not more.
    assert peak < 3 * LIMIT


def asgi_post(path, chunks, headers=()):
    """POST through Django's real ASGI handler; return (status, body)."""
    app = get_asgi_application()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    messages = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent = []

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return status, body


@pytest.mark.django_db(transaction=True)
def test_asgi_chunked_body_without_content_length_is_bounded(settings):
    settings.JSONRPC = {"LOG_POLICY": "none"}
    status, body = asgi_post("/secure/", [b" " * 65536] * 17)
    assert status == 200
    assert too_large(json.loads(body))
    status, body = asgi_post("/secure/", [ECHO[:10], ECHO[10:]])
    assert json.loads(body)["result"] == "hi"


@pytest.mark.django_db(transaction=True)
def test_asgi_body_longer_than_its_content_length_is_bounded(settings):
    settings.JSONRPC = {"LOG_POLICY": "none"}
    status, body = asgi_post("/secure/", [b" " * 65536] * 17, headers=[(b"content-length", b"10")])
    assert too_large(json.loads(body))


# --- batch length ---------------------------------------------------------------------


def notifications(n, method="secure.count"):
    return body_of([{"jsonrpc": "2.0", "method": method} for _ in range(n)])


def test_batch_over_the_limit_is_one_invalid_request_naming_the_limit(client):
    response = client.generic("POST", "/secure/", notifications(1001), content_type="application/json")
    assert json.loads(response.content) == {
        "jsonrpc": "2.0",
        "error": {
            "code": -32600,
            "message": "Invalid Request",
            "data": "batch of 1001 calls is over the limit of 1000",
        },
        "id": None,
    }
    assert RUNS["count"] == 0


def test_batch_at_the_limit_runs(client):
    response = client.generic("POST", "/secure/", notifications(1000), content_type="application/json")
    assert response.status_code == 204
    assert RUNS["count"] == 1000


def test_max_batch_size_setting(client, settings):
    settings.JSONRPC = {"MAX_BATCH_SIZE": 2}
    response = client.generic("POST", "/secure/", notifications(3), content_type="application/json")
    assert json.loads(response.content)["error"]["data"] == "batch of 3 calls is over the limit of 2"
    assert RUNS["count"] == 0


# --- nesting depth --------------------------------------------------------------------


def nested(levels):
    value = "core"
    for _ in range(levels):
        value = [value]
    return value


def echo_nested(levels):
    # The request object is level 1 and params level 2: the value adds ``levels``.
    return body_of({"jsonrpc": "2.0", "method": "public.echo", "params": [nested(levels)], "id": 1})


def test_json_nested_exactly_max_depth_is_answered(client):
    response = client.generic("POST", "/secure/", echo_nested(62), content_type="application/json")
    assert json.loads(response.content)["result"] == nested(62)


def test_json_nested_one_level_deeper_than_max_depth_is_refused(client):
    response = client.generic("POST", "/secure/", echo_nested(63), content_type="application/json")
    assert json.loads(response.content) == {
        "jsonrpc": "2.0",
        "error": {"code": -32600, "message": "Invalid Request", "data": "JSON nested deeper than 64 levels"},
        "id": None,
    }


def test_max_depth_setting(client, settings):
    settings.JSONRPC = {"MAX_DEPTH": 3}
    response = client.generic("POST", "/secure/", echo_nested(2), content_type="application/json")
    assert json.loads(response.content)["error"]["data"] == "JSON nested deeper than 3 levels"
    response = client.generic("POST", "/secure/", echo_nested(1), content_type="application/json")
    assert json.loads(response.content)["result"] == ["core"]


def test_objects_count_as_levels_too(client):
    # params is the object of level 2; 64 objects in all make 65 levels.
    value = "core"
    for _ in range(64):
        value = {"k": value}
    body = body_of({"jsonrpc": "2.0", "method": "public.echo", "params": value, "id": 1})
    answer = json.loads(client.generic("POST", "/secure/", body, content_type="application/json").content)
    assert answer["error"]["data"] == "JSON nested deeper than 64 levels"


def test_nesting_too_deep_for_any_decoder_is_a_parse_error_not_a_crash(client):
    for depth in (1_000, 100_000, LIMIT // 2):
        body = b"[" * depth + b"]" * depth
        answer = json.loads(client.generic("POST", "/secure/", body, content_type="application/json").content)
        assert answer["id"] is None
        assert answer["error"]["code"] in (-32700, -32600)
    assert json.loads(client.generic("POST", "/secure/", ECHO, content_type="application/json").content)["result"] == "hi"


# --- a real server: gunicorn de-chunks bodies and terminates its input ---------------


@pytest.fixture(scope="module")
def gunicorn_server(tmp_path_factory):
    """gunicorn serving the test project on a free port, with its own migrated SQLite file."""
    import os
    import re
    import subprocess
    import sys
    import time

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    db = tmp_path_factory.mktemp("gunicorn") / "db.sqlite3"
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL="sqlite:///%s" % db,
        JSONRPC_JOURNAL_DIR=str(db.parent / "journal"),
        PYTHONPATH=root,
    )
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=root, env=env, check=True
    )
    log = tmp_path_factory.mktemp("gunicorn-log") / "err.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [
                os.path.join(os.path.dirname(sys.executable), "gunicorn"),
                "-b", "127.0.0.1:0", "-w", "1", "--timeout", "30",
                "project.wsgi:application",
            ],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        port = None
        for _ in range(200):  # up to 20 s to start
            match = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", log.read_text())
            if match:
                port = int(match.group(1))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        assert port, log.read_text()
        yield port, db
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def chunked_post(port, chunks, path="/rpc/"):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        try:
            conn.request(
                "POST", path, body=iter(chunks), encode_chunked=True,
                headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
            )
        except BrokenPipeError:
            # The server answered a body over the limit and closed before the
            # client had sent it all (a race a loaded machine wins): its answer
            # is in the socket already, and is what the test reads.
            pass
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.slow
def test_gunicorn_chunked_body_is_read_answered_and_logged(gunicorn_server):
    import sqlite3

    port, db = gunicorn_server
    body = b'{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"chunked"}'
    status, content = chunked_post(port, [body[:7], body[7:30], body[30:]])
    assert status == 200
    assert json.loads(content) == {"jsonrpc": "2.0", "result": 19, "id": "chunked"}
    # The demo's default writer is the journal: the worker's loader thread
    # writes the row within its interval (0.2 s), off the request.
    deadline = time.monotonic() + 20
    while True:
        with sqlite3.connect(db) as conn:
            stored = [row[0] for row in conn.execute("SELECT request_body FROM jsonrpc_app_envelope")]
        if body.decode() in stored or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert body.decode() in stored


@pytest.mark.slow
def test_gunicorn_chunked_body_over_the_limit_is_cut_off(gunicorn_server):
    port, _db = gunicorn_server
    status, content = chunked_post(port, [b" " * 65536] * 20)
    assert status == 200
    assert too_large(json.loads(content))


# --- system check of the limit settings ------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, "1000", 1.5, True])
@pytest.mark.parametrize("key", ["MAX_BODY_SIZE", "MAX_BATCH_SIZE", "MAX_DEPTH"])
def test_a_limit_that_is_not_a_positive_integer_is_a_check_error(settings, key, value):
    from jsonrpc_app.checks import check_security_settings

    settings.JSONRPC = {key: value}
    errors = check_security_settings()
    assert [(e.id, e.obj) for e in errors] == [("jsonrpc_app.E005", key)]
    assert repr(value) in errors[0].msg


@pytest.mark.parametrize("value", [None, 1, 10**9])
def test_a_limit_may_be_a_positive_integer_or_none(settings, value):
    from jsonrpc_app.checks import check_security_settings

    settings.JSONRPC = {"MAX_BODY_SIZE": value, "MAX_BATCH_SIZE": value, "MAX_DEPTH": value}
    assert check_security_settings() == []
