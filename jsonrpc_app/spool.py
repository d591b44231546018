"""
The call log's spool: where an envelope goes when the log database cannot
take it, and how it reaches the log later, exactly once.

``store()`` writes one envelope and its calls in one transaction. When that
fails (connection refused, database restarting, lock timeout...), the rows
are appended to this process's spool file instead -- one JSON line per
envelope, fsync'd before the caller gets its answer -- and the database
connection is closed so that the next write opens a fresh one. For
``SPOOL_RETRY_DELAY`` seconds after a connection failure, envelopes go
straight to the spool without trying the database, so clients never wait on
a database that is down.

``flush()`` replays the spool: after the next successful write (by a
background thread, every ``SPOOL_FLUSH_INTERVAL`` seconds while anything is
pending) and from ``manage.py jsonrpc_flush_spool``. Each envelope carries
its unique ``uid``; replay skips uids already in the log, so a process that
dies between inserting and deleting a spool file causes no duplicates.

Files in ``SPOOL_DIR``:

- ``<host>-<pid>-<token>.jsonl``: the file a process appends to;
- ``<...>.<token>.replay``: a file claimed (renamed) by a flush; a flush
  that dies leaves it for the next one;
- ``<...>.rejected``: lines the database refused for a reason other than
  being unreachable (or torn lines of a process that died mid-write), kept
  for an operator and never replayed automatically.
"""

import datetime
import decimal
import fcntl
import json
import logging
import os
import socket
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import (
    DatabaseError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connections,
    models,
    transaction,
)

from . import escaping
from .conf import jsonrpc_settings

logger = logging.getLogger("jsonrpc_app")

FORMAT_VERSION = 1
ACTIVE = ".jsonl"
CLAIMED = ".replay"
REJECTED = ".rejected"
CHUNK = 200
# Errors that say the database could not be reached rather than what was sent.
UNREACHABLE = (OperationalError, InterfaceError)


def spool_dir():
    """Return the spool directory: SPOOL_DIR, else BASE_DIR/spool, else a temp dir."""
    configured = jsonrpc_settings.SPOOL_DIR
    if configured:
        return Path(configured)
    base = getattr(settings, "BASE_DIR", None)
    if base:
        return Path(base) / "spool"
    return Path(tempfile.gettempdir()) / "jsonrpc_app-spool"


class _ProcessState:
    """Spool state of one process (reset in a forked child)."""

    def __init__(self):
        self.pid = os.getpid()
        self.name = "%s-%d-%s" % (socket.gethostname(), self.pid, uuid.uuid4().hex[:8])
        self.lock = threading.Lock()
        self.retry_at = {}
        self.pending = None  # None: the directory was not looked at yet
        self.failing = set()
        self.thread = None
        self.stopping = False
        self.wake = threading.Event()


_state = _ProcessState()


def _current():
    global _state
    if _state.pid != os.getpid():
        _state = _ProcessState()
    return _state


# -- writing ---------------------------------------------------------------


def store(rows, using=None):
    """
    Write ``rows`` (a recorder.LogRows) to the log database ``using``
    (LOG_DATABASE), or spool them; return the saved Envelope, or None when
    the rows went to the spool.
    """
    if using is None:
        using = jsonrpc_settings.LOG_DATABASE
    _make_storable(rows)
    return _store(rows, using)


def _make_storable(rows):
    escaping.make_storable(rows.envelope)
    if getattr(rows, "calls_storable", False):
        return  # build_rows() saw from the bodies that no call value needs escaping
    for call in rows.calls:
        escaping.make_storable(call)


def _store(rows, using):
    """store() of rows already made storable."""
    from . import recorder

    state = _current()
    envelope, calls = rows.envelope, rows.calls
    if state.pending is None:
        state.pending = _has_files(spool_dir())
    retry_at = state.retry_at.get(using)
    if retry_at is not None and time.monotonic() < retry_at:
        _spool(rows, using, "the database failed less than SPOOL_RETRY_DELAY ago")
        return None
    try:
        with _db_values(calls, connections[using]):
            recorder.write_rows(rows, using)
    except Exception as exc:
        if using not in state.failing or not isinstance(exc, UNREACHABLE):
            # The first failure of an outage, and every one that is about
            # what was sent: at ERROR, with the (redacted) envelope.
            recorder.report_failure(rows)
        _failed(using, exc)
        _spool(rows, using, exc)
        return None
    _succeeded(using, retry_at)
    return envelope


