"""
The call log as written by jsonrpc_app.log: what is stored for each
envelope and call, the policy, redaction, truncation, the transaction it is
written in, what happens when it cannot be written, and LOG_DATABASE.
"""

import json
import uuid
import logging

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection, connections, router
from django.test.utils import CaptureQueriesContext

from jsonrpc_app.log import spool
from jsonrpc_app.log.redaction import REDACTED
from jsonrpc_app.log.rows import TRUNCATED_KEY
from jsonrpc_app.models import Call, Envelope, UsageRollup

pytestmark = pytest.mark.django_db


def req(method, params=None, id=None, notification=False):
    body = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    if not notification:
        body["id"] = id
    return body


@pytest.fixture
def jsonrpc(settings):
    """Set JSONRPC keys for one test: jsonrpc(LOG_POLICY="errors")."""

    def set_(**values):
        settings.JSONRPC = {**getattr(settings, "JSONRPC", {}), **values}

    return set_


def calls_of(envelope):
    return list(envelope.calls.order_by("position"))


# -- what is stored ----------------------------------------------------------


def test_batch_with_notification_and_error_logs_each_call_with_outcome_and_id_type(call, endpoint):
    answer = call([
        req("subtract", [42, 23], id="1"),
        req("notify_hello", [7], notification=True),
        req("testapp.app_error", id=1),
    ])
    assert [a["id"] for a in answer] == ["1", 1]
    envelope = Envelope.objects.get()
    assert envelope.is_batch
    assert (envelope.call_count, envelope.error_count) == (3, 1)
    assert envelope.http_status == 200
    assert envelope.source == "http"
    assert envelope.endpoint == endpoint
    assert envelope.methods == "subtract, notify_hello, testapp.app_error"
    ok, note, err = calls_of(envelope)
    assert (ok.position, ok.method, ok.outcome, ok.result, ok.params) == (0, "subtract", "ok", 19, [42, 23])
    assert ok.request_id == "1" and isinstance(ok.request_id, str)
    assert note.is_notification and note.request_id is None and note.outcome == "ok"
    assert err.outcome == "error" and err.request_id == 1 and isinstance(err.request_id, int)
    assert (err.error_code, err.error_message, err.error_data) == (-32001, "Out of stock", {"sku": "X1"})
    assert json.loads(envelope.response_body) == answer
    assert json.loads(envelope.request_body)[0]["method"] == "subtract"


def test_envelope_records_user_address_agent_and_duration(client, call):
    user = User.objects.create_user("ada", password="pw-long-enough-1")
    client.force_login(user)
    call(req("testapp.whoami", id=1), REMOTE_ADDR="10.1.2.3", HTTP_USER_AGENT="curl/8.0")
    envelope = Envelope.objects.get()
    assert (envelope.user_id, envelope.username) == (user.pk, "ada")
    assert envelope.remote_addr == "10.1.2.3"
    assert envelope.user_agent == "curl/8.0"
    assert envelope.duration_ms > 0
    (logged,) = calls_of(envelope)
    assert (logged.user_id, logged.username, logged.source) == (user.pk, "ada", "http")
    assert logged.created_at == envelope.created_at


def test_a_remote_address_that_is_not_an_ip_is_stored_as_null(call):
    call(req("subtract", [1, 1], id=1), REMOTE_ADDR="unix:/run/gunicorn.sock")
    assert Envelope.objects.get().remote_addr is None


def test_explicit_null_id_is_a_call_not_a_notification(call):
    call(req("subtract", [1, 1], id=None))
    (logged,) = Call.objects.all()
    assert logged.request_id is None and not logged.is_notification


def test_parse_error_is_logged_as_an_envelope_with_its_error(rpc):
    rpc(b'{"jsonrpc": "2.0", "method": "subtract", "params": [1,')
    envelope = Envelope.objects.get()
    assert (envelope.error_code, envelope.error_message) == (-32700, "Parse error")
    assert envelope.request_body == '{"jsonrpc": "2.0", "method": "subtract", "params": [1,'
    assert envelope.calls.count() == 0
    assert envelope.outcome == "error"


def test_empty_batch_is_logged_as_an_invalid_request_envelope(rpc):
    rpc(b"[]")
    envelope = Envelope.objects.get()
    assert envelope.error_code == -32600 and envelope.is_batch and envelope.request_body == "[]"


