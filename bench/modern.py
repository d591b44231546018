"""django-modern-rpc's target: the same functions on an RpcServer of its own."""

from modernrpc.server import RpcServer

from . import methods

server = RpcServer()
server.register_procedure(methods.subtract)
server.register_procedure(methods.describe)
