"""
The call log's journal on Redis Streams (``LOG_JOURNAL = "redis"``), for
hosts without a lasting disk (containers, autoscaled workers).

The request appends its envelope's line with ``XADD`` (one round trip).
Loaders read with a consumer group (``XREADGROUP``), write a chunk in one
transaction, and only after it commits acknowledge and delete its entries
(``XACK`` + ``XDEL``): a loader that dies mid-chunk leaves its entries
pending, and the next loader claims them (``XAUTOCLAIM``) once they have been
idle ``LOG_JOURNAL_REDIS_CLAIM_IDLE`` seconds. The uids make a chunk loaded
twice write each envelope once. Lines the database refuses go to the stream
``<stream>:rejected``.

Durability is Redis's: with ``appendonly yes`` and ``appendfsync everysec``
(or ``always``) an acknowledged call survives a Redis restart; with no
persistence (these machines' Redis keeps nothing on disk) it survives a
worker's death, not Redis's.
"""

import os
import socket
import threading
import time
import uuid

from ..conf import jsonrpc_settings

GROUP = "jsonrpc-loaders"
_FIELD = b"d"
_lock = threading.Lock()
_clients = {}
_groups = set()
_consumer = None


def client():
    """The Redis client of LOG_JOURNAL_REDIS_URL (one connection pool per process and URL)."""
    import redis

    url = jsonrpc_settings.LOG_JOURNAL_REDIS_URL
    key = (os.getpid(), url)
    c = _clients.get(key)
    if c is None:
        with _lock:
            c = _clients.get(key)
            if c is None:
                c = _clients[key] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    return c


def stream():
    return jsonrpc_settings.LOG_JOURNAL_REDIS_STREAM


def append(line):
    """XADD ``line`` to the stream; return 0 (the backlog is not looked at per call)."""
    client().xadd(stream(), {_FIELD: line})
    return 0


def consumer_name():
    global _consumer
    if _consumer is None or not _consumer.startswith("%s-%d-" % (socket.gethostname(), os.getpid())):
        _consumer = "%s-%d-%s" % (socket.gethostname(), os.getpid(), uuid.uuid4().hex[:8])
    return _consumer


def _ensure_group(c, name):
    import redis

    if (os.getpid(), name) in _groups:
        return
    try:
        c.xgroup_create(name, GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
    _groups.add((os.getpid(), name))


def _entries(c, name, count):
    """Entries to load: stale ones of dead loaders first, then new ones."""
    idle_ms = int(jsonrpc_settings.LOG_JOURNAL_REDIS_CLAIM_IDLE * 1000)
    claimed = c.xautoclaim(name, GROUP, consumer_name(), idle_ms, start_id="0-0", count=count)
    entries = [e for e in claimed[1] if e and e[1]]
    if len(entries) < count:
        got = c.xreadgroup(GROUP, consumer_name(), {name: ">"}, count=count - len(entries))
        for _stream, items in got or ():
            entries.extend(items)
    return entries


def load(using, result, deadline, write_chunk, decode_all):
    """Load the stream's entries in chunks (see the module's docstring); add to ``result``."""
    import redis

    c = client()
    name = stream()
    try:
        _ensure_group(c, name)
        count = jsonrpc_settings.LOG_LOADER_CHUNK
        while True:
            entries = _entries(c, name, count)
            if not entries:
                return
            ids = [entry_id for entry_id, _fields in entries]
            raw = [fields[_FIELD] for _id, fields in entries if _FIELD in fields]
            items, bad = decode_all(raw)
            written, present, rejected = write_chunk(items, using) if items else (0, 0, [])
            rejected = bad + rejected
            pipe = c.pipeline(transaction=True)
            for line, reason in rejected:
                pipe.xadd(name + ":rejected", {_FIELD: line, b"reason": str(reason)[:1000]})
            pipe.xack(name, GROUP, *ids)
            pipe.xdel(name, *ids)
            pipe.execute()
            result.written += written
            result.present += present
            result.rejected += len(rejected)
            result.calls += sum(r.call_count() for _line, r in items)
            if deadline is not None and time.monotonic() > deadline:
                return
    except redis.RedisError as exc:
        result.error = exc


class RedisStatus:
    def __init__(self, stream, pending_lines, oldest_at, rejected, error=None):
        self.directory = "redis stream %s" % stream
        self.files = 0
        self.pending_lines = pending_lines
        self.pending_bytes = None
        self.oldest_at = oldest_at  # epoch seconds of the oldest entry, or None
        self.rejected = rejected
        self.error = error

    def __bool__(self):
        return bool(self.pending_lines or self.rejected)


def status():
    """How many entries wait in the stream, and since when (the first entry id's milliseconds)."""
    import redis

    name = stream()
    try:
        c = client()
        pending = c.xlen(name)
        oldest = c.xrange(name, count=1)
        rejected = c.xlen(name + ":rejected")
    except redis.RedisError as exc:
        return RedisStatus(name, 0, None, 0, exc)
    oldest_at = None
    if oldest:
        oldest_at = int(oldest[0][0].split(b"-")[0]) / 1000.0
    return RedisStatus(name, pending, oldest_at, rejected)
