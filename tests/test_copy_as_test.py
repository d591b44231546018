"""
"Copy as test" on a logged call's admin page: the pytest test it writes
replays the call and passes (run here in-process and by a real pytest run
with the plugin), fails when the answer changes, and skips, saying why,
where the log holds redacted or truncated values.
"""

import html
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from jsonrpc_app.admin.copy_test import replay_test_source
from jsonrpc_app.models import Call
from jsonrpc_app.test import RpcClient

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db


def logged(body, client=None):
    """Send ``body`` to the endpoint; return the Call rows it logged, in order."""
    before = set(Call.objects.values_list("pk", flat=True))
    RpcClient(client or Client()).raw(body)
    return list(Call.objects.exclude(pk__in=before).order_by("position"))


def one(method, params=None, id=1, client=None):
    request = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        request["params"] = params
    if id is None:
        del request["id"]
    (call,) = logged(request, client)
    return call


def run_source(source, client=None, **fixtures):
    """Run the one test of ``source`` in this process, with ``rpc`` over a fresh client."""
    namespace = {}
    exec(compile(source, "<copied test>", "exec"), namespace)
    (test,) = [f for name, f in namespace.items() if name.startswith("test_")]
    rpc = RpcClient(client or Client())
    test(rpc=rpc, **fixtures)
    return rpc


def test_a_result_is_replayed_and_asserted():
    source = replay_test_source(one("subtract", [42, 23]))
    assert "result = rpc.call('subtract', 42, 23)" in source
    assert "assert result == 19" in source
    run_source(source)


def test_params_by_name_are_keyword_arguments():
    source = replay_test_source(one("subtract", {"minuend": 10, "subtrahend": 4}))
    assert "rpc.call('subtract', minuend=10, subtrahend=4)" in source
    run_source(source)


def test_the_copied_test_fails_when_the_answer_changes():
    call = one("get_data")
    call.result = ["hello", 6]
    with pytest.raises(AssertionError):
        run_source(replay_test_source(call))


def test_an_error_is_expected_with_pytest_raises_and_its_code():
    source = replay_test_source(one("shop.reserve", {"sku": "X1"}))
    assert "with pytest.raises(JsonRpcError) as raised:" in source
    assert "assert raised.value.code == -32010" in source
    assert "assert raised.value.data == {'sku': 'X1', 'available': 0}" in source
    run_source(source)


def test_an_internal_error_asserts_its_code_not_its_traceback(settings):
    settings.JSONRPC = {**settings.JSONRPC, "EXPOSE_EXCEPTIONS": True}
    source = replay_test_source(one("testapp.boom"))
    assert "assert raised.value.code == -32603" in source
    assert "traceback" in source and "secret internals" not in source
    run_source(source)


def test_a_notification_is_replayed_with_notify():
    source = replay_test_source(one("update", [1, 2], id=None))
    assert "rpc.notify('update', 1, 2)" in source
    run_source(source)


def test_an_invalid_request_is_replayed_raw():
    (call,) = logged([{"jsonrpc": "2.0", "method": 1, "id": 5}])
    source = replay_test_source(call)
    # The element as logged (PostgreSQL's jsonb keeps its keys in an order of its own).
    (line,) = [line for line in source.splitlines() if "rpc.raw(" in line]
    assert eval(line.split("rpc.raw(", 1)[1][:-1]) == {"jsonrpc": "2.0", "method": 1, "id": 5}
    assert 'assert answer["error"]["code"] == -32600' in source
    run_source(source)


def test_a_call_by_a_user_logs_in_a_user_of_that_name(alice, django_user_model):
    client = Client()
    client.force_login(alice)
    source = replay_test_source(one("testapp.private", {"note": "n"}, client=client))
    assert "django_user_model.objects.create_user('alice')" in source
    alice.delete()  # the copied test creates its own
    run_source(source, django_user_model=django_user_model)


def test_redacted_params_make_a_test_that_skips_and_says_so():
    source = replay_test_source(one("testapp.set_pin", {"account": "A1", "pin": "1234"}))
    assert "1234" not in source
    assert "pytest.skip(" in source and "redacted as sensitive" in source
    with pytest.raises(pytest.skip.Exception, match="redacted"):
        run_source(source)


def test_a_redacted_result_makes_a_test_that_skips():
    source = replay_test_source(one("testapp.login", ["bob", "pw"]))
    assert "the result hold values redacted" in source or "the params hold values redacted" in source
    with pytest.raises(pytest.skip.Exception):
        run_source(source)


def test_a_truncated_result_makes_a_test_that_skips(settings):
    settings.JSONRPC = {**settings.JSONRPC, "LOG_MAX_VALUE_BYTES": 64}
    source = replay_test_source(one("testapp.big", [500]))
    assert "truncated in the call log" in source
    with pytest.raises(pytest.skip.Exception, match="truncated"):
        run_source(source)


def test_keys_that_are_not_identifiers_are_passed_as_a_mapping():
    call = one("echo", {"value": 1})
    call.params = {"not-an-identifier": 1, "class": 2}
    source = replay_test_source(call)
    assert "rpc.call('echo', **{'not-an-identifier': 1, 'class': 2})" in source
    compile(source, "<copied test>", "exec")


def test_large_values_make_valid_python():
    values = [{"name": "item %d" % i, "tags": ["a", "b"], "price": i * 1.5} for i in range(30)]
    source = replay_test_source(one("echo", [values]))
    assert source.count("\n") > 20
    run_source(source)


def test_the_call_page_shows_the_test_and_a_copy_button(admin_client):
    call = one("subtract", [42, 23])
    page = admin_client.get("/admin/jsonrpc_app/call/%s/change/" % call.pk)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="copy-as-test-button"' in text and 'data-copy-target="copy-as-test-source"' in text
    assert html.escape(replay_test_source(call), quote=False) in text.replace("&#x27;", "'").replace("&quot;", '"')


@pytest.mark.slow
def test_copied_tests_pass_when_pytest_runs_them_with_the_plugin(tmp_path, alice):
    client = Client()
    client.force_login(alice)
    calls = [
        one("subtract", [42, 23]),
        one("shop.reserve", {"sku": "X2", "quantity": 2}),
        one("shop.reserve", {"sku": "X1"}),
        one("update", [1], id=None),
        one("testapp.private", {"note": "n"}, client=client),
        one("testapp.set_pin", ["A1", "1234"]),
    ]
    for call in calls:
        (tmp_path / ("test_copied_%s.py" % call.pk)).write_text(replay_test_source(call))
    # SQLite in the child: a DATABASE_URL shared with this run would make both use one test database.
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(PYTHONPATH=str(ROOT), JSONRPC_SPOOL_DIR=str(tmp_path / "spool"))
    run = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
            "-p", "jsonrpc_app.pytest_plugin", "--ds", "tests.settings", str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "5 passed, 1 skipped" in run.stdout, run.stdout
    assert "redacted as sensitive" in run.stdout