def test_invalid_element_of_a_batch_is_logged_as_an_error_call_holding_the_element(call):
    call([req("subtract", [2, 1], id=1), {"jsonrpc": "2.0", "method": 1, "id": 5}, 7])
    first, bad, seven = calls_of(Envelope.objects.get())
    assert Envelope.objects.get().methods == "subtract, (invalid)"
    assert first.outcome == "ok"
    assert (bad.outcome, bad.error_code, bad.request_id, bad.method) == ("error", -32600, 5, "")
    assert bad.params == {"jsonrpc": "2.0", "method": 1, "id": 5}
    assert (seven.error_code, seven.params) == (-32600, 7)


def test_body_that_is_not_utf8_is_stored_escaped(rpc):
    rpc(b'{"jsonrpc": "2.0", "method": "\xff", "id": 1}')
    assert Envelope.objects.get().request_body == '{"jsonrpc": "2.0", "method": "\\xff", "id": 1}'


def test_values_that_are_not_json_native_are_stored_as_the_response_wrote_them(call):
    answer = call(req("testapp.types", id=1))
    (logged,) = Call.objects.all()
    assert logged.result == answer["result"]
    assert logged.result["decimal"] == "1.10"
    assert logged.result["when"] == "2026-12-02T14:55:01.123Z"
    assert logged.result["pair"] == [1, 2]


def test_built_rows_hold_every_column_of_their_model_and_nothing_else():
    # build_rows() fills Call instances without Model.__init__: a column
    # added to the model must be added there too.
    from jsonrpc_app import dispatch, protocol
    from jsonrpc_app.context import CallContext
    from jsonrpc_app.log.rows import build_rows

    body = json.dumps([req("subtract", [1, 2], id=1), req("testapp.boom", id=2), 5]).encode()
    context = CallContext(source="cli")
    envelope = protocol.parse(body, 100, 64)
    _response, records = dispatch.execute(envelope, context)
    rows = build_rows(context, records, request_body=body, envelope=envelope)
    columns = {f.attname for f in Call._meta.concrete_fields}
    assert len(rows.calls) == 3
    for built in rows.calls:
        assert set(built.__dict__) - {"_state"} == columns
        assert built._state.adding is True and built._state.db is None
    envelope_columns = {f.attname for f in Envelope._meta.concrete_fields}
    assert set(rows.envelope.__dict__) - {"_state"} == envelope_columns
    assert rows.envelope.uid != build_rows(context, records, request_body=body, envelope=envelope).envelope.uid


def test_raising_method_is_logged_with_its_traceback(call):
    answer = call(req("testapp.boom", id=1))
    assert answer["error"] == {"code": -32603, "message": "Internal error"}
    (logged,) = Call.objects.all()
    assert logged.outcome == "error" and logged.error_code == -32603
    assert "RuntimeError: secret internals" in logged.traceback


def test_method_whose_own_atomic_block_rolled_back_is_still_logged(call):
    answer = call(req("testapp.rollback", id=1))
    assert answer["error"]["code"] == -32050
    assert not Group.objects.filter(name="rolled-back").exists()
    (logged,) = Call.objects.all()
    assert (logged.method, logged.error_code) == ("testapp.rollback", -32050)


# -- one transaction, constant queries ---------------------------------------


@pytest.mark.parametrize("size", [100, 1000])
def test_a_batch_is_logged_in_a_constant_number_of_queries(call, django_assert_max_num_queries, size):
    batch = [req("subtract", [i, 1], id=i) for i in range(size)]
    # savepoint, the envelope, the calls in one INSERT, the usage rollups' upsert, release
    with django_assert_max_num_queries(5):
        answer = call(batch)
    assert len(answer) == size
    assert Call.objects.filter(envelope=Envelope.objects.get()).count() == size


def test_on_sqlite_a_batch_is_two_insert_statements_as_sqlite_itself_runs_them(call):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's own trace of the statements it runs")
    connection.ensure_connection()
    ran = []
    connection.connection.set_trace_callback(ran.append)
    try:
        call([req("subtract", [i, 1], id=i) for i in range(100)])
    finally:
        connection.connection.set_trace_callback(None)
    inserts = [sql for sql in ran if sql.lstrip().upper().startswith("INSERT")]
    # Counted by SQLite, not by Django's cursor: one for the envelope, one for its
    # 100 calls, one upsert of their usage rollups (jsonrpc_app.log.rollup).
    assert len(inserts) == 3, inserts
    assert "jsonrpc_app_usagerollup" in inserts[2] and "ON CONFLICT" in inserts[2]
    assert Call.objects.count() == 100


