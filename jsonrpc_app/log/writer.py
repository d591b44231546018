"""
The call log's background writer, for ``JSONRPC["LOG_WRITER"] = "background"``.

Most of what logging an envelope costs is its transaction's commit; a thread
that writes the envelopes of many requests in one transaction pays it once
for all of them, and the request's thread does not wait for the database.

``submit()`` queues the rows of one envelope (a rows.LogRows) and returns
at once. One daemon thread per process (started on the first submit, again
in a forked child) takes what is queued once the oldest envelope has waited
``LOG_WRITER_MAX_DELAY`` seconds, and writes up to ``MAX_GROUP`` envelopes
(``MAX_GROUP_CALLS`` calls) in one transaction on its own connection, through
``store.store_many()``: a group the database refuses is written envelope by
envelope, and what cannot be written goes to the spool, as with the
"request" writer.

Nothing is dropped and no request waits without end: when
``LOG_WRITER_QUEUE_SIZE`` envelopes are waiting, a request writes its own
envelope (``store.store()``, the "request" writer's path).

``flush()`` waits until everything submitted so far is written or spooled;
it runs at interpreter exit (a worker stopped gracefully loses nothing: the
hook is installed by jsonrpc_app.log.install(), from AppConfig.ready()) and
in ``manage.py jsonrpc_flush_spool``. What waits in memory when the process
is killed (SIGKILL, the OOM killer) is lost: at most the last
``LOG_WRITER_MAX_DELAY`` seconds and one group.
"""

import collections
import logging
import threading
import time

from django.db import close_old_connections, connections

from ..conf import jsonrpc_settings
from . import store
from .process import PerProcess

logger = logging.getLogger("jsonrpc_app")

# The most envelopes, and calls, written in one transaction (a group has at
# least one envelope whatever its calls): past a few dozen envelopes the
# commit's share of the cost is small, and a transaction stays short.
MAX_GROUP = 200
MAX_GROUP_CALLS = 5000
# How long flush() waits at interpreter exit before giving up on the thread.
EXIT_TIMEOUT = 60.0


class _ProcessState:
    """The writer of one process (a forked child starts a state of its own)."""

    def __init__(self):
        self.cond = threading.Condition(threading.Lock())
        self.items = collections.deque()  # (rows, using, submitted at)
        self.submitted = 0  # envelopes ever queued
        self.done = 0  # of those, written or spooled
        self.flushing = 0  # flush() calls waiting: write what is queued now
        self.stopping = False
        self.thread = None


# What the parent had queued is the parent's to write.
_state = PerProcess(_ProcessState)
_current = _state.get


def submit(rows, using=None):
    """
    Queue ``rows`` to be written to ``using`` (LOG_DATABASE) by this
    process's writer thread; return True. When the queue is full (or the
    thread cannot start), write them now as the "request" writer does and
    return False.
    """
    if using is None:
        using = jsonrpc_settings.LOG_DATABASE
    state = _current()
    queued = False
    with state.cond:
        if len(state.items) < jsonrpc_settings.LOG_WRITER_QUEUE_SIZE and _start(state):
            state.items.append((rows, using, time.monotonic()))
            state.submitted += 1
            queued = True
            waiting = len(state.items)
            if waiting == 1 or waiting >= MAX_GROUP:
                # The thread waits for a first envelope, or for the oldest
                # one's delay: wake it when there is something new to do.
                state.cond.notify_all()
    if not queued:
        store.store(rows, using)
    return queued


def _start(state):
    """Start the thread of ``state`` unless it runs; return False if it cannot start."""
    if state.thread is not None and state.thread.is_alive():
        return True
    state.stopping = False
    thread = threading.Thread(target=_run, args=(state,), name="jsonrpc-log-writer", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # interpreter shutting down, no more threads
        return False
    state.thread = thread
    return True


def pending():
    """Return how many submitted envelopes are not written (or spooled) yet."""
    state = _current()
    with state.cond:
        return state.submitted - state.done


def flush(timeout=None):
    """
    Wait until every envelope submitted so far is written or spooled;
    return False if ``timeout`` seconds passed first.
    """
    state = _current()
    with state.cond:
        target = state.submitted
        if state.done >= target:
            return True
        if state.thread is None or not state.thread.is_alive():
            _start(state)
        state.flushing += 1
        state.cond.notify_all()
        try:
            return state.cond.wait_for(lambda: state.done >= target, timeout)
        finally:
            state.flushing -= 1


def stop(timeout=None):
    """Write what is queued, then end this process's writer thread (a submit starts another)."""
    state = _current()
    with state.cond:
        thread = state.thread
        if thread is None:
            return True
        state.stopping = True
        state.cond.notify_all()
    thread.join(timeout)
    return not thread.is_alive()


def flush_at_exit():
    """Write what is queued before the interpreter exits (an atexit hook)."""
    state = _state.peek()
    if state is None or state.done == state.submitted:
        return
    if not flush(EXIT_TIMEOUT):
        logger.error(
            "The call log writer did not finish in %d s at exit: %d envelopes are lost.",
            EXIT_TIMEOUT,
            pending(),
        )


def _run(state):
    try:
        while True:
            group = _take(state)
            if group is None:
                return
            try:
                _write(group)
            finally:
                with state.cond:
                    state.done += len(group)
                    state.cond.notify_all()
    finally:
        # This thread's connections, so that no test database or server
        # keeps one open for a thread that is gone.
        connections.close_all()


def _take(state):
    """Return the next group to write, once it is due; None when stopping with nothing queued."""
    delay = jsonrpc_settings.LOG_WRITER_MAX_DELAY or 0
    items = state.items
    with state.cond:
        while True:
            if not items:
                if state.stopping or state is not _current():
                    # Decided under the lock: a submit from now on starts
                    # another thread rather than queue for this one.
                    if state.thread is threading.current_thread():
                        state.thread = None
                    return None
                state.cond.wait()
                continue
            if len(items) >= MAX_GROUP or state.flushing or state.stopping:
                break
            left = items[0][2] + delay - time.monotonic()
            if left <= 0:
                break
            state.cond.wait(left)
        group, calls = [], 0
        while items and len(group) < MAX_GROUP and calls < MAX_GROUP_CALLS:
            item = items.popleft()
            group.append(item)
            calls += len(item[0].calls)
        return group


def _write(group):
    """Write a group, one transaction per database it is for."""
    by_alias = {}
    for rows, using, _at in group:
        by_alias.setdefault(using, []).append(rows)
    # As Django does around a request: drop connections that broke or
    # outlived CONN_MAX_AGE.
    close_old_connections()
    try:
        for using, rows_list in by_alias.items():
            try:
                store.store_many(rows_list, using)
            except Exception:  # pragma: no cover -- store_many() reports and spools
                logger.exception("The call log writer could not write %d envelopes", len(rows_list))
    finally:
        close_old_connections()
