"""DRF serializers for params and results, and how return values are written as JSON."""

import json
import logging

import pytest
from django.contrib.auth.models import Group

from jsonrpc_app.models import Call
from tests.helpers import req

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.typed_urls")]


@pytest.fixture
def typed(client):
    """POST a JSON-RPC body to the typed endpoint and return (status, decoded answer)."""

    def post(body):
        response = client.generic("POST", "/typed-rpc/", json.dumps(body), content_type="application/json")
        assert response.status_code == 200, response.status_code
        return json.loads(response.content)

    return post


# -- params_serializer ------------------------------------------------------------


def test_params_serializer_passes_validated_data_with_its_defaults(typed):
    answer = typed(req("serialized.order", {"sku": "X1", "deliver_on": "2024-05-01"}))
    assert answer["result"] == {
        "sku": "X1",
        "quantity": 1,
        "note": "",
        "deliver_on": "2024-05-01",
        "source": "http",
    }


def test_params_serializer_coerces_as_drf_does(typed):
    # DRF's IntegerField reads "3" as 3: the serializer, not the annotations, decides.
    answer = typed(req("serialized.order", {"sku": "X1", "quantity": "3"}))
    assert answer["result"]["quantity"] == 3


def test_params_serializer_errors_are_invalid_params_with_drf_error_dict(typed):
    answer = typed(req("serialized.order", {"quantity": 0}))
    error = answer["error"]
    assert error["code"] == -32602
    assert error["message"] == "Invalid params"
    assert error["data"] == {
        "sku": [{"message": "This field is required.", "code": "required"}],
        "quantity": [{"message": "Ensure this value is greater than or equal to 1.", "code": "min_value"}],
    }


def test_params_serializer_object_level_errors(typed):
    answer = typed(req("serialized.order", {"sku": "X1", "note": "refuse"}))
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"] == {
        "non_field_errors": [{"message": "refused by validate()", "code": "invalid"}]
    }


def test_params_serializer_takes_params_by_position_in_signature_order(typed):
    answer = typed(req("serialized.order", ["X2", 4]))
    assert answer["result"]["sku"] == "X2"
    assert answer["result"]["quantity"] == 4


def test_params_serializer_method_refuses_unknown_names_and_extra_positions(typed):
    answer = typed(req("serialized.order", {"sku": "X1", "colour": "red"}))
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"] == [{"path": "colour", "message": "unexpected parameter"}]
    answer = typed(req("serialized.order", ["X1", 1, "", None, "extra"]))
    assert answer["error"]["code"] == -32602


def test_params_serializer_sees_the_call_context(typed):
    from tests.typed_methods import OrderSerializer

    seen = []
    original = OrderSerializer.validate

    def spy(self, data):
        seen.append((self.context["call_context"].source, self.context["request"] is not None))
        return original(self, data)

    OrderSerializer.validate = spy
    try:
        typed(req("serialized.order", {"sku": "X1"}))
    finally:
        OrderSerializer.validate = original
    assert seen == [("http", True)]


def test_params_serializer_failure_is_logged_as_an_invalid_params_call(typed):
    typed(req("serialized.order", {"quantity": "many"}))
    logged = Call.objects.get()
    assert logged.error_code == -32602
    assert "sku" in logged.error_data


# -- result_serializer -----------------------------------------------------------


def test_result_serializer_serialises_a_model_instance(typed):
    group = Group.objects.create(name="editors")
    assert typed(req("groups.get", {"name": "editors"}))["result"] == {"id": group.pk, "name": "editors"}


def test_result_serializer_serialises_a_queryset_and_a_manager_as_lists(typed):
    a = Group.objects.create(name="a")
    b = Group.objects.create(name="b")
    expected = [{"id": a.pk, "name": "a"}, {"id": b.pk, "name": "b"}]
    assert typed(req("groups.list"))["result"] == expected
    assert sorted(typed(req("groups.manager"))["result"], key=lambda g: g["name"]) == expected


def test_result_serializer_leaves_none_as_null(typed):
    assert typed(req("groups.none")) == {"jsonrpc": "2.0", "result": None, "id": 1}


def test_result_serializer_errors_inside_the_method_still_map(typed):
    answer = typed(req("groups.get", {"name": "nobody"}))
    assert answer["error"]["code"] == -32603


# -- how results are written ----------------------------------------------------------


def test_results_are_written_as_djangos_json_encoder_writes_them(typed):
    assert typed(req("values"))["result"] == {
        "decimal": "1.10",
        "aware": "2024-05-01T10:20:30.123Z",
        "naive": "2024-05-01T10:20:30",
        "date": "2024-05-01",
        "time": "10:20:00",
        "duration": "P1DT00H00M05S",
        "uuid": "12345678-1234-5678-1234-567812345678",
        "lazy": "Invalid params",
        "tuple": [1, 2],
    }


def test_results_match_django_json_encoder_output(typed):
    from django.core.serializers.json import DjangoJSONEncoder

    from tests.typed_methods import values

    expected = json.loads(json.dumps(values(), cls=DjangoJSONEncoder))
    assert typed(req("values"))["result"] == expected


def test_typed_results_converted_from_params_are_written_back_as_json(typed):
    answer = typed(req("times", {"at": "2024-05-01T10:00:00+02:00", "every": "PT1H", "at_time": "10:00"}))
    assert answer["result"] == ["2024-05-01T10:00:00+02:00", "2024-05-01T11:00:00+02:00"]
    answer = typed(req("total", ["1.10", "2.205", 3]))
    assert answer["result"] == "6.305"


def test_an_unserialisable_result_is_a_logged_internal_error_not_a_500(typed, caplog):
    with caplog.at_level(logging.ERROR, logger="jsonrpc_app"):
        answer = typed(req("unserialisable", id="u1"))
    assert answer == {"jsonrpc": "2.0", "error": {"code": -32603, "message": "Internal error"}, "id": "u1"}
    assert any(r.levelno == logging.ERROR for r in caplog.records)
    logged = Call.objects.get()
    assert logged.error_code == -32603
    assert logged.result is None


def test_an_unserialisable_result_in_a_batch_spares_the_others(client):
    body = [req("unserialisable", id=1), req("values", id=2)]
    response = client.generic("POST", "/typed-rpc/", json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    answers = {a["id"]: a for a in json.loads(response.content)}
    assert answers[1]["error"]["code"] == -32603
    assert answers[2]["result"]["decimal"] == "1.10"
