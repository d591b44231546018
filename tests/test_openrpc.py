"""The OpenRPC document: rpc.discover, GET <endpoint>openrpc.json, schemas, and the helpers the admin uses."""

import dataclasses
import datetime
import decimal
import enum
import ipaddress
import json
import uuid
from pathlib import Path
from typing import Literal, Optional, TypedDict, Union

import jsonschema
import pytest
from referencing import Registry
from referencing.jsonschema import DRAFT7

from jsonrpc_app import CallContext, InvalidParams, MethodRegistry, registry
from jsonrpc_app.models import Call
from jsonrpc_app.openrpc import (
    SchemaBuilder,
    document,
    error_object,
    method_schema,
    param_structure,
    params_schema,
    params_skeleton,
)
from jsonrpc_app.params import converter_for
from tests import typed_methods

META = Path(__file__).parent / "openrpc_meta_schema"


@pytest.fixture(scope="module")
def openrpc_validator():
    meta = json.loads((META / "openrpc-meta-schema.json").read_text())
    json_schema = json.loads((META / "json-schema-tools-meta-schema.json").read_text())
    resource = DRAFT7.create_resource(json_schema)
    refs = Registry().with_resources(
        [
            (meta["$id"], DRAFT7.create_resource(meta)),
            ("https://meta.json-schema.tools/", resource),
            ("https://meta.json-schema.tools", resource),
        ]
    )
    return jsonschema.Draft7Validator(meta, registry=refs)


def assert_valid_openrpc(validator, doc):
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, [(list(e.absolute_path), e.message[:200]) for e in errors[:5]]


def discover_over_http(client, path="/rpc/"):
    body = json.dumps({"jsonrpc": "2.0", "method": "rpc.discover", "id": 1})
    response = client.generic("POST", path, body, content_type="application/json")
    assert response.status_code == 200
    answer = json.loads(response.content)
    assert "error" not in answer, answer
    return answer["result"]


# -- the demo's document ----------------------------------------------------------


@pytest.mark.django_db
def test_demo_rpc_discover_validates_against_the_openrpc_meta_schema(client, openrpc_validator):
    doc = discover_over_http(client)
    assert_valid_openrpc(openrpc_validator, doc)
    assert doc["openrpc"].startswith("1.")
    assert doc["info"]["title"] == "jsonrpc_app demo"
    assert doc["servers"] == [{"name": "default", "url": "http://testserver/rpc/"}]
    names = [m["name"] for m in doc["methods"]]
    assert "subtract" in names and "shop.reserve" in names
    assert "rpc.discover" not in names
    assert len(names) == len(set(names))


@pytest.mark.django_db
def test_meta_schema_validation_catches_a_broken_document(client, openrpc_validator):
    doc = discover_over_http(client)
    doc["methods"][0]["params"] = [{"name": "x", "schema": {"type": "no-such-type"}}]
    assert list(openrpc_validator.iter_errors(doc))
    del doc["info"]
    assert list(openrpc_validator.iter_errors(doc))


@pytest.mark.django_db
def test_demo_subtract_is_described_from_its_annotations_and_docstring(client):
    doc = discover_over_http(client)
    subtract = next(m for m in doc["methods"] if m["name"] == "subtract")
    assert subtract["summary"] == "Return minuend minus subtrahend."
    assert subtract["description"].startswith("Return minuend minus subtrahend.")
    assert subtract["params"] == [
        {"name": "minuend", "schema": {"type": "integer"}, "required": True},
        {"name": "subtrahend", "schema": {"type": "integer"}, "required": True},
    ]
    assert subtract["result"] == {"name": "result", "schema": {"type": "integer"}}
    assert subtract["paramStructure"] == "either"


@pytest.mark.django_db
def test_declared_errors_appear_in_the_document(client):
    doc = discover_over_http(client)
    reserve = next(m for m in doc["methods"] if m["name"] == "shop.reserve")
    assert reserve["errors"] == [{"code": -32010, "message": "Out of stock"}]


@pytest.mark.django_db
def test_openrpc_json_serves_the_same_document(client):
    doc = discover_over_http(client)
    response = client.get("/rpc/openrpc.json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Access-Control-Allow-Origin"] == "*"
    assert json.loads(response.content) == doc


def test_openrpc_json_only_answers_get(client):
    response = client.post("/rpc/openrpc.json", "{}", content_type="application/json")
    assert response.status_code == 405
    assert "GET" in response["Allow"]


@pytest.mark.django_db
def test_info_comes_from_settings(client, settings):
    settings.JSONRPC = {"OPENRPC_INFO": {"title": "Shop API", "version": "2.1.0", "description": "Orders."}}
    doc = json.loads(client.get("/rpc/openrpc.json").content)
    assert doc["info"] == {"title": "Shop API", "version": "2.1.0", "description": "Orders."}