def test_on_postgresql_an_envelope_and_all_its_calls_are_one_statement(call):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no INSERT inside WITH: an INSERT for the envelope, one for its calls")
    batch = [req("subtract", [i, 1], id=i) for i in range(5)] + [req("update", [1], notification=True)]
    # In the test's transaction the write is wrapped in a savepoint; outside of
    # one it is this single statement in autocommit.
    with CaptureQueriesContext(connection) as captured:
        call(batch)
    statements = [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]
    assert len(statements) == 1 and statements[0].startswith("WITH env AS (INSERT INTO"), statements
    envelope = Envelope.objects.get()
    logged = calls_of(envelope)
    assert [c.position for c in logged] == list(range(6))
    assert [c.result for c in logged[:5]] == [-1, 0, 1, 2, 3]
    # SQL NULL, not a JSON null, where a value is absent (the notification's id).
    assert logged[5].is_notification and logged[5].request_id is None
    assert Call.objects.filter(request_id__isnull=True).count() == 1
    assert logged[0].created_at == envelope.created_at and logged[0].outcome == "ok"


def test_a_value_json_cannot_carry_is_still_logged_through_the_plain_statements(call):
    # Beyond 64 bits orjson refuses the integer: the envelope goes the longer way, whole.
    answer = call([req("echo", [2**70], id=1), req("subtract", [3, 1], id=2)])
    assert [a.get("result") for a in answer] == [2**70, 2]
    (envelope,) = Envelope.objects.all()
    assert [c.params for c in calls_of(envelope)] == [[2**70], [3, 1]]


def test_logging_none_writes_nothing_and_runs_no_query(call, jsonrpc, django_assert_num_queries):
    jsonrpc(LOG_POLICY="none")
    with django_assert_num_queries(0):
        call([req("subtract", [1, 1], id=1), req("testapp.boom", id=2)])
    assert not Envelope.objects.exists()


# -- policy -------------------------------------------------------------------


def test_policy_errors_skips_envelopes_without_errors(call, jsonrpc):
    jsonrpc(LOG_POLICY="errors")
    call([req("subtract", [1, 1], id=1), req("subtract", [2, 1], id=2)])
    assert not Envelope.objects.exists()


def test_policy_errors_logs_only_the_failed_calls_of_an_envelope(call, jsonrpc):
    jsonrpc(LOG_POLICY="errors")
    call([req("subtract", [1, 1], id=1), req("testapp.boom", id=2), req("nope", id=3)])
    envelope = Envelope.objects.get()
    assert (envelope.call_count, envelope.error_count) == (3, 2)
    assert [(c.method, c.error_code) for c in calls_of(envelope)] == [
        ("testapp.boom", -32603),
        ("nope", -32601),
    ]


def test_policy_errors_logs_a_parse_error(rpc, jsonrpc):
    jsonrpc(LOG_POLICY="errors")
    rpc(b"{")
    assert Envelope.objects.get().error_code == -32700


def test_method_with_log_false_is_not_logged(call):
    assert call(req("testapp.heartbeat", id=1))["result"] == "alive"
    assert not Envelope.objects.exists()


def test_method_with_log_false_is_left_out_of_a_batch_and_of_its_stored_bodies(call):
    answer = call([
        req("testapp.heartbeat", ["ping-secret"], id="hb"),
        req("subtract", [5, 2], id=2),
    ])
    assert len(answer) == 2
    envelope = Envelope.objects.get()
    assert [c.method for c in calls_of(envelope)] == ["subtract"]
    assert envelope.methods == "subtract"
    assert envelope.call_count == 2
    assert "heartbeat" not in envelope.request_body and "ping-secret" not in envelope.request_body
    assert json.loads(envelope.response_body) == [{"jsonrpc": "2.0", "result": 3, "id": 2}]


# -- redaction ----------------------------------------------------------------


def test_sensitive_keys_are_redacted_at_any_depth_in_any_case_in_params_and_body(call):
    params = {"value": {"profile": [{"PassWord": "hunter2", "name": "ada"}], "Api_Key": {"id": 1}}}
    answer = call(req("echo", params, id=1))
    (logged,) = Call.objects.all()
    assert logged.params == {
        "value": {"profile": [{"PassWord": REDACTED, "name": "ada"}], "Api_Key": REDACTED}
    }
    body = Envelope.objects.get().request_body
    assert "hunter2" not in body
    assert json.loads(body)["params"] == logged.params
    # The client still gets its own values back; only the log is redacted.
    assert answer["result"]["profile"][0]["PassWord"] == "hunter2"