def store_many(rows_list, using=None):
    """
    Write the rows of several envelopes (recorder.LogRows) to the log
    database ``using`` (LOG_DATABASE) in one transaction; return their saved
    Envelopes, or None for each that went to the spool.

    When that transaction fails, or cannot be used (the database failed
    less than SPOOL_RETRY_DELAY ago, a transaction of the caller's is open),
    each envelope is stored on its own as store() does: one refused row
    costs no other envelope its place in the log, and an outage spools them
    all the way store() does.
    """
    from . import recorder

    if using is None:
        using = jsonrpc_settings.LOG_DATABASE
    state = _current()
    for rows in rows_list:
        _make_storable(rows)
    retry_at = state.retry_at.get(using)
    if len(rows_list) < 2 or (retry_at is not None and time.monotonic() < retry_at):
        return [_store(rows, using) for rows in rows_list]
    if state.pending is None:
        state.pending = _has_files(spool_dir())
    try:
        # write_many() refuses to run inside a transaction of the caller's.
        with _db_values([c for rows in rows_list for c in rows.calls], connections[using]):
            recorder.write_many(rows_list, using)
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


def _jsonable(value):
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, decimal.Decimal, datetime.timedelta)):
        return str(value)
    return value


def _fields(instance, skip=()):
    return {
        f.attname: _jsonable(instance.__dict__.get(f.attname))
        for f in instance._meta.concrete_fields
        if not f.primary_key and f.attname not in skip
    }


def serialize(envelope, calls, using, reason):
    """Return the spool line (bytes, newline included) of one envelope."""
    record = {
        "v": FORMAT_VERSION,
        "uid": str(envelope.uid),
        "spooled_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "database": using,
        "reason": reason if isinstance(reason, str) else "%s: %s" % (type(reason).__name__, reason),
        "envelope": _fields(envelope),
        "calls": [_fields(c, skip=("envelope_id",)) for c in calls],
    }
    return (
        json.dumps(record, ensure_ascii=True, allow_nan=False, separators=(",", ":"), default=str)
        + "\n"
    ).encode("ascii")


def _spool(rows, using, reason):
    state = _current()
    try:
        line = serialize(rows.envelope, rows.calls, using, reason)
        append_line(spool_dir(), state.name, line)
    except Exception:
        # The last resort: the envelope's content in the log output.
        from . import recorder

        recorder.report_failure(rows)
        return
    state.pending = True
    if jsonrpc_settings.SPOOL_FLUSH_INTERVAL:
        _start_flusher()


