"""jsonrpc_app's target: the bench methods on the default registry (found by autodiscovery)."""

import asyncio
import time

from jsonrpc_app import MethodRegistry, rpc_method

from . import methods

rpc_method(methods.subtract)
rpc_method(methods.describe)

# The same functions marked blocking=False (pure computation: no I/O, no ORM),
# which AsyncJsonRpcView calls on the event loop, with no thread hop; served at
# /rpc-async-inline/ (bench.over_asgi's "app-async-inline").
inline = MethodRegistry("bench-inline")
rpc_method(methods.subtract, registry=inline, blocking=False)
rpc_method(methods.describe, registry=inline, blocking=False)


# The async benchmark's waits (bench.over_asgi): ten in one batch should take as long as one.


@rpc_method(name="bench.sleep_async")
async def sleep_async(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@rpc_method(name="bench.sleep_safe", thread_sensitive=False)
def sleep_safe(seconds: float) -> float:
    time.sleep(seconds)
    return seconds
