"""
jsonrpc_app.test.RpcClient and the pytest plugin's rpc / async_rpc fixtures:
results, the error classes raised, notifications, batches, raw bodies, the
async client, and the plugin loaded the way a project loads it.
"""

import decimal
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client

from examples.rpc_methods import OutOfStock
from jsonrpc_app import (
    AuthenticationRequired,
    InternalError,
    InvalidParams,
    InvalidRequest,
    JsonRpcError,
    MethodNotFound,
    ParseError,
)
from jsonrpc_app.models import Call, Envelope
from jsonrpc_app.pytest_plugin import async_rpc, rpc  # noqa: F401 - over tests/conftest.py's rpc
from jsonrpc_app.test import BUILTIN_ERRORS, RpcClient, UnexpectedResponse

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db


# -- call ------------------------------------------------------------------------------


def test_call_returns_the_result_by_position_and_by_name(rpc):
    assert rpc.call("subtract", 42, 23) == 19
    assert rpc.call("subtract", minuend=10, subtrahend=4) == 6
    assert rpc.call("get_data") == ["hello", 5]
    assert rpc.last_response.status_code == 200


def test_call_goes_through_the_endpoint_and_is_logged(rpc):
    rpc.call("subtract", 42, 23)
    call = Call.objects.get()
    assert (call.method, call.params, call.result, call.source) == ("subtract", [42, 23], 19, "http")


def test_call_sends_no_params_member_without_arguments(rpc):
    rpc.call("echo")
    assert Envelope.objects.get().request_body == '{"jsonrpc":"2.0","method":"echo","id":1}'


def test_values_json_lacks_are_sent_as_django_writes_them(rpc):
    assert rpc.call("echo", decimal.Decimal("1.10")) == "1.10"


def test_unknown_method_raises_method_not_found(rpc):
    with pytest.raises(MethodNotFound) as raised:
        rpc.call("no.such.method")
    assert raised.value.code == -32601
    assert raised.value.message == "Method not found"


def test_bad_params_raise_invalid_params_with_the_data_answered(rpc):
    with pytest.raises(InvalidParams) as raised:
        rpc.call("subtract", 1)
    assert raised.value.code == -32602
    assert raised.value.data is not None
    assert raised.value.response["id"] == 1


def test_an_exception_in_a_method_raises_internal_error_without_its_text(rpc):
    with pytest.raises(InternalError) as raised:
        rpc.call("testapp.boom")
    assert "secret" not in repr(raised.value)


def test_an_error_the_method_declares_is_raised_as_its_own_class(rpc):
    with pytest.raises(OutOfStock) as raised:
        rpc.call("shop.reserve", sku="X1")
    assert raised.value.code == -32010
    assert raised.value.data == {"sku": "X1", "available": 0}


def test_each_builtin_code_maps_to_its_class():
    assert {code: cls.__name__ for code, cls in BUILTIN_ERRORS.items()} == {
        -32700: "ParseError",
        -32600: "InvalidRequest",
        -32601: "MethodNotFound",
        -32602: "InvalidParams",
        -32603: "InternalError",
        -32001: "AuthenticationRequired",
        -32003: "PermissionDenied",
        -32004: "MethodDisabled",
        -32029: "Throttled",
    }


def test_error_classes_given_to_the_client_win_over_the_builtin_ones(client):
    class AppOutOfStock(JsonRpcError):
        code = -32001
        message = "Out of stock"

    # testapp.app_error answers -32001, the code of AuthenticationRequired.
    with pytest.raises(AuthenticationRequired):
        RpcClient(client).call("testapp.app_error")
    with pytest.raises(AppOutOfStock) as raised:
        RpcClient(client, error_classes=[AppOutOfStock]).call("testapp.app_error")
    assert raised.value.data == {"sku": "X1"}


def test_an_undeclared_application_code_raises_json_rpc_error(rpc):
    with pytest.raises(JsonRpcError) as raised:
        rpc.call("testapp.rollback")
    assert type(raised.value) is JsonRpcError
    assert (raised.value.code, raised.value.message) == (-32050, "rolled back")


def test_positional_and_named_params_together_are_refused_before_sending(rpc):
    with pytest.raises(TypeError, match="not both"):
        rpc.call("subtract", 1, subtrahend=2)
    assert rpc.last_response is None
    assert not Envelope.objects.exists()