def append_line(directory, name, line):
    """Append ``line`` to the active spool file ``name`` in ``directory`` and fsync it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name + ACTIVE)
    with _current().lock:
        while True:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                opened = os.fstat(fd)
                try:
                    named = os.stat(path)
                except FileNotFoundError:
                    named = None
                if named is None or (named.st_ino, named.st_dev) != (opened.st_ino, opened.st_dev):
                    # A flush claimed (renamed) the file in between: open a new one.
                    continue
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
                if opened.st_size == 0:
                    _fsync_dir(directory)
                return
            finally:
                os.close(fd)


def _fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- writing rows (live and replay) -------------------------------------------


@contextmanager
def _db_values(instances, connection):
    """Hand JSON values to ``connection`` in a form it reads back unchanged."""
    swapped = []
    if connection.vendor == "postgresql":
        for obj in instances:
            for attname in _json_attnames(type(obj)):
                value = obj.__dict__.get(attname)
                if value is not None and type(value) in (list, dict, float):
                    db_value = escaping.db_json(value, connection)
                    if db_value is not value:
                        swapped.append((obj, attname, value))
                        obj.__dict__[attname] = db_value
    try:
        yield
    finally:
        for obj, attname, value in swapped:
            obj.__dict__[attname] = value


_JSON_ATTNAMES = {}


def _json_attnames(model):
    try:
        return _JSON_ATTNAMES[model]
    except KeyError:
        names = _JSON_ATTNAMES[model] = tuple(
            f.attname for f in model._meta.concrete_fields if isinstance(f, models.JSONField)
        )
        return names


def _insert(items, using):
    """Insert (envelope, calls) pairs; the caller holds the transaction."""
    from .models import Call, Envelope

    connection = connections[using]
    envelopes = [envelope for envelope, _calls in items]
    calls = []
    for envelope, envelope_calls in items:
        calls.extend(envelope_calls)
    with _db_values(calls, connection):
        if len(envelopes) > 1 and connection.features.can_return_rows_from_bulk_insert:
            Envelope.objects.using(using).bulk_create(envelopes)
        else:
            for envelope in envelopes:
                envelope.save(using=using, force_insert=True)
        for envelope, envelope_calls in items:
            for call in envelope_calls:
                call.envelope = envelope
        if calls:
            Call.objects.using(using).bulk_create(calls)


# -- replay -------------------------------------------------------------------


class FlushResult:
    """What one ``flush()`` did."""

    def __init__(self, directory):
        self.directory = directory
        self.files = 0  # spool files replayed completely (and deleted)
        self.written = 0  # envelopes written to the log
        self.present = 0  # envelopes found already in the log (skipped)
        self.rejected = 0  # lines moved to a .rejected file
        self.busy = 0  # files another flush was replaying
        self.error = None  # the error that stopped the flush (database unreachable)

    def __repr__(self):
        return "<FlushResult written=%d present=%d rejected=%d files=%d busy=%d error=%r>" % (
            self.written,
            self.present,
            self.rejected,
            self.files,
            self.busy,
            self.error,
        )


def _has_files(directory):
    try:
        with os.scandir(directory) as entries:
            return any(e.name.endswith((ACTIVE, CLAIMED)) for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False


def flush(using=None, directory=None):
    """
    Replay every spooled envelope of ``directory`` (SPOOL_DIR) into the log
    database ``using`` (LOG_DATABASE) exactly once; return a FlushResult.

    Stops at the first error that says the database cannot be reached (in
    ``result.error``); what was not written stays in the spool.
    """
    if using is None:
        using = jsonrpc_settings.LOG_DATABASE
    directory = Path(directory) if directory is not None else spool_dir()
    result = FlushResult(directory)
    if not directory.is_dir():
        return result
    for path in sorted(directory.glob("*" + ACTIVE)):
        _claim(path)
    for path in sorted(directory.glob("*" + CLAIMED)):
        try:
            _replay_file(path, using, result)
        except UNREACHABLE as exc:
            result.error = exc
            _failed(using, exc)
            break
    state = _current()
    if result.error is None and result.busy == 0:
        state.pending = _has_files(directory)
    return result


def _claim(path):
    """Rename an active spool file to a claimed one (nobody appends to it any more)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        opened = os.fstat(fd)
        try:
            named = os.stat(path)
        except FileNotFoundError:
            return None
        if (named.st_ino, named.st_dev) != (opened.st_ino, opened.st_dev) or opened.st_size == 0:
            return None
        claimed = path.with_name("%s.%s%s" % (path.name[: -len(ACTIVE)], uuid.uuid4().hex[:8], CLAIMED))
        os.rename(path, claimed)
        _fsync_dir(path.parent)
        return claimed
    finally:
        os.close(fd)


