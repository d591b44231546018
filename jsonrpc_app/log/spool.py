"""
The call log's spool: the files an envelope's rows go to when the log
database cannot take them (see jsonrpc_app.log.store, which decides that),
and their replay into the log, exactly once.

``append_line()`` appends one JSON line per envelope (``serialize()``) to
this process's spool file, fsync'd before the caller gets its answer.
``replay()`` writes every spooled envelope to the log database through
jsonrpc_app.log.sql, the same INSERTs as the live log. Each envelope carries
its unique ``uid``; replay skips uids already in the log, so a process that
dies between inserting and deleting a spool file causes no duplicates.
``status()`` says what waits, for the admin and the flush command.

Files in ``SPOOL_DIR``:

- ``<host>-<pid>-<token>.jsonl``: the file a process appends to;
- ``<...>.<token>.replay``: a file claimed (renamed) by a replay; a replay
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
import uuid
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, models

from ..conf import jsonrpc_settings
from ..models import Call, Envelope
from .process import PerProcess
from .rows import LogRows
from .loader import write_chunk

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
    """The spool file of one process (a forked child appends to one of its own)."""

    def __init__(self):
        self.name = "%s-%d-%s" % (socket.gethostname(), os.getpid(), uuid.uuid4().hex[:8])
        self.lock = threading.Lock()


_current = PerProcess(_ProcessState).get


def file_name():
    """Return the name (without its suffix) of this process's spool file."""
    return _current().name


# -- the lines of a spool file ----------------------------------------------


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


def append_line(directory, name, line):
    """Append ``line`` to the active spool file ``name`` in ``directory`` and fsync it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name + ACTIVE)
    with _current().lock:
        while True:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                opened = _lock_named(fd, path)
                if opened is None:
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


def _lock_named(fd, path):
    """Lock the open file ``fd``; return its stat, or None when ``path`` no longer names it."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    opened = os.fstat(fd)
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return None
    if (named.st_ino, named.st_dev) != (opened.st_ino, opened.st_dev):
        return None
    return opened


def _fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def has_files(directory):
    """Return True when ``directory`` holds spool files to replay."""
    try:
        with os.scandir(directory) as entries:
            return any(e.name.endswith((ACTIVE, CLAIMED)) for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return False


def replay(using, directory=None):
    """
    Replay every spooled envelope of ``directory`` (SPOOL_DIR) into the log
    database ``using`` exactly once; return a FlushResult.

    Stops at the first error that says the database cannot be reached (in
    ``result.error``); what was not written stays in the spool.
    """
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
            break
    return result


def _claim(path):
    """Rename an active spool file to a claimed one (nobody appends to it any more)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        opened = _lock_named(fd, path)
        if opened is None or opened.st_size == 0:
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


def _replay_chunk(items, using, result, rejected):
    """Write a chunk of spooled envelopes exactly once, as the journal's loader does."""
    written, present, refused = write_chunk([(i.line, LogRows(i.envelope, i.calls)) for i in items], using)
    result.written += written
    result.present += present
    rejected.extend(refused)


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
