"""Peak memory of a benchmark's processes: their summed RSS, sampled in a thread.

Shared by the benchmark scripts (``from rss import RssSampler``; each script runs with
``benchmarks/`` first on ``sys.path``).
"""

from __future__ import annotations

import itertools
import threading
import time

import psutil

__all__ = ["RssSampler"]


class RssSampler:
    """The summed RSS of some processes: ``baseline`` at the start, ``peak`` over the run,
    and ``largest``, the most one of them held at any sample.

    ``pids`` is a list of process ids, or a function returning them (for processes that
    come and go, like restarted workers). Children are not walked: that scan of /proc
    would cost the benchmark process more CPU than the sampling itself.

    ``timeline`` keeps every sample as ``(time.time(), largest RSS of one process)``, so
    that a benchmark can tell which part of a run held the most (:meth:`peaks_between`).
    """

    def __init__(self, pids, interval: float = 0.05, timeline: bool = False):
        self.pids_fn = pids if callable(pids) else (lambda: list(pids))
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.largest = 0
        self.timeline: list[tuple[float, int]] | None = [] if timeline else None
        self.baseline = self.sample()
        self.peak = self.baseline

    def sample(self) -> int:
        total = largest = 0
        for pid in self.pids_fn():
            try:
                rss = psutil.Process(pid).memory_info().rss
            except psutil.Error:  # the process left
                continue
            total += rss
            largest = max(largest, rss)
        self.largest = max(self.largest, largest)
        if self.timeline is not None:
            self.timeline.append((time.time(), largest))
        return total

    def peaks_between(self, marks: list[tuple[float, str]]) -> dict[str, int]:
        """The largest RSS of one process from each mark ``(time, name)`` to the next (or
        to the end), by name; a name marked twice keeps its larger peak."""
        peaks: dict[str, int] = {}
        bounds = [*sorted(marks), (float("inf"), "")]
        for (start, name), (end, _) in itertools.pairwise(bounds):
            held = [rss for at, rss in self.timeline or () if start <= at < end]
            if held:
                peaks[name] = max(peaks.get(name, 0), *held)
        return peaks

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.sample())