def _replay_file(path, using, result):
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            result.busy += 1
            return
        if os.fstat(fd).st_nlink == 0:
            # Replayed and deleted by another flush since we listed it.
            return
        rejected = []  # (line, reason), written out once the file is done
        chunk = []
        with os.fdopen(os.dup(fd), "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    if line.strip():
                        rejected.append((line, "torn line (the process died while writing it)"))
                    break
                if not line.strip():
                    continue
                try:
                    chunk.append(_parse(line))
                except Exception as exc:
                    rejected.append((line, exc))
                if len(chunk) >= CHUNK:
                    _replay_chunk(chunk, using, result, rejected)
                    chunk = []
        if chunk:
            _replay_chunk(chunk, using, result, rejected)
        if rejected:
            _reject(path.with_name(path.name.rsplit(".", 2)[0] + REJECTED), rejected, result)
        os.unlink(path)
        _fsync_dir(path.parent)
        result.files += 1
    finally:
        os.close(fd)


class _Item:
    __slots__ = ("uid", "envelope", "calls", "line")

    def __init__(self, uid, envelope, calls, line):
        self.uid = uid
        self.envelope = envelope
        self.calls = calls
        self.line = line


def _instance(model, data, skip=()):
    kwargs = {}
    for f in model._meta.concrete_fields:
        if f.primary_key or f.attname in skip or f.attname not in data:
            continue
        value = data[f.attname]
        if value is not None and not isinstance(f, models.JSONField):
            value = f.to_python(value)
        kwargs[f.attname] = value
    return model(**kwargs)


def _parse(line):
    from .models import Call, Envelope

    record = json.loads(line)
    if record.get("v") != FORMAT_VERSION:
        raise ValueError("unknown spool format %r" % record.get("v"))
    envelope = _instance(Envelope, record["envelope"])
    calls = [_instance(Call, c, skip=("envelope_id",)) for c in record["calls"]]
    uid = uuid.UUID(record["uid"])
    envelope.uid = uid
    return _Item(uid, envelope, calls, line)


def _reject(path, rejected, result):
    """Keep lines that cannot be replayed in ``path`` (a .rejected file)."""
    for line, reason in rejected:
        logger.error("Call log spool: a line cannot be replayed (%s); kept in %s", reason, path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        data = b"".join(line.rstrip(b"\n") + b"\n" for line, _reason in rejected)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    result.rejected += len(rejected)


def _fix_references(items, using):
    """Null foreign keys (with a database constraint) whose rows are gone."""
    from .models import Call, Envelope

    for model, objects in (
        (Envelope, [i.envelope for i in items]),
        (Call, [c for i in items for c in i.calls]),
    ):
        for f in model._meta.concrete_fields:
            if not f.is_relation or not f.db_constraint or f.attname == "envelope_id":
                continue
            wanted = {o.__dict__.get(f.attname) for o in objects} - {None}
            if not wanted:
                continue
            target = f.related_model._default_manager.db_manager(using)
            present = set(target.filter(pk__in=wanted).values_list("pk", flat=True))
            for o in objects:
                if o.__dict__.get(f.attname) not in (None, *present):
                    o.__dict__[f.attname] = None


def _replay_chunk(items, using, result, rejected):
    from .models import Envelope

    manager = Envelope.objects.using(using)
    try:
        with transaction.atomic(using=using):
            present = set(manager.filter(uid__in=[i.uid for i in items]).values_list("uid", flat=True))
            todo, seen = [], set(present)
            for item in items:
                if item.uid not in seen:
                    seen.add(item.uid)
                    todo.append(item)
            _fix_references(todo, using)
            _insert([(i.envelope, i.calls) for i in todo], using)
    except UNREACHABLE:
        raise
    except DatabaseError:
        # One line the database refuses, or a race on a uid: one by one.
        pass
    else:
        result.written += len(todo)
        result.present += len(items) - len(todo)
        return
    for item in items:
        item.envelope.pk = None
        try:
            with transaction.atomic(using=using):
                if manager.filter(uid=item.uid).exists():
                    result.present += 1
                    continue
                _fix_references([item], using)
                _insert([(item.envelope, item.calls)], using)
        except UNREACHABLE:
            raise
        except IntegrityError as exc:
            if manager.filter(uid=item.uid).exists():
                result.present += 1
            else:
                rejected.append((item.line, exc))
        except DatabaseError as exc:
            rejected.append((item.line, exc))
        else:
            result.written += 1


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
            if not _has_files(spool_dir()):
                state.pending = False
                continue
            result = flush()
            if result.written or result.rejected:
                logger.warning("Call log spool replayed: %r", result)
        except Exception:
            logger.exception("Could not replay the call log spool")
        finally:
            connections.close_all()


# -- what an operator sees -------------------------------------------------------


class SpoolStatus:
    """How much waits in the spool (this host's SPOOL_DIR)."""

    def __init__(self, directory, pending, files, rejected):
        self.directory = directory
        self.pending = pending  # envelopes waiting to be written
        self.files = files
        self.rejected = rejected  # lines kept in .rejected files

    def __bool__(self):
        return bool(self.pending or self.rejected)


def status(directory=None):
    """Return a SpoolStatus of ``directory`` (SPOOL_DIR)."""
    directory = Path(directory) if directory is not None else spool_dir()
    pending = files = rejected = 0
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        entries = []
    for entry in entries:
        if not entry.name.endswith((ACTIVE, CLAIMED, REJECTED)):
            continue
        try:
            with open(entry.path, "rb") as f:
                count = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        except FileNotFoundError:
            continue
        if entry.name.endswith(REJECTED):
            rejected += count
        elif count:
            pending += count
            files += 1
    return SpoolStatus(directory, pending, files, rejected)