def test_sensitive_keys_are_redacted_in_results_and_the_stored_response(call):
    answer = call(req("testapp.login", {"username": "ada", "password": "hunter2"}, id=1))
    assert answer["result"]["session"]["Token"] == "t-123"
    (logged,) = Call.objects.all()
    assert logged.params == {"username": "ada", "password": REDACTED}
    assert logged.result == {"user": "ada", "session": {"Token": REDACTED, "ttl": 60}}
    envelope = Envelope.objects.get()
    assert "t-123" not in envelope.response_body and "hunter2" not in envelope.request_body


def test_a_parameter_named_like_a_sensitive_key_is_redacted_when_passed_by_position(call):
    call(req("testapp.login", ["ada", "hunter2"], id=1))
    (logged,) = Call.objects.all()
    assert logged.params == ["ada", REDACTED]
    assert json.loads(Envelope.objects.get().request_body)["params"] == ["ada", REDACTED]


@pytest.mark.parametrize("params", [{"account": "A1", "pin": "4321"}, ["A1", "4321"]])
def test_sensitive_params_of_a_method_are_redacted_by_name_and_by_position(call, params):
    call([req("testapp.set_pin", params, id=1), req("echo", ["4321"], id=2)])
    first, second = calls_of(Envelope.objects.get())
    assert "4321" not in json.dumps(first.params)
    # Only that method's param: the same value elsewhere is not a secret.
    assert second.params == ["4321"]
    stored = json.loads(Envelope.objects.get().request_body)
    assert "4321" not in json.dumps(stored[0]) and stored[1]["params"] == ["4321"]


def test_sensitive_key_spelled_with_unicode_escapes_is_redacted_in_the_stored_body(rpc):
    rpc(b'{"jsonrpc": "2.0", "method": "echo", "params": {"value": {"pass\\u0077ord": "hunter2"}}, "id": 1}')
    envelope = Envelope.objects.get()
    assert "hunter2" not in envelope.request_body
    assert Call.objects.get().params == {"value": {"password": REDACTED}}


def test_sensitive_value_in_a_body_that_is_not_json_is_redacted(rpc):
    rpc(b'{"jsonrpc": "2.0", "method": "login", "params": {"Password": "hun\\"ter2"},')
    body = Envelope.objects.get().request_body
    assert "hun" not in body and '"Password": "********"' in body


def test_the_body_is_stored_as_received_when_nothing_was_redacted(rpc):
    raw = b'{ "jsonrpc" : "2.0",  "method": "subtract", "params": [3, 1], "id": 1 }'
    rpc(raw)
    assert Envelope.objects.get().request_body == raw.decode()


def test_sensitive_keys_setting_is_honoured(call, jsonrpc):
    jsonrpc(SENSITIVE_KEYS=["ssn"])
    call(req("echo", {"value": {"SSN": "123", "password": "visible"}}, id=1))
    assert Call.objects.get().params == {"value": {"SSN": REDACTED, "password": "visible"}}


# -- truncation -------------------------------------------------------------


def test_large_params_result_and_bodies_are_truncated_with_their_size(call, jsonrpc):
    jsonrpc(LOG_MAX_VALUE_BYTES=1000)
    answer = call(req("testapp.big", {"size": 5000}, id=1))
    assert len(answer["result"]) == 5000
    (logged,) = Call.objects.all()
    assert logged.result[TRUNCATED_KEY] is True
    assert logged.result["original_bytes"] == 5002
    assert logged.result["preview"].startswith('"xxxx')
    envelope = Envelope.objects.get()
    assert len(envelope.response_body.encode()) < 1100
    assert "[truncated: %d bytes in total, 1000 kept]" % len(json.dumps(answer, separators=(",", ":"))) in (
        envelope.response_body
    )

    call(req("echo", ["y" * 3000], id=2))
    logged = Call.objects.get(method="echo")
    assert logged.params[TRUNCATED_KEY] is True and logged.params["original_bytes"] == 3004
    assert "bytes in total, 1000 kept]" in Envelope.objects.get(calls=logged).request_body


