"""
Writing the call log now, or spooling it: what happens to an envelope's rows
when the log database cannot take them, and how they reach the log later.

``store()`` writes one envelope and its calls in one transaction
(jsonrpc_app.log.sql). When that fails (connection refused, database
restarting, lock timeout...), the rows are appended to this process's spool
file instead (jsonrpc_app.log.spool) -- fsync'd before the caller gets its
answer -- and the database connection is closed so that the next write
opens a fresh one. For ``SPOOL_RETRY_DELAY`` seconds after a connection
failure, envelopes go straight to the spool without trying the database, so
clients never wait on a database that is down. ``store_many()`` does the
same for several envelopes in one transaction (the background writer's).

``flush()`` replays the spool: after the next successful write (by a
background thread, every ``SPOOL_FLUSH_INTERVAL`` seconds while anything is
pending) and from ``manage.py jsonrpc_flush_spool``.
"""

import logging
import threading
import time

from django.db import connections

from ..conf import jsonrpc_settings
from . import escaping, spool, sql
from .process import PerProcess
from .rows import report_failure
from .spool import UNREACHABLE, spool_dir

logger = logging.getLogger("jsonrpc_app")


class _ProcessState:
    """The outage and flush state of one process (reset in a forked child)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.retry_at = {}
        self.pending = None  # None: the directory was not looked at yet
        self.failing = set()
        self.thread = None
        self.stopping = False
        self.wake = threading.Event()


_current = PerProcess(_ProcessState).get


# -- writing ---------------------------------------------------------------


def store(rows, using=None):
    """
    Write ``rows`` (a rows.LogRows) to the log database ``using``
    (LOG_DATABASE), or spool them; return the saved Envelope, or None when
    the rows went to the spool.
    """
    if using is None:
        using = jsonrpc_settings.LOG_DATABASE
    make_storable(rows)
    return _store(rows, using)


def spool_rows(rows, reason, using=None):
    """Append ``rows`` to the spool without trying the database (replayed into ``using`` later); return None."""
    _spool(rows, using or jsonrpc_settings.LOG_DATABASE, reason)
    return None


def make_storable(rows):
    """Escape, in place, what the database cannot hold as it is (jsonrpc_app.log.escaping)."""
    escaping.make_storable(rows.envelope)
    if getattr(rows, "calls_storable", False):
        return  # build_rows() saw from the bodies that no call value needs escaping
    for call in rows.calls:
        escaping.make_storable(call)


def _store(rows, using):
    """store() of rows already made storable."""
    state = _current()
    envelope = rows.envelope
    if state.pending is None:
        state.pending = spool.has_files(spool_dir())
    retry_at = state.retry_at.get(using)
    if retry_at is not None and time.monotonic() < retry_at:
        _spool(rows, using, "the database failed less than SPOOL_RETRY_DELAY ago")
        return None
    try:
        sql.write_rows(rows, using)
    except Exception as exc:
        if using not in state.failing or not isinstance(exc, UNREACHABLE):
            # The first failure of an outage, and every one that is about
            # what was sent: at ERROR, with the (redacted) envelope.
            report_failure(rows)
        _failed(using, exc)
        _spool(rows, using, exc)
        return None
    _succeeded(using, retry_at)
    return envelope


def store_many(rows_list, using=None):
    """
    Write the rows of several envelopes (rows.LogRows) to the log
    database ``using`` (LOG_DATABASE) in one transaction; return their saved
    Envelopes, or None for each that went to the spool.

    When that transaction fails, or cannot be used (the database failed
    less than SPOOL_RETRY_DELAY ago, a transaction of the caller's is open),
    each envelope is stored on its own as store() does: one refused row
    costs no other envelope its place in the log, and an outage spools them
    all the way store() does.
    """
    if using is None:
        using = jsonrpc_settings.LOG_DATABASE
    state = _current()
    for rows in rows_list:
        make_storable(rows)
    retry_at = state.retry_at.get(using)
    if len(rows_list) < 2 or (retry_at is not None and time.monotonic() < retry_at):
        return [_store(rows, using) for rows in rows_list]
    if state.pending is None:
        state.pending = spool.has_files(spool_dir())
    try:
        # write_many() refuses to run inside a transaction of the caller's.
        sql.write_many(rows_list, using)
    except Exception:
        # Rolled back: nothing of the group is in the log.
        for rows in rows_list:
            rows.envelope.pk = None
            rows.envelope._state.adding = True
        return [_store(rows, using) for rows in rows_list]
    _succeeded(using, retry_at)
    return [rows.envelope for rows in rows_list]


def _succeeded(using, retry_at):
    """Note a successful write: the end of an outage, and a spool to replay."""
    state = _current()
    if retry_at is not None or using in state.failing:
        state.retry_at.pop(using, None)
        state.failing.discard(using)
        logger.warning("The call log database %r accepts writes again.", using)
    if state.pending:
        _schedule_flush(using)


def _failed(using, exc):
    """
    Note a failed write and leave the connection usable for the next one:
    a connection that failed to open or broke is closed, and for
    SPOOL_RETRY_DELAY seconds envelopes go straight to the spool.
    """
    state = _current()
    if using not in state.failing:
        state.failing.add(using)
        logger.warning(
            "The call log database %r cannot be written (%s: %s); envelopes go to the spool in %s.",
            using,
            type(exc).__name__,
            str(exc).strip()[:500],
            spool_dir(),
        )
    try:
        conn = connections[using]
    except Exception:
        return
    if conn.in_atomic_block or (conn.connection is not None and not conn.autocommit):
        # The caller's transaction owns this connection; it deals with the error.
        return
    if conn.connection is None:
        unreachable = isinstance(exc, UNREACHABLE)  # could not connect
    else:
        try:
            unreachable = not conn.is_usable()
        except Exception:
            unreachable = True
        if unreachable:
            try:
                conn.close()
            except Exception:
                pass  # close() forgets the connection even when closing it fails
    delay = jsonrpc_settings.SPOOL_RETRY_DELAY
    if unreachable and delay:
        state.retry_at[using] = time.monotonic() + delay


def _spool(rows, using, reason):
    state = _current()
    try:
        line = spool.serialize(rows.envelope, rows.calls, using, reason)
        spool.append_line(spool_dir(), spool.file_name(), line)
    except Exception:
        # The last resort: the envelope's content in the log output.
        report_failure(rows)
        return
    state.pending = True
    if jsonrpc_settings.SPOOL_FLUSH_INTERVAL:
        _start_flusher()


def flush(using=None, directory=None):
    """
    Replay every spooled envelope of ``directory`` (SPOOL_DIR) into the log
    database ``using`` (LOG_DATABASE) exactly once; return a spool.FlushResult.

    Stops at the first error that says the database cannot be reached (in
    ``result.error``); what was not written stays in the spool.
    """
    if using is None:
        using = jsonrpc_settings.LOG_DATABASE
    result = spool.replay(using, directory)
    if result.error is not None:
        _failed(using, result.error)
    elif result.busy == 0 and result.directory.is_dir():
        _current().pending = spool.has_files(result.directory)
    return result


# -- background flush -----------------------------------------------------------


def _schedule_flush(using):
    if jsonrpc_settings.SPOOL_FLUSH_INTERVAL:
        _start_flusher()
        _current().wake.set()
        return
    try:
        result = flush(using)
    except Exception:
        logger.exception("Could not replay the call log spool")
        return
    if result.written or result.rejected:
        logger.warning("Call log spool replayed: %r", result)


def _start_flusher():
    state = _current()
    if state.thread is not None and state.thread.is_alive():
        return
    with state.lock:
        if state.thread is not None and state.thread.is_alive():
            return
        state.thread = threading.Thread(
            target=_flusher, args=(state,), name="jsonrpc-spool-flush", daemon=True
        )
        state.thread.start()


def stop_flusher(timeout=30):
    """Stop this process's background flush thread (it starts again when needed)."""
    state = _current()
    thread = state.thread
    if thread is None:
        return
    state.stopping = True
    state.wake.set()
    thread.join(timeout)
    state.thread = None
    state.stopping = False


def _flusher(state):
    """Replay the spool while it holds anything; then wait to be woken."""
    while True:
        interval = jsonrpc_settings.SPOOL_FLUSH_INTERVAL or 5.0
        state.wake.wait(interval)
        state.wake.clear()
        if state.stopping or state is not _current():
            return
        try:
            if not spool.has_files(spool_dir()):
                state.pending = False
                continue
            result = flush()
            if result.written or result.rejected:
                logger.warning("Call log spool replayed: %r", result)
        except Exception:
            logger.exception("Could not replay the call log spool")
        finally:
            connections.close_all()
