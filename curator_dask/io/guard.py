"""The output guard: every path one run writes, checked together before anything is written.

A run (a pipeline run, a dedup workflow, a ``DocumentDataset`` write, a command of the
CLI) makes one :class:`OutputGuard` with the paths it reads, and registers every path it
will write: output and cache directories, reports, downloads. Registering refuses, before
anything is deleted or written, a path that

- is, contains or lies inside an input path or file
  (:class:`~curator_dask.io.errors.OutputOverlapsInputError`), or
- is, contains or lies inside another output of the same run: a report inside the
  output directory, a report equal to a part, the cache inside the output
  (:class:`OutputCollisionError`),

naming both paths. While the guard is active (``with guard:``) it holds the lease of
every directory registered (:mod:`curator_dask.io.lease`): one run writes a directory
at a time.

Code that writes under a run's outputs *claims* the path (:meth:`OutputGuard.claim`,
:func:`guarded`): a path inside a registered directory is part of that output; any
other path is registered as a new output, with the same checks. With no guard active,
:func:`guarded` makes one for that write alone, so ``ds.to_parquet(path)`` on its own is
checked and leased the same way. The files themselves are written only through
:mod:`curator_dask.io.atomic`.

Examples
--------
>>> import pathlib, tempfile
>>> from curator_dask.io.overlap import input_paths
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> (root / "in").mkdir()
>>> guard = OutputGuard([input_paths(str(root / "in"))])
>>> _ = guard.register(str(root / "out"), "output directory")
>>> guard.register(str(root / "out" / "report.html"), "report", kind="file")
Traceback (most recent call last):
...
curator_dask.io.guard.OutputCollisionError: output directory '...' contains the report '...'; ...
>>> guard.register(str(root / "in" / "report.html"), "report", kind="file")
Traceback (most recent call last):
...
curator_dask.io.errors.OutputOverlapsInputError: report '...' lies inside the input path '...'; ...
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from fsspec.core import url_to_fs

from curator_dask.errors import RunStateError
from curator_dask.io.errors import InputError, OutputOverlapsInputError
from curator_dask.io.lease import HEARTBEAT_SECONDS, Lease, LeaseLostError
from curator_dask.io.overlap import InputPaths, check_output_path, relation

__all__ = [
    "GuardedPath",
    "OutputCollisionError",
    "OutputGuard",
    "claim",
    "guarded",
    "run_guard",
]

logger = logging.getLogger(__name__)

_CURRENT: contextvars.ContextVar[OutputGuard | None] = contextvars.ContextVar(
    "curator_dask_output_guard", default=None)


class OutputCollisionError(OutputOverlapsInputError):
    """Two outputs of one run that are the same path, or one inside the other."""

    def __init__(self, what: str, path: str, other_what: str, other: str, relation: str):
        self.path, self.other, self.relation = path, other, relation
        InputError.__init__(
            self,
            f"{what} {path!r} {relation} the {other_what} {other!r}; two outputs of one run "
            "must not overlap, or writing one would overwrite or delete the other. Give "
            f"the {other_what} a path of its own, for example beside the {what}.")


@dataclass(frozen=True)
class GuardedPath:
    """A path a run may write, as its guard checked it: the filesystem, the path
    (without protocol or trailing ``/``), what it is, and the output it belongs to."""

    fs: object
    path: str
    what: str
    root: str
    run_id: str

    def join(self, *names: str) -> str:
        """A path under this one."""
        return "/".join([self.path, *names])


@dataclass
class _Output:
    fs: object
    path: str
    given: str
    what: str
    kind: str
    lease: Lease | None = None


@dataclass
class OutputGuard:
    """The inputs of one run and every path it writes; see the module docstring.

    Parameters
    ----------
    inputs : iterable of InputPaths
        What the run reads (more may be added with :meth:`add_inputs`).
    force : bool
        Take over the lease of a directory whose run stopped heart-beating (stale); a
        live lease is always refused.
    run_id : str, optional
        Recorded in the leases; a new one by default.
    """

    inputs: list[InputPaths] = field(default_factory=list)
    force: bool = False
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    outputs: list[_Output] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.inputs = [i for i in self.inputs if i is not None]
        self._active = False
        self._token = None
        self._stop = threading.Event()
        self._heart: threading.Thread | None = None

    @staticmethod
    def current() -> OutputGuard | None:
        """The guard of the run in progress in this thread, if any."""
        return _CURRENT.get()

    # -- checking paths ---------------------------------------------------------------------
    def add_inputs(self, inputs: Iterable[InputPaths | None]) -> None:
        """Add paths the run reads; every output registered so far must keep clear."""
        new = [i for i in inputs if i is not None]
        for output in self.outputs:
            check_output_path(output.path, new, what=output.what, fs=output.fs)
        self.inputs.extend(new)

    def register(self, path: str, what: str, *, kind: str = "directory",
                 storage_options: dict | None = None, fs=None, lease: bool = True
                 ) -> GuardedPath:
        """Declare an output of the run, after checking it against the inputs and every
        other output; registering the same path again returns it. A directory is leased
        (now, if the guard is active) unless ``lease=False``."""
        fs, stripped = _locate(path, storage_options, fs)
        check_output_path(stripped, self.inputs, what=what, fs=fs)
        for output in self.outputs:
            found = relation(output.fs, output.path, fs, stripped)
            if found == "is" and (output.kind, output.what) == (kind, what):
                return self._guarded(output, output)
            if found is not None:
                raise OutputCollisionError(output.what, output.given, what, str(path), found)
        output = _Output(fs, stripped, str(path), what, kind)
        if kind == "directory" and lease:
            output.lease = Lease(fs, stripped, run_id=self.run_id, what=what, force=self.force)
        self.outputs.append(output)
        if self._active and output.lease is not None:
            try:
                output.lease.acquire()
            except BaseException:
                self.outputs.remove(output)  # not this run's: nothing may be written there
                raise
        return self._guarded(output, output)

    def claim(self, path: str, what: str, *, kind: str = "directory",
              storage_options: dict | None = None, fs=None,
              inputs: Iterable[InputPaths | None] = ()) -> GuardedPath:
        """A path the run writes: part of the registered directory it lies in (or the
        registered file it is), else registered as a new output. It must also keep clear
        of ``inputs`` (what the data written there was read from)."""
        fs, stripped = _locate(path, storage_options, fs)
        check_output_path(stripped, [i for i in inputs if i is not None], what=what, fs=fs)
        for output in self.outputs:
            found = relation(fs, stripped, output.fs, output.path)
            if found == "is" or (found == "lies inside" and output.kind == "directory"):
                check_output_path(stripped, self.inputs, what=what, fs=fs)
                return GuardedPath(fs, stripped, what, output.path, self.run_id)
        return self.register(stripped, what, kind=kind, fs=fs)

    def _guarded(self, output: _Output, root: _Output) -> GuardedPath:
        return GuardedPath(output.fs, output.path, output.what, root.path, self.run_id)

    # -- leases -----------------------------------------------------------------------------
    def check(self) -> None:
        """Raise :class:`~curator_dask.io.lease.LeaseLostError` if another run took over
        a lease of this run (call before marking anything complete)."""
        for output in self.outputs:
            if output.lease is not None:
                output.lease.check()

    def __enter__(self) -> OutputGuard:
        if self._active:
            raise RunStateError("an OutputGuard is entered once")
        self._active = True
        try:
            for output in self.outputs:
                if output.lease is not None:
                    output.lease.acquire()
        except BaseException:
            self._release()
            self._active = False
            raise
        self._token = _CURRENT.set(self)
        self._stop.clear()
        self._heart = threading.Thread(target=self._beat, name="curator-dask-lease",
                                       daemon=True)
        self._heart.start()
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self._stop.set()
        if self._heart is not None:
            self._heart.join()
        _CURRENT.reset(self._token)
        self._active = False
        lost = [o.lease for o in self.outputs if o.lease is not None and o.lease.lost]
        self._release()
        if lost and error is None:
            lost[0].check()

    def _release(self) -> None:
        for output in reversed(self.outputs):
            if output.lease is not None:
                try:
                    output.lease.release()
                except Exception:  # releasing must not hide the run's own error
                    logger.warning("could not release the lease of %s", output.path,
                                   exc_info=True)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            for output in list(self.outputs):
                if output.lease is not None and output.lease.held:
                    try:
                        output.lease.heartbeat()
                    except Exception:  # a filesystem hiccup: the next beat tries again
                        logger.warning("could not refresh the lease of %s", output.path,
                                       exc_info=True)


def _locate(path: str, storage_options: dict | None, fs) -> tuple[object, str]:
    if fs is None:
        fs, path = url_to_fs(str(path), **(storage_options or {}))
    path = str(path)
    return fs, path.rstrip("/") or path


@contextlib.contextmanager
def run_guard(inputs: Iterable[InputPaths | None] = (), *, force: bool = False
              ) -> Iterator[OutputGuard]:
    """The guard of the run in progress (its inputs extended), or a new active one."""
    guard = OutputGuard.current()
    if guard is not None:
        guard.add_inputs(inputs)
        yield guard
        return
    with OutputGuard(list(inputs), force=force) as guard:
        yield guard


@contextlib.contextmanager
def guarded(path: str, what: str, *, inputs: Iterable[InputPaths | None] = (),
            kind: str = "directory", storage_options: dict | None = None, fs=None,
            force: bool = False) -> Iterator[GuardedPath]:
    """``path`` claimed for writing: by the run in progress, or by a guard of its own
    (checked against ``inputs``, its lease held until the block ends)."""
    guard = OutputGuard.current()
    if guard is not None:
        yield guard.claim(path, what, kind=kind, storage_options=storage_options, fs=fs,
                          inputs=inputs)
        return
    guard = OutputGuard([i for i in inputs if i is not None], force=force)
    out = guard.register(path, what, kind=kind, storage_options=storage_options, fs=fs)
    with guard:
        yield out


def claim(path: str, what: str, *, storage_options: dict | None = None, fs=None,
          inputs: Iterable[InputPaths | None] = ()) -> GuardedPath:
    """``path`` claimed by the run in progress, which must have a guard (an executor's
    or a workflow's): for writes that outlive one block, such as a pipeline's output."""
    guard = OutputGuard.current()
    if guard is None:
        raise RunStateError(f"writing {what} {path!r} needs a run in progress: run it "
                            "inside OutputGuard (executors and workflows make one)")
    return guard.claim(path, what, storage_options=storage_options, fs=fs, inputs=inputs)


__all__ += ["LeaseLostError"]
