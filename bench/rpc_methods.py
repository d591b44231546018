"""jsonrpc_app's target: the bench methods on the default registry (found by autodiscovery)."""

from jsonrpc_app import rpc_method

from . import methods

rpc_method(methods.subtract)
rpc_method(methods.describe)