def test_a_param_called_method_is_passed_by_name(rpc):
    assert rpc.call("echo", value={"method": "x"}) == {"method": "x"}


def test_login_through_the_wrapped_client(rpc, alice):
    with pytest.raises(AuthenticationRequired):
        rpc.call("testapp.private")
    rpc.client.force_login(alice)
    assert rpc.call("testapp.private", note="hi") == {"user": "alice", "note": "hi"}


def test_headers_are_sent_with_every_request(client):
    refused = RpcClient(client, headers={"Authorization": "Basic bm90OnZhbGlk"})
    with pytest.raises(AuthenticationRequired):
        refused.call("subtract", 1, 2)
    assert refused.last_response.status_code == 200


def test_a_path_that_is_no_endpoint_raises_unexpected_response(client):
    with pytest.raises(UnexpectedResponse) as raised:
        RpcClient(client, path="/no-endpoint-here/").call("subtract", 1, 2)
    assert raised.value.status_code == 404
    assert isinstance(raised.value, AssertionError)


def test_only_django_test_clients_are_wrapped():
    with pytest.raises(TypeError, match="django.test.Client"):
        RpcClient(object())


# -- notify --------------------------------------------------------------------------


def test_notify_returns_none_and_the_call_is_logged_as_a_notification(rpc):
    assert rpc.notify("update", 1, 2) is None
    assert rpc.last_response.status_code == 204
    call = Call.objects.get()
    assert call.is_notification and call.method == "update"


def test_notify_raises_when_the_endpoint_refuses_the_request(client):
    with pytest.raises(AuthenticationRequired):
        RpcClient(client, headers={"Authorization": "Basic bm90OnZhbGlk"}).notify("update")


# -- batch ---------------------------------------------------------------------------


def test_batch_sends_one_request_and_gives_each_call_its_answer(rpc):
    with rpc.batch() as batch:
        diff = batch.call("subtract", 42, 23)
        batch.notify("update", 1)
        missing = batch.call("no.such.method")
        data = batch.call("get_data")
        pending = diff
        with pytest.raises(RuntimeError, match="block ends"):
            pending.result  # noqa: B018
    assert Envelope.objects.get().call_count == 4
    assert (diff.ok, diff.result, diff.error) == (True, 19, None)
    assert data.result == ["hello", 5]
    assert not missing.ok
    assert isinstance(missing.error, MethodNotFound)
    with pytest.raises(MethodNotFound):
        missing.result  # noqa: B018
    with pytest.raises(MethodNotFound):
        batch.results  # noqa: B018


def test_batch_results_in_the_order_of_the_calls(rpc):
    with rpc.batch() as batch:
        for n in range(5):
            batch.call("subtract", n, 1)
    assert batch.results == [-1, 0, 1, 2, 3]


def test_batch_of_only_notifications_is_answered_204(rpc):
    with rpc.batch() as batch:
        batch.notify("update", 1)
        batch.notify("update", 2)
    assert rpc.last_response.status_code == 204
    assert Call.objects.count() == 2


def test_empty_batch_sends_nothing(rpc):
    with rpc.batch() as batch:
        pass
    assert batch.calls == [] and rpc.last_response is None


def test_batch_is_not_sent_when_its_block_raises(rpc):
    with pytest.raises(ZeroDivisionError):
        with rpc.batch() as batch:
            batch.call("subtract", 1, 2)
            1 / 0  # noqa: B018
    assert rpc.last_response is None
    assert not Envelope.objects.exists()


def test_batch_refused_as_a_whole_raises_when_the_block_ends(client):
    refused = RpcClient(client, headers={"Authorization": "Basic bm90OnZhbGlk"})
    with pytest.raises(AuthenticationRequired):
        with refused.batch() as batch:
            batch.call("subtract", 1, 2)


# -- raw -------------------------------------------------------------------------------


