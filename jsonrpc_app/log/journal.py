"""
The call log's journal on disk (``LOG_WRITER = "journal"``, ``LOG_JOURNAL =
"file"``): what the request does to log an envelope is one ``write()`` of one
line to this process's journal file; the loader (jsonrpc_app.log.loader)
writes the lines to the database later, in bulk, off the request.

Files in ``LOG_JOURNAL_DIR``:

- ``<host>-<pid>-<token>.journal``: lines appended by one process, which
  holds an exclusive ``flock()`` on it for as long as it appends. A file
  whose lock can be taken is *sealed*: its process has exited (or was
  killed: the kernel drops the lock) or moved on to a new file
  (``LOG_JOURNAL_ROTATE_BYTES``). Any loader loads a sealed file to its end
  and deletes it.
- ``<...>.journal.pos``: the loader's checkpoint, the byte offset up to
  which the journal is loaded. A loader holds an ``flock()`` on it while it
  loads, so that two loaders never load one journal at once. A loader that
  dies between its transaction's commit and the checkpoint leaves the
  checkpoint behind: the next one loads those lines again, and skips each
  envelope whose uid is in the log already.
- ``<...>.rejected``: lines the database refused for a reason other than
  being unreachable, kept for an operator.

``LOG_JOURNAL_FSYNC`` says when appended lines reach the disk: ``"always"``
(fsync before the answer is sent), ``"interval"`` (a thread of each process
fsyncs every ``LOG_JOURNAL_FSYNC_INTERVAL`` seconds what was appended since),
``"never"`` (the kernel writes it back when it likes). A killed process loses
nothing either way: what it wrote is in the kernel's page cache. Only a
power loss or a kernel crash loses what was not fsync'd yet.
"""

import fcntl
import logging
import os
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path

from django.conf import settings

from ..conf import jsonrpc_settings
from .process import PerProcess

logger = logging.getLogger("jsonrpc_app")

SUFFIX = ".journal"
POS = ".pos"
REJECTED = ".rejected"
# How often (seconds) the request path looks at how much waits to be loaded.
_BACKLOG_EVERY = 1.0


_dir_cache = [object(), None]


def journal_dir():
    """Return LOG_JOURNAL_DIR, else BASE_DIR/journal, else a directory in the system's temp dir."""
    configured = jsonrpc_settings.LOG_JOURNAL_DIR
    if configured:
        if _dir_cache[0] is not configured:  # a Path per setting, not per append
            _dir_cache[:] = [configured, Path(configured)]
        return _dir_cache[1]
    base = getattr(settings, "BASE_DIR", None)
    if base:
        return Path(base) / "journal"
    return Path(tempfile.gettempdir()) / "jsonrpc_app-journal"


class _ProcessState:
    """This process's journal file (a forked child appends to one of its own)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.fd = None
        self.path = None
        self.directory = None
        self.size = 0
        self.dirty = False
        self.syncer = None
        self.backlog = 0
        self.backlog_at = 0.0
        self.warned_at = 0.0


_state = PerProcess(_ProcessState)
_current = _state.get


def _close_inherited():
    """In a forked child: close the parent's journal, whose lock stays the parent's."""
    state = _state._value
    if state is not None and state.fd is not None:
        try:
            os.close(state.fd)
        except OSError:
            pass
        state.fd = None


os.register_at_fork(after_in_child=_close_inherited)


def _open_new(state, directory):
    """Open (and lock) a new journal file of this process in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    name = "%s-%d-%s%s" % (socket.gethostname(), os.getpid(), uuid.uuid4().hex[:12], SUFFIX)
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    _fsync_dir(directory)
    old = state.fd
    state.fd, state.path, state.directory, state.size = fd, path, directory, 0
    if old is not None:
        # Sealed: what it holds is on disk first, then its lock goes.
        try:
            os.fsync(old)
        finally:
            os.close(old)