def test_a_batch_of_large_results_is_logged_whole_beyond_one_statements_size(call):
    # 300 results of 60,000 characters (each under LOG_MAX_VALUE_BYTES): 18 MB
    # of values, more than MariaDB's default max_allowed_packet (16 MiB) for
    # one INSERT; on MySQL/MariaDB the calls go in statements of bounded size.
    answer = call([req("testapp.big", {"size": 60000}, id=i) for i in range(300)])
    assert len(answer) == 300
    assert not spool.status().pending
    envelope = Envelope.objects.get()
    assert Call.objects.filter(envelope=envelope).count() == 300
    assert {len(r) for r in Call.objects.values_list("result", flat=True)} == {60000}


def test_values_under_the_limit_are_not_truncated(call, jsonrpc):
    jsonrpc(LOG_MAX_VALUE_BYTES=1000)
    call(req("echo", ["y" * 900], id=1))
    assert Call.objects.get().params == ["y" * 900]


# -- a log that cannot be written ---------------------------------------------


def _error_records(caplog):
    return [r for r in caplog.records if r.name == "jsonrpc_app" and r.levelno == logging.ERROR]


@pytest.fixture
def call_table_dropped():
    """
    Drop the calls' table. Where DDL is not transactional (MySQL/MariaDB
    commit before DROP TABLE, ending the test's transaction and its
    savepoints), the test runs outside a transaction and the table is made
    again afterwards; elsewhere the test's rollback brings it back.
    """

    def drop():
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE %s" % connection.ops.quote_name(Call._meta.db_table))

    yield drop
    if not connection.features.can_rollback_ddl:
        with connection.schema_editor() as editor:
            editor.create_model(Call)


@pytest.mark.django_db(transaction=not connection.features.can_rollback_ddl)
def test_log_write_failure_leaves_the_answer_unchanged_and_is_logged_at_error(call, caplog, settings,
                                                                              call_table_dropped):
    batch = [req("subtract", [42, 23], id=1), req("testapp.login", ["ada", "hunter2"], id=2)]
    configured = settings.JSONRPC
    settings.JSONRPC = {**configured, "LOG_POLICY": "none"}
    expected = call(batch)
    settings.JSONRPC = configured
    call_table_dropped()
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="jsonrpc_app"):
        assert call(batch) == expected
    (error,) = _error_records(caplog)
    message = error.getMessage()
    assert "Could not write the JSON-RPC call log" in message
    assert '"method":"subtract"' in message and "testapp.login" in message
    assert "hunter2" not in message  # the envelope is reported redacted
    assert error.exc_info is not None
    # Nothing half-written: the envelope went with its calls, to the spool.
    assert not Envelope.objects.exists()
    assert spool.status().pending == 1


def test_log_database_that_does_not_exist_leaves_the_answer_unchanged(call, jsonrpc, caplog):
    jsonrpc(LOG_DATABASE="no-such-alias")
    with caplog.at_level(logging.ERROR, logger="jsonrpc_app"):
        assert call(req("subtract", [42, 23], id=1)) == {"jsonrpc": "2.0", "result": 19, "id": 1}
    (error,) = _error_records(caplog)
    assert "no-such-alias" in error.getMessage() and "subtract" in error.getMessage()


def test_value_a_json_column_refuses_is_stored_escaped(call, caplog):
    # jsonb refuses \u0000; the log stores it escaped (tests/test_hostile_values.py).
    with caplog.at_level(logging.ERROR, logger="jsonrpc_app"):
        answer = call(req("echo", ["a\u0000b"], id=1))
    assert answer == {"jsonrpc": "2.0", "result": "a\u0000b", "id": 1}
    assert not _error_records(caplog)
    assert Call.objects.get().params == ["a\\u0000b"]


# -- the caller's transaction (ATOMIC_REQUESTS) ---------------------------------


@pytest.fixture
def atomic_requests(monkeypatch, endpoint):
    if endpoint != "/rpc/":
        pytest.skip("Django wraps no async view in a transaction: tests/test_async.py tests ATOMIC_REQUESTS there")
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", True)


