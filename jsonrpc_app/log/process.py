"""
State that belongs to one process. A forked child (a pre-forking server's
worker) starts with a state of its own: its parent's threads, locks and
queued rows are not the child's to use.
"""

import os


class PerProcess:
    """The value ``factory()`` makes for the current process."""

    __slots__ = ("_factory", "_pid", "_value")

    def __init__(self, factory):
        self._factory = factory
        self._pid = os.getpid()
        self._value = factory()

    def get(self):
        """Return this process's value, made anew the first time a forked child asks."""
        pid = os.getpid()
        if self._pid != pid:
            self._value = self._factory()
            self._pid = pid
        return self._value

    def peek(self):
        """Return this process's value, or None when it has none yet (a forked child)."""
        return self._value if self._pid == os.getpid() else None
