"""
The pytest plugin of jsonrpc_app: the ``rpc`` and ``async_rpc`` fixtures.

Installed with the package, pytest loads it by itself (the ``pytest11``
entry point named ``jsonrpc_app``, as pytest-django's is named ``django``);
``-p no:jsonrpc_app`` turns it off. Without the installed package, load it
with ``pytest_plugins = ["jsonrpc_app.pytest_plugin"]`` in your top-level
conftest.py or ``-p jsonrpc_app.pytest_plugin``.

``rpc`` is a ``jsonrpc_app.test.RpcClient`` over pytest-django's ``client``;
``async_rpc`` one over its ``async_client``. Both use the database (the call
log writes to it): requesting one is enough to allow database access, as
``db`` gives it (add ``@pytest.mark.django_db(transaction=True)`` for a
transactional test). Log a user in through the underlying client::

    def test_private(rpc, django_user_model):
        rpc.client.force_login(django_user_model.objects.create_user("alice"))
        assert rpc.call("whoami")["user"] == "alice"

The endpoint's path is the ini option ``jsonrpc_path`` when set, else
where the URL ``jsonrpc_app:endpoint`` resolves, else ``/rpc/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .test import RpcClient

DEFAULT_PATH = "/rpc/"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "jsonrpc_path",
        "URL path of the JSON-RPC endpoint the rpc fixture calls (default: where "
        "jsonrpc_app:endpoint resolves, else /rpc/)",
        default="",
    )


def endpoint_path(config: pytest.Config) -> str:
    """Return the path the fixtures post to (see the module's docstring)."""
    configured = config.getini("jsonrpc_path")
    if configured:
        return str(configured)
    from django.urls import NoReverseMatch, reverse

    try:
        return reverse("jsonrpc_app:endpoint")
    except NoReverseMatch:
        return DEFAULT_PATH


@pytest.fixture
def rpc(client: Any, db: None, pytestconfig: pytest.Config) -> RpcClient:
    """A ``jsonrpc_app.test.RpcClient`` over pytest-django's ``client``: ``rpc.call("subtract", 42, 23)``."""
    # Imported here: pytest loads this module in every run where the package is
    # installed, and needs nothing of jsonrpc_app (or Django) until a test asks.
    from .test import RpcClient

    return RpcClient(client, endpoint_path(pytestconfig))


@pytest.fixture
def async_rpc(async_client: Any, db: None, pytestconfig: pytest.Config) -> RpcClient:
    """An RpcClient over pytest-django's ``async_client``: ``await async_rpc.acall("subtract", 42, 23)``."""
    from .test import RpcClient

    return RpcClient(async_client, endpoint_path(pytestconfig))
