"""
The call log's writing side: the only code that writes ``Envelope`` and ``Call``.

``record()`` is what callers use (the service, for the HTTP view, the
admin's try-it and replay, the CLI). Its steps, one module each, imports
pointing down this list:

- ``journal`` (on disk) and ``redis_journal`` (Redis Streams): the journal
  (``LOG_WRITER = "journal"``, the default), which ``record()`` appends the
  line of an HTTP envelope to (``lines``: the rows as one line, or, for the
  usual envelope, ``split``: the bodies and a duration per call, the calls
  split from the bodies by the loader);
- ``loader``: writes the journal's lines to the database in bulk, off the
  request (a thread of each process, or ``manage.py jsonrpc_log_loader``);
- ``writer``: the background writer thread (``LOG_WRITER = "background"``),
  which ``record()`` hands the rows of HTTP envelopes to;
- ``store``: write now, or append to the spool when the database cannot
  take the rows, and replay the spool later;
- ``spool``: the spool's files and their replay;
- ``sql``: the INSERT statements, the one way rows get into the database;
- ``rows``: building the rows (``build_rows()``): policy, truncation, values
  stored the way the response wrote them;
- ``redaction``: what is never stored (``redaction.REDACTED``);
- ``escaping``: how values a database cannot hold are stored.

Nothing here raises to the caller, and the client's answer stays what it
was: rows the database cannot take go to the spool and reach the log later;
a failure to build the rows, or to write them anywhere, is reported on the
``jsonrpc_app`` logger at ERROR with the (redacted) envelope.

``install()`` connects the receivers and exit hooks the log needs; the
app's ``AppConfig.ready()`` calls it.
"""

import asyncio
import atexit
import logging

from django.core.signals import request_finished

from ..conf import jsonrpc_settings
from . import escaping, journal, lines, loader, split, store, writer
from .rows import build_rows, is_on, report_failure  # noqa: F401 (is_on: the log's public switch)
from .sql import write_uncommitted

logger = logging.getLogger("jsonrpc_app")

_installed = False


def install():
    """
    Connect the call log's hooks, once per process: write again, when a
    request has finished, what a caller's transaction did not commit
    (sql.write_uncommitted), and write what the background writer holds
    when the interpreter exits (writer.flush_at_exit).
    """
    global _installed
    request_finished.connect(write_uncommitted, dispatch_uid="jsonrpc_app.log.write_uncommitted")
    if not _installed:
        _installed = True
        atexit.register(writer.flush_at_exit)
        atexit.register(loader.at_exit)


_FULL_WARNING_EVERY = 60.0
_full = {"warned_at": -_FULL_WARNING_EVERY}


def accepting():
    """
    False when calls must be refused because the journal is full
    (LOG_JOURNAL_FULL = "refuse" and more than LOG_JOURNAL_MAX_BYTES wait to
    be loaded); the endpoint then answers the server error -32050.
    """
    settings = jsonrpc_settings
    if settings.LOG_WRITER != "journal" or settings.LOG_JOURNAL != "file" or settings.LOG_JOURNAL_FULL != "refuse":
        return True
    return journal.backlog() <= settings.LOG_JOURNAL_MAX_BYTES


class Lag:
    """How far the journal's loader is behind: what the admin shows."""

    def __init__(self, where, lines, oldest_age, rejected, approximate=False, error=None):
        self.where = where  # the journal directory, or the Redis stream
        self.lines = lines  # envelopes not loaded yet
        self.oldest_age = oldest_age  # seconds since the oldest of them was received, or None
        self.rejected = rejected  # lines kept aside, refused by the database
        self.approximate = approximate
        self.error = error  # the journal could not be read (Redis down)


def lag():
    """Return the Lag of this host's journal (LOG_JOURNAL); reads the unloaded part of the journal."""
    import time

    if jsonrpc_settings.LOG_JOURNAL == "redis":
        from . import redis_journal

        status = redis_journal.status()
        age = None if status.oldest_at is None else max(0.0, time.time() - status.oldest_at)
        return Lag(status.directory, status.pending_lines, age, status.rejected, error=status.error)
    status = journal.status(count=True)
    age = None
    if status.oldest:
        try:
            from django.utils import timezone

            received = lines.decode(status.oldest).envelope.created_at
            age = max(0.0, (timezone.now() - received).total_seconds())
        except Exception:
            age = None  # a torn first line: the loader sets it aside
    return Lag(str(status.directory), status.pending_lines, age, status.rejected, status.approximate)