@pytest.mark.django_db
def test_endpoint_authentication_guards_the_document_too(client, settings, django_user_model):
    settings.JSONRPC = {"PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"]}
    response = client.get("/rpc/openrpc.json")
    assert response.status_code in (401, 403)
    assert "methods" not in json.loads(response.content)
    user = django_user_model.objects.create_user("ann", password="pw")
    client.force_login(user)
    assert client.get("/rpc/openrpc.json").status_code == 200


# -- rpc.discover as a method ---------------------------------------------------------


def test_every_registry_answers_rpc_discover():
    fresh = MethodRegistry("fresh")
    assert "rpc.discover" in fresh
    assert fresh.get("rpc.discover").hidden


def test_rpc_discover_is_not_a_duplicate_and_cannot_be_taken():
    fresh = MethodRegistry("fresh")
    another = MethodRegistry("another")  # a duplicate would raise AlreadyRegistered
    assert fresh.get("rpc.discover") is another.get("rpc.discover")
    with pytest.raises(ValueError, match="reserved"):
        fresh.register(lambda: None, "rpc.discover")


@pytest.mark.django_db
def test_rpc_discover_runs_through_dispatch_and_is_logged(client):
    discover_over_http(client)
    call = Call.objects.get()
    assert call.method == "rpc.discover"
    assert call.error_code is None


@pytest.mark.django_db
def test_rpc_discover_takes_no_params(call):
    answer = call({"jsonrpc": "2.0", "method": "rpc.discover", "params": [1], "id": 1})
    assert answer["error"]["code"] == -32602
    answer = call({"jsonrpc": "2.0", "method": "rpc.discover", "params": {}, "id": 2})
    assert "methods" in answer["result"]


@pytest.mark.django_db
def test_rpc_discover_in_a_batch(call):
    answers = call(
        [
            {"jsonrpc": "2.0", "method": "rpc.discover", "id": 1},
            {"jsonrpc": "2.0", "method": "subtract", "params": [3, 1], "id": 2},
        ]
    )
    by_id = {a["id"]: a for a in answers}
    assert by_id[2]["result"] == 2
    assert by_id[1]["result"]["openrpc"]


def test_rpc_discover_describes_the_registry_it_is_called_on():
    from jsonrpc_app.dispatch import execute
    from jsonrpc_app.protocol import parse

    fresh = MethodRegistry("fresh")

    def ping() -> str:
        return "pong"

    fresh.register(ping)
    envelope = parse(b'{"jsonrpc": "2.0", "method": "rpc.discover", "id": 1}')
    response, _ = execute(envelope, CallContext(registry=fresh, log=False, endpoint="/ping/"))
    doc = response["result"]
    assert [m["name"] for m in doc["methods"]] == ["ping"]
    assert doc["servers"] == [{"name": "fresh", "url": "/ping/"}]


# -- the typed registry -----------------------------------------------------------------

@pytest.fixture
def typed_doc(client, settings):
    settings.ROOT_URLCONF = "tests.typed_urls"
    return json.loads(client.get("/typed-rpc/openrpc.json").content)


def method_in(doc, name):
    return next(m for m in doc["methods"] if m["name"] == name)


@pytest.mark.django_db
def test_typed_registry_document_validates_and_leaves_hidden_and_disabled_out(typed_doc, openrpc_validator, client):
    assert_valid_openrpc(openrpc_validator, typed_doc)
    names = [m["name"] for m in typed_doc["methods"]]
    assert "secret" not in names
    assert "switched_off" not in names
    assert typed_doc["servers"][0]["url"] == "http://testserver/typed-rpc/"
    assert discover_over_http(client, "/typed-rpc/") == typed_doc


@pytest.mark.django_db
def test_dataclasses_typeddicts_and_enums_become_named_components(typed_doc):
    schemas = typed_doc["components"]["schemas"]
    place = method_in(typed_doc, "place")
    params = {p["name"]: p for p in place["params"]}
    assert params["lines"] == {
        "name": "lines",
        "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Line"}},
        "required": True,
        "description": "what to order",
    }
    assert schemas["Line"]["properties"]["qty"] == {"type": "integer"}
    assert schemas["Line"]["required"] == ["sku", "qty"]
    assert schemas["Line"]["description"] == "One line of an order."
    assert params["size"]["schema"] == {"$ref": "#/components/schemas/Size", "default": "m"}
    assert schemas["Size"]["enum"] == ["s", "m"]
    assert params["mode"]["schema"] == {"enum": ["fast", "cheap"], "type": "string", "default": "cheap"}
    assert params["when"]["schema"] == {"type": "string", "format": "date"}
    assert params["shipping"]["schema"]["anyOf"][0] == {"$ref": "#/components/schemas/Shipping"}
    assert "required" not in schemas["Shipping"]  # total=False
    assert params["ref"]["schema"]["anyOf"] == [{"type": "string", "format": "uuid"}, {"type": "null"}]
    # The result is the dataclass as written (Decimal as a string), a component of its own.
    result_ref = place["result"]["schema"]["$ref"]
    result_schema = schemas[result_ref.rsplit("/", 1)[1]]
    assert result_schema["properties"]["unit_price"] == {"type": "string", "format": "decimal"}