@pytest.mark.django_db(transaction=True)
def test_with_atomic_requests_a_rolled_back_method_is_logged(call, atomic_requests):
    answer = call([req("testapp.rollback", id=1), req("subtract", [2, 1], id=2)])
    assert answer[0]["error"]["code"] == -32050
    assert not Group.objects.filter(name="rolled-back").exists()
    assert Call.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_with_atomic_requests_the_log_survives_the_rollback_of_the_request(call, atomic_requests):
    # PostgreSQL: written on a second connection. SQLite (one writer): written
    # in the request's transaction, and again once the request has finished.
    assert call(req("testapp.abort_request", id=1))["result"] == "aborted"
    assert not Group.objects.filter(name="aborted").exists()
    (logged,) = Call.objects.all()
    assert logged.method == "testapp.abort_request"
    assert Envelope.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_with_atomic_requests_a_committed_request_is_logged_once(call, atomic_requests):
    call([req("subtract", [2, 1], id=1), req("testapp.whoami", id=2)])
    call(req("subtract", [5, 1], id=3))
    assert Envelope.objects.count() == 2
    assert Call.objects.count() == 3


# -- LOG_DATABASE and the router ------------------------------------------------


@pytest.mark.django_db(transaction=True, databases=["default", "log"])
def test_log_database_setting_sends_the_log_to_its_own_database(client, call, jsonrpc):
    jsonrpc(LOG_DATABASE="log")
    assert router.allow_migrate("log", "jsonrpc_app")
    assert not router.allow_migrate("default", "jsonrpc_app")
    assert router.allow_migrate("default", "auth") is None or router.allow_migrate("default", "auth")
    # The log database was set up before this test chose it: make its tables.
    log_db = connections["log"]
    with log_db.schema_editor() as editor:
        editor.create_model(Envelope)
        editor.create_model(Call)
        editor.create_model(UsageRollup)
    try:
        _log_to_own_database(client, call, log_db)
        # The usage rollups live beside the calls they count.
        assert UsageRollup.objects.using("log").filter(width=0, method="subtract").get().calls == 1
    finally:
        with log_db.schema_editor() as editor:
            editor.delete_model(UsageRollup)
            editor.delete_model(Call)
            editor.delete_model(Envelope)


def _log_to_own_database(client, call, log_db):
    user = User.objects.create_user("ada", password="pw-long-enough-1")
    client.force_login(user)
    call([req("subtract", [42, 23], id=1), req("testapp.whoami", id=2)])
    assert router.db_for_read(Envelope) == router.db_for_write(Call) == "log"
    assert Envelope.objects.using("log").count() == 1
    assert Call.objects.using("log").count() == 2
    # The router sends plain queries there too, and nothing went to default.
    assert Call.objects.filter(method="subtract").get().result == 19
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM %s" % Envelope._meta.db_table)
        assert cursor.fetchone()[0] == 0
    # The user lives in default; the log keeps the key and a snapshot of the name.
    envelope = Envelope.objects.get()
    assert (envelope.user_id, envelope.username) == (user.pk, "ada")


# -- system checks of the log's settings ---------------------------------------------


def _log_check_ids():
    from jsonrpc_app.checks import check_call_log_settings

    return [e.id for e in check_call_log_settings()]


def test_checks_pass_with_the_default_log_settings():
    assert _log_check_ids() == []


def test_check_refuses_a_log_database_that_is_not_an_alias(jsonrpc):
    jsonrpc(LOG_DATABASE="nowhere")
    assert _log_check_ids() == ["jsonrpc_app.E030"]


def test_check_warns_when_no_router_sends_the_log_to_its_database(jsonrpc, settings):
    jsonrpc(LOG_DATABASE="log")
    assert _log_check_ids() == []
    settings.DATABASE_ROUTERS = []
    assert _log_check_ids() == ["jsonrpc_app.W030"]


def test_checks_refuse_bad_sensitive_keys_and_size_cap(jsonrpc):
    jsonrpc(SENSITIVE_KEYS="password", LOG_MAX_VALUE_BYTES=0)
    assert _log_check_ids() == ["jsonrpc_app.E031", "jsonrpc_app.E032"]


def test_envelope_uids_are_version_7_and_sort_in_the_order_they_were_made(call):
    # Time-ordered ids land on the last page of the unique index (see models.uuid7).
    import time as _time

    from jsonrpc_app.models import uuid7

    made = []
    for _ in range(3):
        made.append(uuid7())
        _time.sleep(0.002)
    assert made == sorted(made, key=lambda u: u.bytes)
    assert {u.version for u in made} == {7} and {u.variant for u in made} == {uuid.RFC_4122}
    assert len({uuid7() for _ in range(1000)}) == 1000
    call(req("subtract", [3, 1], id=1))
    (logged,) = Envelope.objects.all()
    assert logged.uid.version == 7