def _append(line):
    """Append a line to the journal (LOG_WRITER = "journal"); what the request pays for its log."""
    try:
        if jsonrpc_settings.LOG_JOURNAL == "redis":
            from . import redis_journal

            backlog = redis_journal.append(line)
        else:
            backlog = journal.append(line)
    except Exception:
        # The journal cannot be written (disk full, Redis down): written now,
        # or spooled, as the "request" writer does; the answer stays.
        rows = lines.decode(line)
        if _on_event_loop():
            # Django refuses database work on an event loop's thread (an async
            # view): spooled instead (a file), and replayed into the log later.
            logger.error("Could not append to the JSON-RPC call log journal; spooling the envelope", exc_info=True)
            return store.spool_rows(rows, "the journal could not be appended to")
        logger.error("Could not append to the JSON-RPC call log journal; writing the envelope now", exc_info=True)
        return store.store(rows)
    loader.ensure_running()
    if backlog > jsonrpc_settings.LOG_JOURNAL_MAX_BYTES:
        _warn_full(backlog)
    return None


def _warn_full(backlog):
    import time

    now = time.monotonic()
    if now - _full["warned_at"] >= _FULL_WARNING_EVERY:
        _full["warned_at"] = now
        logger.warning(
            "The call log journal holds %d bytes not loaded yet, over LOG_JOURNAL_MAX_BYTES (%d): "
            "is the loader running, and can it write to the database?",
            backlog,
            jsonrpc_settings.LOG_JOURNAL_MAX_BYTES,
        )


def record(context, records, *, request_body=b"", response_body=b"", http_status=200,
           duration=0.0, envelope=None, remote_addr=None, user_agent=""):
    """
    Log one envelope and its calls as the policy says; return the Envelope.

    Return None when nothing was logged (policy, opt-out), the log could
    not be written, or the envelope went to the journal or was queued for
    the background writer (not saved yet); never raise.
    """
    if records is None:
        return None
    writer_setting = jsonrpc_settings.LOG_WRITER
    if writer_setting == "journal" and context.source == "http":
        # The usual envelope: a split line, no call row built here (log.split).
        line = None
        try:
            fields = split.line(context, records, request_body, response_body, http_status, duration,
                                envelope, remote_addr, user_agent)
            if fields is not None:
                envelope_row, fields, raw = fields
                escaping.make_storable(envelope_row)
                line = lines.encode_split(envelope_row, fields, raw, request_body, response_body)
        except Exception:
            logger.error("Could not make a split JSON-RPC call log journal line; building the rows", exc_info=True)
        if line is not None:
            try:
                return _append(line)
            except Exception:
                logger.error("Could not log a JSON-RPC envelope to the journal", exc_info=True)
                return None
    try:
        rows = build_rows(
            context,
            records,
            request_body=request_body,
            response_body=response_body,
            http_status=http_status,
            duration=duration,
            envelope=envelope,
            remote_addr=remote_addr,
            user_agent=user_agent,
        )
    except Exception:
        # Only what cannot leak a secret: the caller and the method names.
        logger.error(
            "Could not build the JSON-RPC call log for an envelope from %s (methods: %s)",
            getattr(context, "source", "?"),
            ", ".join(str(getattr(r, "method", None)) for r in records[:50]),
            exc_info=True,
        )
        return None
    if rows is None:
        return None
    if writer_setting == "journal" and context.source == "http":
        # Loaded into the database later, off the request (log.loader): no row yet.
        try:
            store.make_storable(rows)
            return _append(lines.encode(rows))
        except Exception:
            report_failure(rows)
            return None
    if writer_setting == "background" and context.source == "http":
        # Written later by this process's writer thread (log.writer); not
        # saved yet, so there is no Envelope to return. The admin's try-it
        # and replay, and the CLI, link to the row they wrote: written now.
        writer.submit(rows)
        return None
    # Written, or spooled when the database cannot take it (log.store).
    try:
        return store.store(rows)
    except Exception:
        # No failure of the log may change the answer (or answer a notification).
        logger.error("Could not write or spool the JSON-RPC call log", exc_info=True)
        return None


def _on_event_loop():
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def appends_only(context):
    """
    Whether ``record()`` for ``context`` only appends a line to a file (the
    journal on disk, not fsync'd before answering): quick enough for an
    event loop's thread. Every other writer may wait on a database or a server.
    """
    settings = jsonrpc_settings
    return (
        settings.LOG_WRITER == "journal"
        and context.source == "http"
        and settings.LOG_JOURNAL == "file"
        and settings.LOG_JOURNAL_FSYNC != "always"
    )


async def arecord(context, records, **kwargs):
    """``record()`` for async callers: in place when it only appends (``appends_only``), else in Django's sync thread."""
    if records is None:
        return None
    if appends_only(context):
        return record(context, records, **kwargs)
    from asgiref.sync import sync_to_async

    return await sync_to_async(record, thread_sensitive=True)(context, records, **kwargs)
