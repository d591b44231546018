"""
The benchmark of jsonrpc_app (``make bench``, or ``python -m bench``).

It is also a tiny Django app (``bench.settings`` installs it) holding the
targets compared: a bare Django JSON view (json and orjson), jsonrpc_app
(logging off and on) and django-modern-rpc, all serving the same methods.
"""
