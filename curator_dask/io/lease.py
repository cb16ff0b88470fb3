"""One writer per output directory: a lease file, refreshed while the run lives.

A run that writes a directory (an output, a cache) first creates ``.curator-lease.json``
in it, holding who writes (host, process id and its start time, run id), since when, and
the time of its last heartbeat. A thread refreshes the heartbeat every
:data:`HEARTBEAT_SECONDS`; the run deletes the file when it ends, also on an error or
Ctrl-C. Another run that finds the file is refused with :class:`OutputInUseError`, which
names the first (host, pid, run id, since when), unless the lease is over:

- **dead**: its owner ran on this host and that process is gone (its pid is free, or
  belongs to a process started later). Taken over at once, with a warning: a run killed
  with SIGKILL is resumed without waiting.
- **stale**: no heartbeat for :data:`STALE_AFTER_SECONDS` (three missed heartbeats). Its
  owner may be dead on another host, or frozen (SIGSTOP, a suspended laptop): the error
  says so, and ``force=True`` (``--force``) takes it over. ``force`` never takes a live
  lease. Hosts' clocks must agree to within the stale time.

The file is created atomically where the filesystem allows it (a hard link on local and
network disks, ``mode="xb"`` in memory). On object stores (S3, GCS, ...) fsspec offers no
exclusive create: the lease is written, then read back after :data:`SETTLE_SECONDS`, and
the run whose id is in the file holds it. Two runs started within that window may both
read their own id back; each heartbeat reads the file again, and a run that finds
another's id there stops (:class:`LeaseLostError`) before it marks anything complete.

Examples
--------
>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> first = Lease(fs, "/lease-doc/out", run_id="a" * 32)
>>> first.acquire()
>>> second = Lease(fs, "/lease-doc/out", run_id="b" * 32)
>>> second.acquire()
Traceback (most recent call last):
...
curator_dask.io.lease.OutputInUseError: '/lease-doc/out' is being written by run aaaaaaaaaaaa...
>>> first.release()
>>> second.acquire(); second.release()
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import socket
import time
from dataclasses import dataclass

import psutil

from curator_dask.errors import CuratorError
from curator_dask.io import atomic

__all__ = [
    "HEARTBEAT_SECONDS",
    "LEASE",
    "SETTLE_SECONDS",
    "STALE_AFTER_SECONDS",
    "Lease",
    "LeaseHolder",
    "LeaseLostError",
    "OutputInUseError",
]

logger = logging.getLogger(__name__)

#: The lease file in a directory being written.
LEASE = ".curator-lease.json"
#: How often a run refreshes its leases.
HEARTBEAT_SECONDS = 10.0
#: A lease without a heartbeat for this long is stale: ``force`` may take it over.
STALE_AFTER_SECONDS = 3 * HEARTBEAT_SECONDS
#: Filesystems without an exclusive create: how long a run waits before reading its
#: lease back to see whether another run's write came after its own.
SETTLE_SECONDS = 1.0


class OutputInUseError(CuratorError, RuntimeError):
    """Another run holds the lease of a directory this run would write."""

    def __init__(self, path: str, holder: LeaseHolder, state: str):
        self.path, self.holder, self.state = path, holder, state
        age = holder.heartbeat_age()
        message = (f"{path!r} is being written by run {holder.run_id[:12]}... (host "
                   f"{holder.host}, pid {holder.pid}, since {_when(holder.since)}; last "
                   f"heartbeat {age:.0f} s ago). Wait for it to finish, or write elsewhere")
        if state == "stale":
            message = (f"{path!r} holds the lease of run {holder.run_id[:12]}... (host "
                       f"{holder.host}, pid {holder.pid}, since {_when(holder.since)}), "
                       f"with no heartbeat for {age:.0f} s: that run has probably stopped. "
                       "If it has, pass force=True (--force) to take the lease over")
        super().__init__(message)


class LeaseLostError(CuratorError, RuntimeError):
    """Another run took over a lease this run held (it found the lease stale or dead)."""


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _process_started(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None


@dataclass(frozen=True)
class LeaseHolder:
    """What a lease file says about the run that holds it."""

    run_id: str
    host: str
    pid: int
    process_started: float
    since: float
    heartbeat: float
    what: str = "output"

    @classmethod
    def of_this_process(cls, run_id: str, what: str) -> LeaseHolder:
        now = time.time()
        return cls(run_id, socket.gethostname(), os.getpid(),
                   _process_started(os.getpid()) or 0.0, now, now, what)

    @classmethod
    def parse(cls, data: bytes) -> LeaseHolder | None:
        try:
            record = json.loads(data)
            return cls(str(record["run_id"]), str(record["host"]), int(record["pid"]),
                       float(record["process_started"]), float(record["since"]),
                       float(record["heartbeat"]), str(record.get("what", "output")))
        except (ValueError, KeyError, TypeError):
            return None

    def to_bytes(self) -> bytes:
        return json.dumps({"format": 1, **self.__dict__}, sort_keys=True).encode()

    def heartbeat_age(self) -> float:
        return max(0.0, time.time() - self.heartbeat)

    def state(self) -> str:
        """``"live"``, ``"dead"`` (this host, process gone) or ``"stale"``."""
        if self.host == socket.gethostname():
            started = _process_started(self.pid)
            if started is None or abs(started - self.process_started) > 1.0:
                return "dead"
        if self.heartbeat_age() > STALE_AFTER_SECONDS:
            return "stale"
        return "live"


class Lease:
    """The lease of one directory for one run (see the module docstring).

    Parameters
    ----------
    fs, directory
        The directory (created if missing) and its filesystem.
    run_id : str
        The run that takes the lease; taking it again in the same run is a no-op.
    what : str
        What the directory is to the run ("output directory", "cache directory"), for
        messages.
    force : bool
        Take over a stale lease (never a live one).
    """

    def __init__(self, fs, directory: str, *, run_id: str, what: str = "output directory",
                 force: bool = False):
        self.fs, self.directory, self.run_id = fs, directory.rstrip("/") or directory, run_id
        self.what, self.force = what, force
        self.path = posixpath.join(self.directory, LEASE)
        self.held = False
        self.lost: LeaseHolder | None = None
        self._created: list[str] = []  # directories taking the lease made, deepest first
        self._holder: LeaseHolder | None = None

    def acquire(self) -> None:
        """Take the lease, or raise :class:`OutputInUseError` naming the run holding it."""
        if self.held:
            return
        directory = self.directory
        while directory and not self.fs.exists(directory):
            self._created.append(directory)
            parent = posixpath.dirname(directory)
            directory = parent if parent != directory else ""
        atomic.make_dirs(self.fs, self.directory)
        mine = LeaseHolder.of_this_process(self.run_id, self.what)
        for _ in range(3):
            if (atomic.create_exclusive(self.fs, self.path, mine.to_bytes())
                    and self._confirmed(mine)):
                self.held, self._holder = True, mine
                return
            other = self.read()
            if other is None:
                if self.fs.exists(self.path):  # being written right now, or broken
                    time.sleep(SETTLE_SECONDS)
                    other = self.read()
                if other is None:
                    atomic.remove(self.fs, self.path, missing_ok=True)
                    continue
            if other.run_id == self.run_id:
                self.held, self._holder = True, other
                return
            state = other.state()
            if state == "live" or (state == "stale" and not self.force):
                self.release_directory()
                raise OutputInUseError(self.directory, other, state)
            if self.read() != other:  # another run took it over meanwhile: look again
                continue
            logger.warning("%s: taking over the lease of run %s (host %s, pid %d, since %s): "
                           "%s", self.directory, other.run_id[:12], other.host, other.pid,
                           _when(other.since), "its process is gone" if state == "dead"
                           else f"no heartbeat for {other.heartbeat_age():.0f} s (force)")
            atomic.remove(self.fs, self.path, missing_ok=True)
        self.release_directory()  # three runs raced for it: this one gives way
        raise OutputInUseError(self.directory, self.read() or mine, "live")

    def _confirmed(self, mine: LeaseHolder) -> bool:
        """Where the create is not exclusive, whether the file still holds our id after
        any racing writer had time to write its own."""
        if atomic.has_exclusive_create(self.fs):
            return True
        time.sleep(SETTLE_SECONDS)
        found = self.read()
        return found is not None and found.run_id == mine.run_id

    def read(self) -> LeaseHolder | None:
        """The holder the lease file names, or None (no file, or not a lease)."""
        try:
            return LeaseHolder.parse(self.fs.cat_file(self.path))
        except FileNotFoundError:
            return None

    def heartbeat(self) -> None:
        """Refresh the heartbeat; notes in :attr:`lost` a lease another run took over."""
        if not self.held or self.lost is not None:
            return
        found = self.read()
        if found is None or found.run_id != self.run_id:
            self.lost = found or self._holder
            logger.error("%s: this run's lease was taken over by run %s", self.directory,
                         found.run_id[:12] if found else "(none: the lease file is gone)")
            return
        self._holder = LeaseHolder(**{**found.__dict__, "heartbeat": time.time()})
        atomic.write_bytes(self.fs, self.path, self._holder.to_bytes())

    def check(self) -> None:
        """Raise :class:`LeaseLostError` if another run took the lease over."""
        if self.lost is not None:
            raise LeaseLostError(
                f"{self.directory!r}: another run took over this run's lease (run "
                f"{self.lost.run_id[:12]}..., host {self.lost.host}, pid {self.lost.pid}); "
                "stopping before anything more is marked complete")

    def release(self) -> None:
        """Delete the lease file if it is still this run's."""
        if not self.held:
            return
        self.held = False
        found = self.read()
        if found is not None and found.run_id == self.run_id:
            atomic.remove(self.fs, self.path, missing_ok=True)
        self.release_directory()

    def release_directory(self) -> None:
        """Remove the directories taking the lease created, if nothing was written there."""
        for directory in self._created:
            if not atomic.remove_empty_directory(self.fs, directory):
                break
        self._created = []
