"""Request builders shared by the endpoint test modules."""

import base64
import json


def post(client, url, body, **extra):
    """POST ``body`` (bytes, str, or anything JSON-able) to ``url``; return the decoded answer (None for 204)."""
    if not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    response = client.generic("POST", url, body, content_type="application/json", **extra)
    assert response.status_code in (200, 204), response.status_code
    return json.loads(response.content) if response.content else None


def req(method, params=None, id=1):
    """Return a JSON-RPC 2.0 request object (params left out when None)."""
    body = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        body["params"] = params
    return body


def basic(username, password):
    """Return the Authorization header of HTTP Basic authentication, as Client keyword arguments."""
    token = base64.b64encode(("%s:%s" % (username, password)).encode()).decode()
    return {"HTTP_AUTHORIZATION": "Basic " + token}