def test_raw_returns_the_decoded_answer(rpc):
    assert rpc.raw('{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": "a"}') == {
        "jsonrpc": "2.0",
        "result": 19,
        "id": "a",
    }
    assert rpc.raw([]) == {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": None}
    assert rpc.raw(b'{"jsonrpc": "2.0", "method": "update"}') is None
    assert rpc.last_response.status_code == 204


def test_a_body_that_is_not_json_raises_parse_error_through_call_paths(rpc):
    answer = rpc.raw(b"{not json")
    assert answer["error"]["code"] == -32700
    error = rpc._error_from(answer, None, rpc.last_response)
    assert isinstance(error, ParseError)


def test_raw_of_an_invalid_element_gives_the_invalid_request_error(rpc):
    answer = rpc.raw([1, {"jsonrpc": "2.0", "method": "subtract", "params": [3, 1], "id": 9}])
    assert answer[0]["error"]["code"] == InvalidRequest.code
    assert answer[1] == {"jsonrpc": "2.0", "result": 2, "id": 9}


# -- async -----------------------------------------------------------------------------


def test_async_client_calls_notifies_and_batches():
    rpc = RpcClient(AsyncClient())

    async def scenario():
        result = await rpc.acall("subtract", 42, 23)
        with pytest.raises(OutOfStock):
            await rpc.acall("shop.reserve", "X1")
        assert await rpc.anotify("update", 1) is None
        async with rpc.batch() as batch:
            first = batch.call("subtract", 1, 1)
            second = batch.call("nope")
        raw = await rpc.araw([])
        return result, first.result, second.error, raw

    result, first, second, raw = async_to_sync(scenario)()
    assert (result, first) == (19, 0)
    assert isinstance(second, MethodNotFound)
    assert raw["error"]["code"] == -32600
    assert Envelope.objects.count() == 5


def test_async_rpc_fixture_wraps_pytest_djangos_async_client(async_rpc, async_client):
    assert async_rpc.client is async_client and async_rpc.is_async
    assert async_to_sync(async_rpc.acall)("get_data") == ["hello", 5]


def test_sync_methods_refuse_an_async_client_and_the_other_way_round(rpc):
    with pytest.raises(TypeError, match="await rpc.araw"):
        RpcClient(AsyncClient()).call("subtract", 1, 2)
    with pytest.raises(TypeError, match="rpc.raw"):
        async_to_sync(rpc.acall)("subtract", 1, 2)


# -- the plugin ------------------------------------------------------------------------


def test_rpc_fixture_wraps_pytest_djangos_client(rpc, client):
    assert rpc.client is client and not rpc.is_async
    assert rpc.path == "/rpc/"
    assert isinstance(rpc.client, Client)


PROJECT_TESTS = '''
import pytest
from jsonrpc_app import MethodNotFound


def test_subtract(rpc):
    assert rpc.call("subtract", 42, 23) == 19


def test_unknown(rpc):
    with pytest.raises(MethodNotFound):
        rpc.call("nope")


def test_path(rpc):
    assert rpc.path == "%s"
'''


def _run_project_tests(tmp_path, ini, path_expected):
    (tmp_path / "test_project.py").write_text(PROJECT_TESTS % path_expected)
    (tmp_path / "pytest.ini").write_text(textwrap.dedent(ini))
    # SQLite in the child: a DATABASE_URL shared with this run would make both use one test database.
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(PYTHONPATH=str(ROOT), JSONRPC_SPOOL_DIR=str(tmp_path / "spool"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "jsonrpc_app.pytest_plugin"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_a_project_gets_the_rpc_fixture_from_the_plugin(tmp_path):
    run = _run_project_tests(
        tmp_path,
        """
        [pytest]
        DJANGO_SETTINGS_MODULE = project.settings
        """,
        "/rpc/",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout


@pytest.mark.slow
def test_the_jsonrpc_path_ini_option_sets_the_fixtures_path(tmp_path):
    run = _run_project_tests(
        tmp_path,
        """
        [pytest]
        DJANGO_SETTINGS_MODULE = project.settings
        jsonrpc_path = /elsewhere/
        """,
        "/elsewhere/",
    )
    # The path is taken; nothing is served there, so the calls fail as unexpected answers.
    assert "2 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert "UnexpectedResponse" in run.stdout


def test_loading_the_plugin_imports_no_django():
    # pytest loads it in every run where the package is installed, Django project or not.
    code = "import sys, jsonrpc_app.pytest_plugin; print(sorted(m for m in sys.modules if m.startswith(('django', 'jsonrpc_app.test'))))"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
