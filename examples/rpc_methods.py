"""
The JSON-RPC 2.0 specification's example methods, plus a few that show the API.

jsonrpc_app imports this module at start-up because ``examples`` is an
installed app and the module is called ``rpc_methods``.
"""

import asyncio
import logging

from jsonrpc_app import JsonRpcError, rpc_method

logger = logging.getLogger(__name__)


@rpc_method
def subtract(minuend: int, subtrahend: int) -> int:
    """Return minuend minus subtrahend.

    Takes its params by position (``[42, 23]``) or by name
    (``{"minuend": 42, "subtrahend": 23}``).
    """
    return minuend - subtrahend


@rpc_method(name="sum")
def sum_(*numbers: float) -> float:
    """Return the sum of any count of numbers."""
    return sum(numbers)


@rpc_method
def update(*args) -> None:
    """Accept anything and do nothing (the specification's notification example)."""
    logger.info("update%r", args)


@rpc_method
def notify_hello(*args) -> None:
    """Do nothing; the specification calls it as a notification."""
    logger.info("notify_hello%r", args)


@rpc_method
def notify_sum(*numbers: float) -> float:
    """Return the sum of the numbers; called as a notification, nothing is answered."""
    return sum(numbers)


@rpc_method
def get_data() -> list:
    """Return the specification's example data: ``["hello", 5]``."""
    return ["hello", 5]


class OutOfStock(JsonRpcError):
    """The SKU asked for has no stock left."""

    code = -32010
    message = "Out of stock"


STOCK = {"X1": 0, "X2": 7}


@rpc_method(name="shop.reserve", errors=[OutOfStock])
def reserve(sku: str, quantity: int = 1) -> dict:
    """Reserve ``quantity`` items of ``sku``.

    Raises OutOfStock (-32010) with the SKU and what is left in ``data`` when
    there are not enough; an unknown SKU is the same error with 0 left.
    """
    left = STOCK.get(sku, 0)
    if left < quantity:
        raise OutOfStock(data={"sku": sku, "available": left})
    return {"sku": sku, "reserved": quantity, "left": left - quantity}


@rpc_method
def echo(value=None):
    """Return the value given, as it came."""
    return value


@rpc_method
async def wait(seconds: float) -> float:
    """Wait ``seconds`` (at most 1) without holding a thread, and return them.

    An ``async def`` method: the calls of a batch wait together, so ten
    ``wait(0.2)`` in one batch are answered in about 0.2 s.
    """
    await asyncio.sleep(min(max(seconds, 0.0), 1.0))
    return seconds
