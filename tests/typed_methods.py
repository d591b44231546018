"""
A registry of typed methods for the params, serializer and OpenRPC tests,
served at /typed-rpc/ by tests.typed_urls (not the demo's default registry).
"""

import dataclasses
import datetime
import decimal
import enum
import uuid
from typing import Literal, Optional, TypedDict

from django.contrib.auth.models import Group
from django.utils.translation import gettext_lazy
from rest_framework import serializers

from jsonrpc_app import CallContext, JsonRpcError, MethodRegistry, rpc_method

registry = MethodRegistry("typed")


class OutOfStock(JsonRpcError):
    code = -32010
    message = "Out of stock"


class Busy(JsonRpcError):
    code = -32011
    message = "Try again later"
    data = {"retry_after": 5}


class Size(enum.Enum):
    S = "s"
    M = "m"


@dataclasses.dataclass
class Line:
    """One line of an order."""

    sku: str
    qty: int
    unit_price: decimal.Decimal = decimal.Decimal("0")


class Shipping(TypedDict, total=False):
    city: str
    express: bool


@dataclasses.dataclass
class Tree:
    label: str
    children: "list[Tree]" = dataclasses.field(default_factory=list)


@rpc_method(registry=registry)
def place(
    lines: list[Line],
    when: datetime.date,
    size: Size = Size.M,
    mode: Literal["fast", "cheap"] = "cheap",
    shipping: Optional[Shipping] = None,
    ref: Optional[uuid.UUID] = None,
    tags: dict[str, int] | None = None,
) -> Line:
    """Place an order.

    :param lines: what to order
    :param when: the delivery day
    """
    return lines[0]


@rpc_method(registry=registry)
def tree_size(tree: Tree) -> int:
    return 1 + sum(tree_size(c) for c in tree.children)


@rpc_method(registry=registry)
def times(at: datetime.datetime, every: datetime.timedelta, at_time: datetime.time) -> list[datetime.datetime]:
    return [at, at + every]


@rpc_method(registry=registry)
def total(*amounts: decimal.Decimal) -> decimal.Decimal:
    return sum(amounts, decimal.Decimal(0))


@rpc_method(registry=registry)
def only_named(*, a: int, b: str = "x") -> dict:
    return {"a": a, "b": b}


@rpc_method(registry=registry)
def only_positional(a: int, /, b: int = 0) -> int:
    return a + b


@rpc_method(registry=registry)
def options(**opts: bool) -> dict:
    return opts


def _reserve(sku: str, quantity: int = 1) -> dict:
    """Reserve stock."""
    raise OutOfStock(data={"sku": sku})


registry.register(_reserve, "shop.reserve", errors=[OutOfStock, Busy])


def _secret():
    return "hidden"


registry.register(_secret, "secret", hidden=True)
registry.register(lambda: "off", "switched_off", enabled=False)


# -- results the encoder has to write ----------------------------------------


@rpc_method(registry=registry)
def values() -> dict:
    return {
        "decimal": decimal.Decimal("1.10"),
        "aware": datetime.datetime(2024, 5, 1, 10, 20, 30, 123456, tzinfo=datetime.timezone.utc),
        "naive": datetime.datetime(2024, 5, 1, 10, 20, 30),
        "date": datetime.date(2024, 5, 1),
        "time": datetime.time(10, 20),
        "duration": datetime.timedelta(days=1, seconds=5),
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "lazy": gettext_lazy("Invalid params"),
        "tuple": (1, 2),
    }


@rpc_method(registry=registry)
def unserialisable() -> object:
    return object()


# -- DRF serializers ------------------------------------------------------------


class OrderSerializer(serializers.Serializer):
    sku = serializers.CharField(max_length=8, help_text="Stock keeping unit")
    quantity = serializers.IntegerField(min_value=1, default=1)
    note = serializers.CharField(required=False, allow_blank=True)
    deliver_on = serializers.DateField(required=False, allow_null=True)

    def validate(self, data):
        if data.get("note") == "refuse":
            raise serializers.ValidationError("refused by validate()")
        return data


def ordered(sku, quantity, note="", deliver_on=None, *, context: CallContext):
    return {
        "sku": sku,
        "quantity": quantity,
        "note": note,
        "deliver_on": deliver_on,
        "source": context.source,
    }


registry.register(ordered, "serialized.order", params_serializer=OrderSerializer)


class GroupSerializer(serializers.ModelSerializer):
    class Meta:
        model = Group
        fields = ["id", "name"]


def _group(name: str) -> Group:
    return Group.objects.get(name=name)


def _groups() -> list:
    return Group.objects.order_by("name")


def _groups_manager():
    return Group.objects


def _no_group():
    return None


registry.register(_group, "groups.get", result_serializer=GroupSerializer)
registry.register(_groups, "groups.list", result_serializer=GroupSerializer)
registry.register(_groups_manager, "groups.manager", result_serializer=GroupSerializer)
registry.register(_no_group, "groups.none", result_serializer=GroupSerializer)
