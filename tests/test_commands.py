"""jsonrpc_methods and jsonrpc_call: what they print, their exit status, the call log."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from jsonrpc_app.models import Envelope
from jsonrpc_app.registry import MethodRegistry

ROOT = Path(__file__).resolve().parent.parent


def run(name, *args):
    """Run a command; return (stdout, exit status)."""
    out = io.StringIO()
    try:
        call_command(name, *args, stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return out.getvalue(), exc.returncode
    return out.getvalue(), 0


def answer(out):
    return json.loads(out)


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", password="pw")


# -- jsonrpc_methods ------------------------------------------------------------------


def test_methods_lists_each_method_with_its_client_signature_and_first_doc_line():
    out, status = run("jsonrpc_methods")
    assert status == 0
    lines = out.splitlines()
    i = lines.index("subtract(minuend: int, subtrahend: int) -> int")
    assert lines[i + 1] == "    Return minuend minus subtrahend."


def test_methods_leave_out_the_callcontext_parameter():
    out, _ = run("jsonrpc_methods")
    assert "testapp.private(note='')" in out.splitlines()
    assert "context" not in out


def test_methods_leave_out_hidden_methods_unless_all():
    out, _ = run("jsonrpc_methods")
    assert "rpc.discover" not in out
    out, _ = run("jsonrpc_methods", "--all")
    assert "rpc.discover() -> dict  [hidden]" in out.splitlines()


def test_methods_json_prints_the_openrpc_document_with_the_listed_methods():
    out, status = run("jsonrpc_methods", "--json")
    assert status == 0
    document = json.loads(out)
    names = [m["name"] for m in document["methods"]]
    assert document["openrpc"].startswith("1.")
    assert "subtract" in names and "testapp.private" in names
    assert "rpc.discover" not in names


def test_methods_endpoint_picks_the_registry_by_name():
    other = MethodRegistry("cmd-tests-other")
    other.register(lambda a, b=2: a, name="only.here")
    out, _ = run("jsonrpc_methods", "--endpoint", "cmd-tests-other")
    assert out.splitlines() == ["only.here(a, b=2)"]


def test_methods_unknown_endpoint_is_an_error_naming_the_known_ones():
    with pytest.raises(CommandError) as info:
        call_command("jsonrpc_methods", "--endpoint", "nope", stdout=io.StringIO())
    assert info.value.returncode == 2
    assert "'nope'" in str(info.value) and "default" in str(info.value)


# -- jsonrpc_call ---------------------------------------------------------------------


@pytest.mark.django_db
def test_call_with_params_by_position_prints_the_response_indented():
    out, status = run("jsonrpc_call", "subtract", "[42, 23]")
    assert status == 0
    assert answer(out) == {"jsonrpc": "2.0", "result": 19, "id": 1}
    assert out.startswith('{\n  "jsonrpc"')


@pytest.mark.django_db
def test_call_with_params_by_name_and_an_id():
    out, status = run("jsonrpc_call", "subtract", '{"subtrahend": 23, "minuend": 42}', "--id", "abc")
    assert status == 0
    assert answer(out) == {"jsonrpc": "2.0", "result": 19, "id": "abc"}


@pytest.mark.django_db
def test_call_answered_with_an_error_exits_1_with_the_error_printed():
    out, status = run("jsonrpc_call", "subtract", '["a", 1]')
    assert status == 1
    assert answer(out)["error"]["code"] == -32602


def test_call_with_params_that_are_not_json_exits_2():
    with pytest.raises(CommandError) as info:
        call_command("jsonrpc_call", "subtract", "[42,", stdout=io.StringIO())
    assert info.value.returncode == 2
    assert "PARAMS_JSON is not valid JSON" in str(info.value)


def test_call_with_params_that_are_a_scalar_exits_2():
    _, status = run("jsonrpc_call", "subtract", "42")
    assert status == 2


@pytest.mark.django_db
def test_call_as_an_unknown_user_exits_2():
    with pytest.raises(CommandError) as info:
        call_command("jsonrpc_call", "subtract", "[1, 1]", "--user", "nobody", stdout=io.StringIO())
    assert info.value.returncode == 2
    assert "'nobody'" in str(info.value)


@pytest.mark.django_db
def test_call_of_a_login_required_method_is_refused_to_anonymous():
    out, status = run("jsonrpc_call", "testapp.private")
    assert status == 1
    assert answer(out)["error"] == {"code": -32001, "message": "Authentication required"}


def test_call_of_a_login_required_method_answers_the_named_user(alice):
    out, status = run("jsonrpc_call", "testapp.private", '{"note": "hi"}', "--user", "alice")
    assert status == 0
    assert answer(out)["result"] == {"user": "alice", "note": "hi"}


@pytest.mark.django_db
def test_call_batch_from_a_file(tmp_path):
    body = tmp_path / "body.json"
    body.write_text(json.dumps([
        {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": 1},
        {"jsonrpc": "2.0", "method": "subtract", "params": [9, 3], "id": 2},
    ]))
    out, status = run("jsonrpc_call", "--batch", str(body))
    assert status == 0
    assert [r["result"] for r in answer(out)] == [2, 6]


@pytest.mark.django_db
def test_call_batch_with_one_error_exits_1(tmp_path):
    body = tmp_path / "body.json"
    body.write_text(json.dumps([
        {"jsonrpc": "2.0", "method": "subtract", "params": [5, 3], "id": 1},
        {"jsonrpc": "2.0", "method": "no.such.method", "id": 2},
    ]))
    out, status = run("jsonrpc_call", "--batch", str(body))
    assert status == 1
    assert answer(out)[1]["error"]["code"] == -32601


@pytest.mark.django_db
def test_call_batch_from_stdin(monkeypatch):
    body = b'{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 7}'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(body)))
    out, status = run("jsonrpc_call", "--batch", "-")
    assert status == 0
    assert answer(out) == {"jsonrpc": "2.0", "result": 19, "id": 7}


@pytest.mark.django_db
def test_call_of_notifications_only_prints_nothing_and_exits_0(tmp_path):
    body = tmp_path / "body.json"
    body.write_text('[{"jsonrpc": "2.0", "method": "subtract", "params": [1, 1]}]')
    out, status = run("jsonrpc_call", "--batch", str(body))
    assert (out, status) == ("", 0)


def test_call_with_both_method_and_batch_exits_2(tmp_path):
    _, status = run("jsonrpc_call", "subtract", "--batch", str(tmp_path / "x.json"))
    assert status == 2


def test_call_is_logged_with_the_command_line_source_and_the_user(alice):
    run("jsonrpc_call", "testapp.private", "--user", "alice")
    envelope = Envelope.objects.get()
    assert envelope.source == "cli"
    assert envelope.user_id == alice.pk and envelope.username == "alice"
    assert envelope.calls.get().method == "testapp.private"


@pytest.mark.django_db
def test_call_with_no_log_logs_nothing():
    out, status = run("jsonrpc_call", "subtract", "[2, 1]", "--no-log")
    assert status == 0
    assert not Envelope.objects.exists()


def test_call_endpoint_calls_the_registry_of_that_name():
    other = MethodRegistry("cmd-tests-call")
    other.register(lambda: "other", name="who")
    out, status = run("jsonrpc_call", "who", "--endpoint", "cmd-tests-call", "--no-log")
    assert (answer(out)["result"], status) == ("other", 0)


def _manage(*args):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings"}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_manage_py_exit_statuses_bad_params_2_and_error_1():
    bad = _manage("jsonrpc_call", "subtract", "not json")
    assert bad.returncode == 2, bad.stderr
    assert "PARAMS_JSON is not valid JSON" in bad.stderr
    missing = _manage("jsonrpc_call", "no.such.method", "--no-log")
    assert missing.returncode == 1, missing.stderr
    assert json.loads(missing.stdout)["error"]["code"] == -32601
