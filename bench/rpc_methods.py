"""jsonrpc_app's target: the bench methods on the default registry (found by autodiscovery)."""

import asyncio
import time

from jsonrpc_app import rpc_method

from . import methods

rpc_method(methods.subtract)
rpc_method(methods.describe)


# The async benchmark's waits (bench.over_asgi): ten in one batch should take as long as one.


@rpc_method(name="bench.sleep_async")
async def sleep_async(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@rpc_method(name="bench.sleep_safe", thread_sensitive=False)
def sleep_safe(seconds: float) -> float:
    time.sleep(seconds)
    return seconds