@pytest.mark.django_db
def test_recursive_dataclass_refers_to_itself(typed_doc):
    tree = typed_doc["components"]["schemas"]["Tree"]
    assert tree["properties"]["children"] == {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}


@pytest.mark.django_db
def test_param_structures(typed_doc):
    structures = {m["name"]: m["paramStructure"] for m in typed_doc["methods"]}
    assert structures["place"] == "either"
    assert structures["total"] == "by-position"
    assert structures["only_named"] == "by-name"
    assert structures["only_positional"] == "by-position"
    assert structures["options"] == "by-name"
    assert structures["serialized.order"] == "by-name"


@pytest.mark.django_db
def test_variadic_params_are_one_repeated_descriptor(typed_doc):
    total = method_in(typed_doc, "total")
    assert len(total["params"]) == 1
    assert total["params"][0]["name"] == "amounts"
    assert total["params"][0]["x-variadic"] is True
    assert total["params"][0]["required"] is False


@pytest.mark.django_db
def test_declared_errors_with_data(typed_doc):
    reserve = method_in(typed_doc, "shop.reserve")
    assert reserve["errors"] == [
        {"code": -32010, "message": "Out of stock"},
        {"code": -32011, "message": "Try again later", "data": {"retry_after": 5}},
    ]


@pytest.mark.django_db
def test_serializer_methods_are_described_from_their_serializers(typed_doc):
    order = method_in(typed_doc, "serialized.order")
    params = {p["name"]: p for p in order["params"]}
    assert list(params) == ["sku", "quantity", "note", "deliver_on"]
    assert params["sku"]["required"] is True
    assert params["sku"]["schema"]["type"] == "string"
    assert params["sku"]["schema"]["maxLength"] == 8
    assert params["sku"]["schema"]["description"] == "Stock keeping unit"
    assert params["quantity"]["required"] is False
    assert params["quantity"]["schema"]["minimum"] == 1
    assert params["quantity"]["schema"]["default"] == 1
    assert params["deliver_on"]["schema"]["anyOf"][1] == {"type": "null"}
    groups = method_in(typed_doc, "groups.list")
    assert groups["result"]["schema"]["type"] == "array"
    assert set(groups["result"]["schema"]["items"]["properties"]) == {"id", "name"}
    one = method_in(typed_doc, "groups.get")
    assert one["result"]["schema"]["type"] == "object"


# -- schemas agree with validation -------------------------------------------------------


class Shade(enum.IntEnum):
    DARK = 1
    LIGHT = 2


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0


class Box(TypedDict, total=False):
    label: str
    points: list[Point]


AGREEMENT = [
    (int, [1, -5, 2.0], [True, 1.5, "1", None]),
    (float, [1, 1.5], [True, "1.5", None]),
    (str, ["", "a"], [1, None, []]),
    (bool, [True, False], [0, 1, "true"]),
    (list[int], [[], [1, 2]], [[1, "2"], {}, [True]]),
    (dict[str, float], [{}, {"a": 1}], [{"a": "1"}, []]),
    (dict[int, str], [{"1": "a"}], [{"x": "a"}]),
    (Optional[str], ["a", None], [1]),
    (Union[int, str], [1, "a"], [1.5, None]),
    (Literal["a", 2], ["a", 2], ["b", 3, True]),
    (Shade, [1, 2], [3, "1", True]),
    (datetime.datetime, ["2024-05-01T10:00:00Z"], [1]),
    (datetime.date, ["2024-05-01"], [20240501]),
    (decimal.Decimal, ["1.5", 2, 2.5], ["x", "1_0", True, None]),
    (uuid.UUID, ["12345678-1234-5678-1234-567812345678"], [5]),
    (ipaddress.IPv4Address, ["192.0.2.1"], [5, None]),
    (tuple[int, str], [[1, "a"]], [[1], [1, "a", 2], ["a", 1]]),
    (set[int], [[1, 2]], [[1, "a"]]),
    (Point, [{"x": 1}, {"x": 1, "y": 2.5}], [{"y": 1}, {"x": 1, "z": 0}, {"x": "1"}]),
    (Box, [{}, {"label": "a", "points": [{"x": 1}]}], [{"points": [{}]}, {"other": 1}]),
]


