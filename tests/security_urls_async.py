"""tests/security_urls.py's endpoints, at the same paths, served by the async view (AsyncJsonRpcView)."""

from jsonrpc_app.views import AsyncJsonRpcView
from tests.security_urls import endpoints

urlpatterns = endpoints(AsyncJsonRpcView)