def append(line):
    """
    Append ``line`` (bytes ending with a newline) to this process's journal;
    return the number of bytes waiting to be loaded, as last looked at.

    Raise OSError when the line cannot be written (the caller reports it).
    """
    state = _current()
    policy = jsonrpc_settings.LOG_JOURNAL_FSYNC
    with state.lock:
        directory = journal_dir()
        if state.fd is None or (state.directory is not directory and state.directory != directory):
            _open_new(state, directory)
        elif state.size >= jsonrpc_settings.LOG_JOURNAL_ROTATE_BYTES:
            _open_new(state, directory)
        fd = state.fd
        n = os.write(fd, line)
        if n != len(line):  # a short write (disk full): the rest, or an OSError
            view = memoryview(line)[n:]
            while view:
                view = view[os.write(fd, view):]
        state.size += len(line)
        if policy == "always":
            _datasync(fd)
        elif policy == "interval":
            state.dirty = True
            if state.syncer is None or not state.syncer.is_alive():
                _start_syncer(state)
        state.backlog += len(line)
        now = time.monotonic()
        if now - state.backlog_at >= _BACKLOG_EVERY:
            state.backlog_at = now
            state.backlog = status(directory).pending_bytes
    return state.backlog


def backlog():
    """Bytes of this host's journal not loaded yet, looked at once a second at most."""
    state = _current()
    now = time.monotonic()
    if now - state.backlog_at >= _BACKLOG_EVERY:
        state.backlog_at = now
        state.backlog = status(journal_dir()).pending_bytes
    return state.backlog


def _start_syncer(state):
    thread = threading.Thread(target=_sync_loop, args=(state,), name="jsonrpc-journal-fsync", daemon=True)
    thread.start()
    state.syncer = thread


def _sync_loop(state):
    """Group fsync: every LOG_JOURNAL_FSYNC_INTERVAL seconds, what was appended since."""
    while state is _current():
        time.sleep(jsonrpc_settings.LOG_JOURNAL_FSYNC_INTERVAL or 0.05)
        if not state.dirty:
            continue
        # The fsync runs on a duplicate of the descriptor, outside the lock:
        # requests keep appending while the disk catches up.
        with state.lock:
            state.dirty = False
            fd = None if state.fd is None else os.dup(state.fd)
            path = state.path
        if fd is None:
            continue
        try:
            _datasync(fd)
        except OSError:
            logger.exception("Could not fsync the call log journal %s", path)
        finally:
            os.close(fd)


def sync():
    """fsync this process's journal now (at exit, and for tests)."""
    state = _state.peek()
    if state is None:
        return
    with state.lock:
        if state.fd is not None:
            os.fsync(state.fd)
            state.dirty = False


def own_path():
    """The path of the journal this process appends to, or None."""
    state = _state.peek()
    return None if state is None else state.path


def close():
    """Seal this process's journal (the next append opens a new one); for tests and exit."""
    state = _state.peek()
    if state is None:
        return
    with state.lock:
        if state.fd is not None:
            try:
                os.fsync(state.fd)
            finally:
                os.close(state.fd)
            state.fd = state.path = state.directory = None
            state.size = 0


# The lines' data and the file's size, without its times: what an append
# needs to survive a power loss (fsync where the system has no fdatasync).
_datasync = getattr(os, "fdatasync", os.fsync)


def _fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- reading, for the loader ----------------------------------------------------


def journals(directory=None):
    """The journal files of ``directory`` (LOG_JOURNAL_DIR), oldest first."""
    directory = Path(directory) if directory is not None else journal_dir()
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry in entries:
        if entry.name.endswith(SUFFIX):
            try:
                found.append((entry.stat().st_mtime, Path(entry.path)))
            except FileNotFoundError:
                continue
    return [path for _mtime, path in sorted(found)]


