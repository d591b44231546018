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


def seed_usage(now=None, days=2, per_hour=40, seed=7):
    """
    Write a log of ``days`` days of calls to the database, ``per_hour`` an
    hour (a few in each minute of the last hour), with realistic durations
    and a few errors, then roll it up as ``manage.py jsonrpc_rollup --rebuild`` does;
    return the number of calls. For the usage pages' tests and screenshots.
    """
    import random
    from datetime import timedelta

    from django.utils import timezone

    from jsonrpc_app.log import rollup
    from jsonrpc_app.models import Call, Envelope

    rng = random.Random(seed)
    now = now or timezone.now()
    methods = [("subtract", 0.4), ("shop.reserve", 6.0), ("sum", 0.2), ("get_data", 25.0)]
    times = [now - timedelta(minutes=rng.uniform(0, 60)) for _ in range(per_hour * 3)]
    times += [now - timedelta(hours=rng.uniform(1, days * 24)) for _ in range(per_hour * (days * 24 - 1))]
    envelopes = Envelope.objects.bulk_create([Envelope(created_at=at, call_count=1) for at in times])
    calls = []
    for env in envelopes:
        name, typical = rng.choice(methods)
        # A slow spell about five hours ago, as a real service has.
        slow = 4.0 if timedelta(hours=4.5) < now - env.created_at < timedelta(hours=5.5) else 1.0
        error = rng.random() < (0.15 if slow > 1 else 0.02)
        calls.append(Call(
            envelope=env,
            created_at=env.created_at,
            method=name,
            duration_ms=rng.lognormvariate(0, 0.6) * typical * slow,
            outcome="error" if error else "ok",
            error_code=rng.choice([-32602, -32603]) if error else None,
            is_notification=rng.random() < 0.05,
        ))
    Call.objects.bulk_create(calls, batch_size=500)
    rollup.rebuild()
    return len(calls)
