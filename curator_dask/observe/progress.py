"""Progress of a run: a live bar on a terminal or in a notebook, log lines everywhere else.

One :class:`Progress` serves a whole run. Its label names what runs now (the stages of a
streaming segment, one stage of a batch run, a whole-dataset stage, a dedup phase), and
:meth:`Progress.stage` moves the same bar on to the next one, so a run shows one bar, not
one per segment. On a terminal (or in Jupyter) the bar is tqdm's; with output that is not
a terminal (``curator-dask run p.yaml > log 2>&1``, CI, a batch job) an INFO line is
logged for the current stage every ``curator-dask.progress.interval`` (10 s by default;
Dask configuration, ``DASK_CURATOR_DASK__PROGRESS__INTERVAL=30s``), and one when it ends::

    clean: read_jsonl -> word_count -> write_parquet: 12/40 parts (30%), 1,234 docs/s, ETA 0:45
    clean: read_jsonl -> word_count -> write_parquet: 40/40 parts in 0:32, 1,250 docs/s

:func:`compute` computes Dask collections with the same reporting, counting the tasks of
their whole graph (shuffles included), so whole-dataset work such as a dedup phase moves
the bar too, under the label :func:`phase` gives it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
import time

import dask

from curator_dask._compute import computed_by
from curator_dask.faults import faults_explained, note_phase

__all__ = ["Progress", "chain_label", "compute", "current",
           "distributed_client", "log_interval", "persist", "phase",
           "reporting"]

logger = logging.getLogger(__name__)

#: The run's progress, for code that computes on its behalf (a barrier, a dedup phase).
_CURRENT: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "curator_dask_progress", default=None)
#: The label of the phase being computed (see :func:`phase`).
_PHASE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "curator_dask_phase", default=None)


def chain_label(pipeline: str, steps: list[str]) -> str:
    """A progress line's label for a chain of steps, short enough for one line: the
    first and last step and how many there are, where more than three run together.

    >>> chain_label("demo", ["read_jsonl", "add_id"])
    'demo: read_jsonl -> add_id'
    >>> chain_label("demo", ["read_jsonl", "add_id", "word_count", "write_parquet"])
    'demo: read_jsonl -> ... -> write_parquet (4 steps)'
    """
    if len(steps) <= 3:
        return f"{pipeline}: " + " -> ".join(steps)
    return f"{pipeline}: {steps[0]} -> ... -> {steps[-1]} ({len(steps)} steps)"


def log_interval() -> float:
    """Seconds between progress lines in the log (``curator-dask.progress.interval``)."""
    value = dask.config.get("curator-dask.progress.interval", default="10s")
    return float(dask.utils.parse_timedelta(value, default="s"))


def _clock(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """Counts what is done of the current stage; a bar when interactive, else log lines.

    Parameters
    ----------
    total : int
        Units (partitions, tasks) of the first stage; 0 to start with :meth:`stage`.
    description : str
        The first stage's label.
    enabled : bool
        False: count, show nothing.
    unit : str
        What is counted (``"part"``, ``"task"``), in the bar and the log lines.

    Examples
    --------
    >>> p = Progress(4, "demo: word_count", enabled=False)
    >>> p.update(3, docs=300)
    >>> p.done, p.total, p.docs
    (3, 4, 300)
    >>> p.stage("demo: exact_dedup", 10, unit="task")
    >>> p.description, p.done, p.total
    ('demo: exact_dedup', 0, 10)
    >>> p.close()
    """

    def __init__(self, total: int = 0, description: str = "", enabled: bool = True,
                 unit: str = "part"):
        self.enabled = enabled
        self.interactive = enabled and _interactive()
        self.interval = log_interval()
        self._bar = None
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None
        self._closed = threading.Event()
        self.description, self.total, self.unit = description, int(total), unit
        self.done = self.docs = 0
        self._ended = False
        self._started = self._logged = time.monotonic()
        if description or total:
            self._start_bar()

    # -- what the executors call ----------------------------------------------------------
    def stage(self, description: str, total: int, unit: str = "part") -> None:
        """Move on to the next stage: a new label and total on the same bar."""
        with self._lock:
            self.description, self.total, self.unit = description, int(total), unit
            self.done = self.docs = 0
            self._ended = False
            self._started = self._logged = time.monotonic()
            if self._bar is not None:
                self._bar.reset(total=self.total)
                self._bar.unit = unit
                self._bar.set_description(description, refresh=True)
            else:
                self._start_bar()

    def update(self, n: int = 1, docs: int = 0, **postfix) -> None:
        """``n`` more units done, holding ``docs`` documents."""
        with self._lock:
            self.done += n
            self.docs += docs
            if self._bar is not None:
                if self.docs:
                    postfix = {"docs/s": f"{self.rate():,.0f}", **postfix}
                if postfix:
                    self._bar.set_postfix(postfix, refresh=False)
                self._bar.update(n)
            elif self.enabled and self.total and self.done >= self.total and not self._ended:
                self._ended = True
                self._log_line(final=True)

    def set_total(self, total: int) -> None:
        """The current stage's total, once known."""
        with self._lock:
            self.total = int(total)
            if self._bar is not None:
                self._bar.total = self.total
                self._bar.refresh()

    def rate(self) -> float:
        """Documents a second in the current stage so far."""
        elapsed = time.monotonic() - self._started
        return self.docs / elapsed if elapsed > 0 else 0.0

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()

    @contextlib.contextmanager
    def active(self):
        """Make this the run's progress for :func:`compute` and :func:`current` inside."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)

    # -- showing it ---------------------------------------------------------------------------
    def _start_bar(self) -> None:
        if not self.enabled:
            return
        if self.interactive:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # progress goes to the log
                self.interactive = False
            else:
                self._bar = tqdm(total=self.total, desc=self.description, unit=self.unit,
                                 leave=True, dynamic_ncols=True)
                return
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, daemon=True,
                                            name="curator-dask-progress")
            self._ticker.start()

    def _tick(self) -> None:
        """Log the current stage every interval, also while nothing finishes."""
        while not self._closed.wait(min(1.0, max(self.interval, 0.05))):
            with self._lock:
                if (self.description and self.done < max(self.total, 1)
                        and time.monotonic() - self._logged >= self.interval):
                    self._log_line(final=False)

    def _log_line(self, final: bool) -> None:
        now = time.monotonic()
        self._logged = now
        elapsed = now - self._started
        rate = f", {self.rate():,.0f} docs/s" if self.docs else ""
        if final:
            logger.info("%s: %d/%d %ss in %s%s", self.description, self.done, self.total,
                        self.unit, _clock(elapsed), rate)
            return
        if not self.total and not self.done:  # nothing counted yet (work not split in tasks)
            logger.info("%s: running for %s", self.description, _clock(elapsed))
            return
        if self.total:
            share = f" ({100 * self.done / self.total:.0f}%)"
            eta = (f", ETA {_clock(elapsed * (self.total - self.done) / self.done)}"
                   if self.done else "")
        else:
            share = eta = ""
        logger.info("%s: %d/%d %ss%s%s%s", self.description, self.done, self.total,
                    self.unit, share, rate, eta)


@contextlib.contextmanager
def reporting(enabled: bool = True):
    """A :class:`Progress` for one run (a workflow's), active inside, closed after."""
    progress = Progress(enabled=enabled)
    try:
        with progress.active():
            yield progress
    finally:
        progress.close()


def current() -> Progress | None:
    """The run's progress, inside :meth:`Progress.active`."""
    return _CURRENT.get()


@contextlib.contextmanager
def phase(label: str):
    """Label what :func:`compute` computes inside (``"fuzzy dedup: minhash"``).

    Inside another phase the label is appended to the outer one (``"clean: exact_dedup:
    identify"``). The run's progress (:func:`current`) shows the label from the start,
    so work that :func:`compute` does not count still shows what is running.
    """
    outer = _PHASE.get()
    full = f"{outer}: {label}" if outer else label
    token = _PHASE.set(full)
    progress = current()
    if progress is not None:
        progress.stage(full, 0, unit="task")
    try:
        with computed_by(compute):  # what the layers below compute is counted too
            yield
    except BaseException as err:
        note_phase(err, full)  # a worker that dies for memory is explained by its phase
        raise
    finally:
        _PHASE.reset(token)


def compute(*collections, label: str | None = None):
    """``dask.compute(*collections)``, reporting the tasks of their graph as they finish.

    On a distributed client the tasks are counted on the scheduler (every task the
    results depend on, so a shuffle's tasks move the bar); without one, as the local
    scheduler runs them. The label is ``label``, or the current :func:`phase`'s; the
    progress is the run's (:func:`current`) when there is one, else a bar of its own.
    Without a label, this is ``dask.compute``. Outside any run's guard, a worker that
    died on every try is named as :func:`~curator_dask.faults.faults_explained` names it
    (inside one, the run that opened it names it, with the phase and what it knows of
    its input).
    """
    label = label or _PHASE.get()
    with faults_explained(fallback=True):
        if label is None:
            return dask.compute(*collections)
        with _counted(label) as progress:
            client = distributed_client()
            if client is not None:
                return _compute_on_cluster(client, collections, progress)
            with _LocalCounter(progress):
                return dask.compute(*collections)


@contextlib.contextmanager
def _counted(label: str):
    """The run's progress (or a bar of its own, closed after) moved on to counting the
    tasks of ``label``."""
    progress = current()
    own = progress is None
    if own:
        progress = Progress(0, "")
    progress.stage(label, 0, unit="task")
    try:
        yield progress
    finally:
        if own:
            progress.close()


def distributed_client():
    """The ``distributed`` client that runs dask's graphs here, or None: none is
    running, or ``dask.config`` asks for a local scheduler."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        return None
    scheduler = dask.config.get("scheduler", None)
    if scheduler not in (None, "dask.distributed", "distributed"):
        return None  # dask.config.set(scheduler="threads") asks for local threads
    return client


def persist(*collections):
    """``dask.persist(*collections)``, counting their tasks as :func:`compute` does; on a
    cluster it returns once they are in memory (a labelled phase waits for its work)."""
    label = _PHASE.get()
    if label is None:
        return dask.persist(*collections)
    with _counted(label) as progress:
        client = distributed_client()
        if client is None:
            with _LocalCounter(progress):
                return dask.persist(*collections)
        from distributed import futures_of

        persisted = client.persist(list(collections))
        _track(client, futures_of(persisted), progress)
        return tuple(persisted)


def _compute_on_cluster(client, collections, progress: Progress):
    futures = client.compute(list(collections))
    _track(client, futures, progress)
    return tuple(client.gather(futures))


def _track(client, futures, progress: Progress) -> None:
    """Update ``progress`` with the tasks of ``futures``' graph until all are done."""
    import uuid

    name = f"curator-dask-progress-{uuid.uuid4().hex}"
    try:
        total = client.run_on_scheduler(_watch, [f.key for f in futures], name)
        progress.set_total(total)
        all_done = _all_done(futures)
        while True:
            finished = all_done.wait(min(1.0, max(progress.interval, 0.05)))
            remaining = client.run_on_scheduler(_remaining, name)
            done = total if remaining is None else total - remaining
            if done > progress.done:
                progress.update(done - progress.done)
            if finished:
                break
    finally:
        with contextlib.suppress(Exception):  # reporting must not hide the run's error
            client.run_on_scheduler(_unwatch, name)


def _all_done(futures) -> threading.Event:
    """An event set once every future has finished, failed or been cancelled.

    Not ``distributed.wait(futures, timeout=...)`` in a loop: each wait that times out
    leaves its error in a reference cycle with the frames that hold ``futures``, so the
    futures, their results and their tasks' state on the workers outlived the call until
    the driver's next full garbage collection (a later phase of a workflow ran beside
    every task of the one before).
    """
    all_done = threading.Event()
    pending = len(futures)
    lock = threading.Lock()

    def one_done(_future) -> None:
        nonlocal pending
        with lock:
            pending -= 1
            if pending == 0:
                all_done.set()

    if not futures:
        all_done.set()
    for future in futures:
        future.add_done_callback(one_done)
    return all_done


async def _watch(keys, name, dask_scheduler=None) -> int:
    """On the scheduler: track every task ``keys`` depend on; how many there are."""
    from distributed.diagnostics.progress import Progress as Tracker

    tracker = Tracker(keys, dask_scheduler, complete=True, name=name)
    await tracker.setup()
    return len(tracker.all_keys)


def _remaining(name, dask_scheduler=None) -> int | None:
    tracker = dask_scheduler.plugins.get(name)
    return None if tracker is None else len(tracker.keys)


def _unwatch(name, dask_scheduler=None) -> None:
    if name in dask_scheduler.plugins:
        dask_scheduler.remove_plugin(name=name)


class _LocalCounter:
    """Counts the tasks the local (threaded, synchronous) scheduler finishes."""

    def __init__(self, progress: Progress):
        from dask.callbacks import Callback

        outer = self

        class Counter(Callback):
            def _start_state(self, dsk, state):
                total = sum(len(state[k]) for k in ("ready", "waiting", "running"))
                outer.progress.set_total(total + len(state["finished"]))

            def _posttask(self, key, result, dsk, state, worker_id):
                outer.progress.update(1)

        self.progress = progress
        self.callback = Counter()

    def __enter__(self):
        self.callback.__enter__()
        return self

    def __exit__(self, *exc):
        self.callback.__exit__(*exc)


def _interactive() -> bool:
    """A terminal, or a Jupyter kernel's shell (not merely ipykernel imported: a process
    that runs notebooks imports it too)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and type(shell).__name__ == "ZMQInteractiveShell":
        return True
    stream = sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())