def is_sealed(path):
    """True when no process appends to ``path`` any more (its lock can be taken)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    finally:
        os.close(fd)


class Checkpoint:
    """
    The loader's hold on one journal: the lock on its ``.pos`` file and the
    offset loaded up to. ``Checkpoint.take(path)`` returns None when another
    loader holds it.
    """

    def __init__(self, path, fd, offset):
        self.path = path
        self.fd = fd
        self.offset = offset

    @classmethod
    def take(cls, path):
        pos_path = Path(str(path) + POS)
        try:
            fd = os.open(pos_path, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if not path.exists():
            # Loaded and deleted by another loader since it was listed.
            _unlink(pos_path)
            os.close(fd)
            return None
        data = os.pread(fd, 64, 0).strip()
        try:
            offset = int(data) if data else 0
        except ValueError:
            offset = 0  # a torn checkpoint: load again, the uids keep it exactly once
        return cls(path, fd, offset)

    def advance(self, offset):
        """Note that the journal is loaded up to ``offset`` (no fsync: reloading is harmless)."""
        os.pwrite(self.fd, b"%020d\n" % offset, 0)
        self.offset = offset

    def finish(self):
        """The journal is sealed and loaded to its end: delete it, then its checkpoint."""
        _unlink(self.path)
        _unlink(Path(str(self.path) + POS))
        self.release()

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def read_lines(path, offset, max_lines, max_bytes=64 * 1024 * 1024):
    """
    Return (lines, end offset) of up to ``max_lines`` complete lines of
    ``path`` from ``offset``; a last line without its newline is not
    returned (it is being written, or was torn).
    """
    with open(path, "rb") as f:
        f.seek(offset)
        lines = []
        end = offset
        read = 0
        for line in f:
            if not line.endswith(b"\n"):
                break
            lines.append(line)
            end += len(line)
            read += len(line)
            if len(lines) >= max_lines or read >= max_bytes:
                break
    return lines, end


def torn_tail(path, offset):
    """The bytes after ``offset`` in ``path`` (a sealed journal's last line without its newline)."""
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read()


def reject(path, lines):
    """Keep ``lines`` (with their reasons, logged) that cannot be loaded in ``path``'s .rejected file."""
    target = Path(str(path)[: -len(SUFFIX)] + REJECTED)
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        data = b"".join(line.rstrip(b"\n") + b"\n" for line in lines)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return target


# -- what an operator sees -------------------------------------------------------


class JournalStatus:
    """How far the loader is behind in ``directory``."""

    def __init__(self, directory, files, pending_bytes, pending_lines, oldest, rejected):
        self.directory = directory
        self.files = files
        self.pending_bytes = pending_bytes
        self.pending_lines = pending_lines  # None when not counted (count=False)
        self.oldest = oldest  # the first unloaded line, or None
        self.rejected = rejected
        self.approximate = False  # pending_lines estimated from a part of the journal

    def __bool__(self):
        return bool(self.pending_bytes or self.rejected)


# status(count=True) reads at most this much to count lines, and estimates the rest.
COUNT_BYTES = 64 * 1024 * 1024


def status(directory=None, count=False):
    """
    Return a JournalStatus of ``directory``: bytes (and with ``count``, lines)
    not loaded yet, and the first unloaded line (its age is the loader's lag).
    Past COUNT_BYTES of unloaded lines, their number is estimated
    (``approximate``).
    """
    directory = Path(directory) if directory is not None else journal_dir()
    files = pending = 0
    lines = 0 if count else None
    counted = 0
    oldest = None
    rejected = 0
    for path in journals(directory):
        try:
            size = path.stat().st_size
            offset = _read_pos(path)
        except FileNotFoundError:
            continue
        if size <= offset:
            continue
        files += 1
        pending += size - offset
        if oldest is None or (count and counted < COUNT_BYTES):
            with open(path, "rb") as f:
                f.seek(offset)
                if oldest is None:
                    oldest = f.readline()
                    f.seek(offset)
                while count and counted < COUNT_BYTES:
                    chunk = f.read(min(1 << 20, size - offset))
                    if not chunk:
                        break
                    lines += chunk.count(b"\n")
                    counted += len(chunk)
    result = JournalStatus(directory, files, pending, lines, oldest, rejected)
    if count and counted and counted < pending:
        result.pending_lines = int(lines * pending / counted)
        result.approximate = True
    if count:
        try:
            for entry in os.scandir(directory):
                if entry.name.endswith(REJECTED):
                    with open(entry.path, "rb") as f:
                        result.rejected += sum(c.count(b"\n") for c in iter(lambda: f.read(1 << 20), b""))
        except FileNotFoundError:
            pass
    return result


def _read_pos(path):
    try:
        with open(str(path) + POS, "rb") as f:
            data = f.read(64).strip()
    except FileNotFoundError:
        return 0
    try:
        return int(data) if data else 0
    except ValueError:
        return 0
