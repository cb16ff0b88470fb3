"""How a worker process gets memory from the system: fresh pages are zeroed, so reuse them.

Every page a process touches for the first time is zeroed by the kernel, in the task
thread, as system time. Two settings made a worker zero far more than it uses:

- **Transparent huge pages.** numpy (arrays of 4 MiB and more) and Arrow's allocator
  mark their large allocations for huge pages (``madvise(MADV_HUGEPAGE)``), so the
  first touch of any byte zeroes 2 MiB, used or not (builders that reserve room to
  grow, allocator segments that are mostly empty). Exact dedup of 391 MB of JSONL on
  2 one-thread workers spent 0.9 to 1.7 CPU-s of system time, most of it in the
  kernel zeroing huge pages, against 0.5 with huge pages off (user time the same).
- **distributed's ``MALLOC_TRIM_THRESHOLD_=65536``**, which its nanny puts in every
  worker's environment (``distributed.nanny.pre-spawn-environ``). Setting it turns off
  glibc's adaptive thresholds: every allocation of 128 KiB or more is then mapped fresh
  and unmapped when freed, and zeroed again the next time. Left to itself, glibc raises
  the threshold to the largest block freed (up to 32 MiB) and keeps up to twice that
  free before giving it back. Both settings together: 0.35 to 0.42 CPU-s of system
  time on the same work, less than one process with dask's synchronous scheduler
  (0.7 to 1.3).

:class:`WorkerAllocator`, a worker plugin that :func:`~curator_dask.cluster.get_client`
registers with the other two, turns huge pages off for the worker process
(``prctl(PR_SET_THP_DISABLE)``, Linux) and sets glibc's thresholds to what glibc itself
would reach, bounded by the worker's memory limit (:func:`malloc_thresholds`). Both are
set inside the running worker, so they hold for workers started by ``get_client``,
passed-in clusters and ``dask worker`` commands alike (an environment variable would
reach only the workers a nanny here spawns). Memory a worker keeps this way is handed
back when it is paused for memory (:class:`~curator_dask.cluster.TrimWhenPaused`).
Elsewhere than Linux with glibc, the settings that do not apply are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

from distributed import WorkerPlugin

from curator_dask._distributed import worker_memory_limit

__all__ = [
    "MAX_MMAP_THRESHOLD",
    "MIN_MMAP_THRESHOLD",
    "MMAP_SHARE",
    "WorkerAllocator",
    "huge_pages_enabled",
    "libc",
    "libc_function",
    "malloc_thresholds",
]

logger = logging.getLogger(__name__)

#: glibc's ceiling on the size above which a block is mapped on its own (its adaptive
#: threshold never grows past it, and ``mallopt`` refuses more on 64-bit systems).
MAX_MMAP_THRESHOLD = 32 << 20
#: glibc's own starting threshold (128 KiB), below which no setting goes.
MIN_MMAP_THRESHOLD = 128 << 10
#: The mmap threshold as a share of a worker's memory limit. Each of a worker's arenas
#: (one per thread that allocates, up to 8 a core) keeps up to twice it free: on a
#: 512 MiB worker, thresholds of 2 and 8 MiB raised exact dedup's peak by 35 MB (8%),
#: 512 KiB by nothing measurable.
MMAP_SHARE = 1 / 1024
# mallopt(3) parameters and prctl(2) options (Linux headers).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_PR_SET_THP_DISABLE, _PR_GET_THP_DISABLE = 41, 42


@functools.cache
def libc():
    """The C library, or None where it cannot be loaded."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def libc_function(name: str):
    """The C library's function ``name``, or None where it has none (or is not loaded)."""
    library = libc()
    return getattr(library, name, None) if library is not None else None


def malloc_thresholds(memory_limit: int | None) -> tuple[int, int]:
    """glibc's ``(trim, mmap)`` thresholds for a worker with ``memory_limit`` bytes.

    What glibc reaches on its own (blocks of 32 MiB and more mapped on their own, up to
    twice that kept free), the mmap threshold bounded by :data:`MMAP_SHARE` of the
    limit and never below glibc's start, the trim threshold twice it, as glibc sets it.

    >>> [t >> 20 for t in malloc_thresholds(None)], [t >> 20 for t in malloc_thresholds(8 << 30)]
    ([64, 32], [16, 8])
    >>> malloc_thresholds(1 << 20) == (2 * MIN_MMAP_THRESHOLD, MIN_MMAP_THRESHOLD)
    True
    """
    mmap = MAX_MMAP_THRESHOLD
    if memory_limit:
        mmap = max(min(mmap, int(memory_limit * MMAP_SHARE)), MIN_MMAP_THRESHOLD)
    return 2 * mmap, mmap


def huge_pages_enabled() -> bool | None:
    """Whether this process may get transparent huge pages (None: unknown, not Linux)."""
    prctl = libc_function("prctl")
    if prctl is None:
        return None
    disabled = prctl(_PR_GET_THP_DISABLE, 0, 0, 0, 0)
    return None if disabled < 0 else not disabled


class WorkerAllocator(WorkerPlugin):
    """Keep each worker's freed memory for reuse and off huge pages (see the module).

    ``get_client`` registers it with the defaults. ``huge_pages=True`` gives a worker
    transparent huge pages as the system's policy has them (for a stage that gains from
    them); ``reuse_memory=False`` leaves glibc's thresholds as the worker started
    with them. Removed, it gives the worker back the huge pages it had before.
    Registering an instance with other settings replaces the defaults on every worker,
    and a later ``get_client`` keeps it:

    >>> from distributed import Client
    >>> from curator_dask.cluster import WorkerAllocator
    >>> client = Client(processes=False, n_workers=1, dashboard_address=None)
    >>> _ = client.register_plugin(WorkerAllocator())
    >>> client.close()
    """

    name = "curator-dask-worker-allocator"

    def __init__(self, *, huge_pages: bool = False, reuse_memory: bool = True):
        self.huge_pages = huge_pages
        self.reuse_memory = reuse_memory
        # The defaults, registered again (a second get_client), change nothing; other
        # settings replace whatever instance is there.
        self.idempotent = not huge_pages and reuse_memory
        self._huge_pages_before: bool | None = None
        #: ``(trim, mmap)`` thresholds glibc accepted on this worker, None until then (or
        #: where it refused, or with ``reuse_memory=False``).
        self.thresholds: tuple[int, int] | None = None

    def setup(self, worker) -> None:
        self._huge_pages_before = huge_pages_enabled()
        _set_huge_pages(self.huge_pages)
        if self.reuse_memory:
            wanted = malloc_thresholds(worker_memory_limit(worker))
            if _set_malloc_thresholds(*wanted):
                self.thresholds = wanted

    def teardown(self, worker) -> None:
        if self._huge_pages_before is not None:
            _set_huge_pages(self._huge_pages_before)


def _set_huge_pages(enabled: bool) -> None:
    prctl = libc_function("prctl")
    if prctl is None or prctl(_PR_SET_THP_DISABLE, int(not enabled), 0, 0, 0) != 0:
        logger.debug("transparent huge pages left as they are (no prctl, or refused)")


def _set_malloc_thresholds(trim: int, mmap: int) -> bool:
    """Whether glibc took both thresholds."""
    mallopt = libc_function("mallopt")
    if mallopt is None:
        return False
    # mallopt returns 1 on success; a C library without these parameters refuses.
    if not (mallopt(_M_MMAP_THRESHOLD, mmap) and mallopt(_M_TRIM_THRESHOLD, trim)):
        logger.debug("glibc's malloc thresholds left as they are (refused)")
        return False
    return True