@pytest.mark.parametrize("annotation, accepted, refused", AGREEMENT)
def test_schema_accepts_what_validation_accepts_and_refuses_what_it_refuses(annotation, accepted, refused):
    schema = SchemaBuilder("input").schema(annotation)
    validator = jsonschema.Draft7Validator(schema)
    convert = converter_for(annotation)
    for value in accepted:
        convert(value, "x")
        assert validator.is_valid(value), (annotation, value)
    for value in refused:
        with pytest.raises(InvalidParams):
            convert(value, "x")
        assert not validator.is_valid(value), (annotation, value)


# -- helpers for the admin ---------------------------------------------------------------


def all_methods():
    return [m for reg in (registry, typed_methods.registry) for m in reg if m.enabled]


@pytest.mark.parametrize("method", all_methods(), ids=lambda m: m.name)
def test_params_skeleton_is_accepted_by_the_method(method):
    skeleton = params_skeleton(method)
    json.dumps(skeleton)
    expected = list if param_structure(method) == "by-position" else dict
    assert type(skeleton) is expected
    method.binder.bind(skeleton, CallContext(registry=registry))
    if method.params_serializer is not None:
        serializer = method.params_serializer(data=skeleton)
        assert serializer.is_valid(), serializer.errors


def test_params_skeleton_examples():
    assert params_skeleton(registry.get("subtract")) == {"minuend": 0, "subtrahend": 0}
    assert params_skeleton(registry.get("sum")) == [0]
    assert params_skeleton(registry.get("shop.reserve")) == {"sku": "", "quantity": 1}
    place = params_skeleton(typed_methods.registry.get("place"))
    assert place["lines"] == []
    assert place["when"] == "2024-01-01"
    assert place["size"] == "m"


def test_method_schema_is_inline_and_valid_as_a_method_object(openrpc_validator):
    method = typed_methods.registry.get("place")
    obj = method_schema(method)
    assert "$ref" not in json.dumps(obj)
    lines = next(p for p in obj["params"] if p["name"] == "lines")
    assert lines["schema"]["items"]["properties"]["qty"] == {"type": "integer"}
    doc = {"openrpc": "1.3.2", "info": {"title": "t", "version": "1"}, "methods": [obj]}
    assert_valid_openrpc(openrpc_validator, doc)


def test_method_schema_of_a_recursive_type_stays_finite():
    obj = method_schema(typed_methods.registry.get("tree_size"))
    children = obj["params"][0]["schema"]["properties"]["children"]
    assert children == {"type": "array", "items": {"title": "Tree"}}


def test_params_schema_validates_named_params():
    schema = params_schema(registry.get("subtract"))
    validator = jsonschema.Draft7Validator(schema)
    assert validator.is_valid({"minuend": 1, "subtrahend": 2})
    assert not validator.is_valid({"minuend": 1})
    assert not validator.is_valid({"minuend": 1, "subtrahend": 2, "x": 3})


def test_error_object_accepts_classes_instances_and_dicts_only():
    assert error_object(typed_methods.OutOfStock) == {"code": -32010, "message": "Out of stock"}
    assert error_object(typed_methods.OutOfStock(data={"sku": "A"})) == {
        "code": -32010,
        "message": "Out of stock",
        "data": {"sku": "A"},
    }
    assert error_object({"code": 1, "message": "m"}) == {"code": 1, "message": "m"}
    with pytest.raises(TypeError):
        error_object(ValueError)


def test_document_without_a_request_still_names_the_server():
    doc = document(typed_methods.registry)
    assert doc["servers"][0]["url"]
    assert doc["servers"][0]["name"] == "typed"


def _schemas(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schemas(value)


def test_documents_avoid_what_client_generators_choke_on():
    # @open-rpc/generator-client crashes on an array schema without "items" and
    # warns on "type" given as a list: the documents never contain either.
    for reg in (registry, typed_methods.registry):
        for node in _schemas(document(reg)):
            if node.get("type") == "array":
                assert "items" in node, node
            assert not isinstance(node.get("type"), list), node


def test_a_declared_error_that_is_not_a_jsonrpc_error_is_a_system_check_error():
    from jsonrpc_app.checks import check_declared_errors

    assert check_declared_errors() == []
    bad = MethodRegistry("bad-errors")
    bad.register(lambda: None, "oops", errors=[ValueError])
    try:
        assert [e.id for e in check_declared_errors()] == ["jsonrpc_app.E050"]
    finally:
        bad.unregister("oops")


def test_an_ipv4_address_is_a_string_of_format_ipv4_in_and_out():
    assert SchemaBuilder("input").schema(ipaddress.IPv4Address) == {"type": "string", "format": "ipv4"}
    assert SchemaBuilder("output").schema(ipaddress.IPv4Address | None) == {
        "anyOf": [{"type": "string", "format": "ipv4"}, {"type": "null"}]
    }
