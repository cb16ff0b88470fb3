"""Partition plans: which bytes or row groups of which files make each partition.

A plan is computed on the client from file sizes (and Parquet footers) alone, before any
data is read, and is a pure function of the input listing and the partitioning settings:
the same files with the same settings give the same plan, so partition indices, and the
ids derived from them, are stable across runs.

When neither ``blocksize`` nor ``files_per_partition`` is given, the blocksize is chosen
from the data and the cluster (:func:`auto_blocksize`): enough partitions for two per
worker thread when the data allows, never more than :data:`MAX_AUTO_BLOCKSIZE` a
partition, never less than :data:`MIN_AUTO_BLOCKSIZE`, rounded down to a power of two so
that clusters of similar size choose the same plan, and never more than the workers'
memory holds (:func:`memory_blocksize`). The choice is a number of bytes that callers
record (:attr:`~curator_dask.DocumentDataset.blocksize`, the dedup workflows'
fingerprints and output manifests) and can pass back to get the same plan elsewhere.

Memory
------
A task holds its input partition and what it computes from it: a multiple of the
partition's bytes on disk that depends on the work, its *working set* per input byte
(:data:`WORKING_SETS`, one figure per kind of work, measured by
``benchmarks/working_sets.py``). A worker with ``t`` threads runs ``t`` tasks at once and
holds, in a streaming run, one more partition per thread read ahead. The plan keeps

    t x blocksize x (working set + read factor)
        <= (memory_limit - worker baseline) x MEMORY_FRACTION

on the smallest worker (:func:`memory_blocksize`); the streaming executor's in-flight
window follows from the same budget (:func:`in_flight_per_worker`), and so does the
choice between union-find on one worker and distributed connected components
(:func:`task_budget`). The figures are a table rather than measured on the first
partition of each run so that a plan stays a pure function of the input and the
cluster's shape: partition indices, and the ids ``AddId`` derives from them, must be the
same on every run, and a resumed run must find the plan it started with.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from dask.utils import parse_bytes

from curator_dask._distributed import scheduler_workers
from curator_dask.bounds import MAX_BYTE_SIZE
from curator_dask.errors import InvalidArgumentError
from curator_dask.io.files import InputFile, open_input
from curator_dask.io.parquet import open_parquet
from curator_dask.io.partitions import FileSlice, PartitionSpec
from curator_dask.io.warc import warc_splittable

__all__ = [
    "AUTO",
    "MAX_AUTO_BLOCKSIZE",
    "MEMORY_FRACTION",
    "MIN_AUTO_BLOCKSIZE",
    "MIN_SHUFFLE_BUFFER",
    "SHUFFLE_BUFFER_SHARE",
    "WORKER_BASELINE",
    "WORKING_SETS",
    "FileSlice",
    "PartitionSpec",
    "WorkerMemory",
    "auto_blocksize",
    "check_partitioning",
    "in_flight_per_worker",
    "largest_working_set",
    "memory_blocksize",
    "plan_partitions",
    "resolve_blocksize",
    "shuffle_buffer_bytes",
    "task_budget",
    "task_input_bytes",
    "with_known_limit",
    "worker_memory",
    "working_set_of",
]

logger = logging.getLogger(__name__)

#: The largest partition the automatic choice makes. Larger partitions do not make the
#: work faster (per-task overheads are already below 1% at this size) but raise every
#: worker's peak memory with them; keeping the size fixed once the data fills the
#: threads is what keeps a streaming run's memory flat as the corpus grows.
MAX_AUTO_BLOCKSIZE = "64MiB"
#: The smallest partition the automatic choice makes: below this, per-task and per-shuffle
#: overheads outweigh the gain of spreading the work.
MIN_AUTO_BLOCKSIZE = "1MiB"
#: ``blocksize=AUTO`` (or ``None`` with no ``files_per_partition``): choose from the data.
AUTO = "auto"
#: Partitions per worker thread the automatic choice aims for (at least).
PARTITIONS_PER_THREAD = 2


#: Memory a task holds at its peak per byte of its input partition (as stored: JSONL
#: bytes), by kind of work. Measured by ``benchmarks/working_sets.py`` on the benchmark
#: corpus (``benchmarks/diverse_corpus.py``, 8 and 32 MB partitions, the slope between
#: them, rounded up by about 25%): read 2.1 (2.8 at 32 MB), heuristic filters 8.8 (10.5),
#: MinHash 3.9 (4.1), MinHash with LSH buckets 3.8 (4.1), exact hashing 3.4 (3.9). The
#: others follow from their data: embeddings are the text read and tokenized plus 1.5 KB
#: of float32 a document (MiniLM's 384 dimensions; documents average 2.8 KB), LSH reads
#: signatures (1,040 bytes a document) and writes 16 bytes a band, decontamination
#: holds the words' spans (24 bytes a word of 6). k-means is per byte of the embeddings
#: its task holds (its input): the block, the partitions it is made of, the distances.
WORKING_SETS: dict[str, float] = {
    "read": 3.0,
    "filters": 12.0,
    "minhash": 5.0,
    "lsh": 1.5,
    "exact": 5.0,
    "embeddings": 5.0,
    "kmeans": 3.0,
    "decontamination": 8.0,
}
#: Share of a worker's memory beyond its baseline that the plan fills. distributed
#: spills what a worker holds to disk from 60% of its limit
#: (``distributed.worker.memory.target``), pauses it at 80% and restarts it at 95%; a
#: worker at the plan's peak is at 60% of its limit on large workers and at 85% on a
#: 512 MiB one (paused until a task ends, never restarted), and what is left absorbs
#: what the table misses.
MEMORY_FRACTION = 0.6
#: Memory of a worker process before it runs anything of ours at scale (Python, dask,
#: pandas, pyarrow, numba and the compiled kernels: 287 MB measured on a worker that
#: ran a filter and MinHash on one document).
WORKER_BASELINE = 320 * 2**20
#: Share of a worker's task budget (:func:`task_budget`) that each of distributed's two
#: P2P shuffle buffers may fill: shards waiting to be sent, and shards received waiting
#: to be written to disk. Both fill while a task splits its partition into shards, so
#: the two together take half the budget and the task the other half. distributed sizes
#: them from its config alone (``distributed.p2p.comm.buffer``, 1 GiB, and
#: ``distributed.p2p.storage.buffer``, 100 MiB), more than a 512 MiB worker has.
SHUFFLE_BUFFER_SHARE = 0.25
#: The smallest buffer planned: below it a shuffle sends messages too small to be
#: efficient (distributed batches up to 2 MiB a message, to 10 workers at once).
MIN_SHUFFLE_BUFFER = 16 * 2**20


@dataclass(frozen=True)
class WorkerMemory:
    """The shape of the cluster the plan is for: ``workers``, the most ``threads`` one
    worker runs at once, and the smallest worker's ``limit`` in bytes (None: no limit
    known, then nothing is planned from memory); ``total_threads`` over all workers
    (default ``workers x threads``)."""

    workers: int
    threads: int
    limit: int | None
    total_threads: int = 0

    def __post_init__(self):
        if not self.total_threads:
            object.__setattr__(self, "total_threads", max(self.workers * self.threads, 1))


def worker_memory(client=None) -> WorkerMemory:
    """The workers of ``client`` (default: the current ``distributed`` client): their
    threads and memory limits; without a client (or while it has no workers) this
    machine: its CPUs as threads of one in-process worker whose limit is the machine's
    memory."""
    if client is None:
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            client = None
    if client is not None:
        workers = list(scheduler_workers(client).values())
        threads = [int(w.get("nthreads", 0)) for w in workers]
        if sum(threads) > 0:
            limits = [int(w.get("memory_limit") or 0) for w in workers]
            return WorkerMemory(len(workers), max(threads), min(limits) if all(limits) else None,
                                sum(threads))
    return WorkerMemory(1, os.cpu_count() or 1, _machine_memory())


def with_known_limit(memory: WorkerMemory) -> WorkerMemory:
    """``memory``, or where no worker's limit is known, the same cluster with this
    machine's memory as the limit: the most a worker without a limit can use.

    >>> with_known_limit(WorkerMemory(2, 1, 2**30)).limit == 2**30
    True
    >>> with_known_limit(WorkerMemory(2, 1, None)).limit > 0
    True
    """
    if memory.limit is not None:
        return memory
    return replace(memory, limit=_machine_memory())


def _machine_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def working_set_of(work: str | float | None) -> float:
    """A working set per input byte: a kind of work named in :data:`WORKING_SETS`, a
    number as given, or for None the heuristic filters' (what a pipeline usually runs).

    >>> working_set_of("minhash"), working_set_of(7.5), working_set_of(None)
    (5.0, 7.5, 12.0)
    """
    if work is None:
        return WORKING_SETS["filters"]
    if isinstance(work, str):
        try:
            return WORKING_SETS[work]
        except KeyError:
            raise InvalidArgumentError(
                f"unknown kind of work {work!r}; one of {sorted(WORKING_SETS)} or a number "
                "of bytes of memory per input byte") from None
    value = float(work)
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"a working set is a positive number of bytes per input byte, "
                                   f"got {work!r}")
    return value


def largest_working_set(works) -> float:
    """The largest working set of several stages' ``working_set`` (at least reading's).

    >>> largest_working_set(["read", "minhash"]), largest_working_set([])
    (5.0, 3.0)
    """
    return max([WORKING_SETS["read"], *map(working_set_of, works)])


def task_budget(memory: WorkerMemory) -> int | None:
    """Bytes one worker has for its tasks: ``MEMORY_FRACTION`` of its limit beyond the
    worker's own baseline (None without a limit; at least 1 MiB).

    >>> task_budget(WorkerMemory(2, 1, 2**30)) // 2**20
    422
    """
    if memory.limit is None:
        return None
    return max(int((memory.limit - WORKER_BASELINE) * MEMORY_FRACTION), 1 << 20)


def shuffle_buffer_bytes(memory_limit: int | None) -> int | None:
    """Bytes each P2P shuffle buffer of a worker with ``memory_limit`` bytes may hold:
    :data:`SHUFFLE_BUFFER_SHARE` of its task budget, at least
    :data:`MIN_SHUFFLE_BUFFER` (None without a limit: distributed's own sizes stand).

    >>> shuffle_buffer_bytes(512 * 2**20) // 2**20, shuffle_buffer_bytes(16 * 2**30) // 2**20
    (28, 2409)
    >>> shuffle_buffer_bytes(None) is None
    True
    """
    budget = task_budget(WorkerMemory(1, 1, memory_limit or None))
    if budget is None:
        return None
    return max(int(budget * SHUFFLE_BUFFER_SHARE), MIN_SHUFFLE_BUFFER)


def task_input_bytes(work: str | float | None, memory: WorkerMemory | None = None
                     ) -> int | None:
    """The most input one task of ``work`` may hold on the smallest worker of
    ``memory`` (default :func:`worker_memory`), one task per thread; None without a
    memory limit.

    >>> task_input_bytes("kmeans", WorkerMemory(1, 1, 2**30)) // 2**20
    140
    """
    memory = memory or worker_memory()
    budget = task_budget(memory)
    if budget is None:
        return None
    return int(budget / (max(memory.threads, 1) * working_set_of(work)))


def memory_blocksize(working_set: float, memory: WorkerMemory) -> int | None:
    """The largest blocksize (a power of two) whose tasks fit a worker: each thread
    runs one task of ``working_set`` bytes per input byte and holds one partition read
    ahead (:data:`WORKING_SETS` ``"read"``). None without a memory limit.

    >>> memory_blocksize(12.0, WorkerMemory(2, 1, 2**30)) // 2**20      # 1 GiB workers
    16
    >>> memory_blocksize(5.0, WorkerMemory(2, 1, 2**30)) // 2**20
    32
    >>> memory_blocksize(12.0, WorkerMemory(1, 1, 512 * 2**20)) // 2**20
    4
    """
    budget = task_budget(memory)
    if budget is None:
        return None
    per_byte = max(memory.threads, 1) * (working_set + WORKING_SETS["read"])
    fit = int(budget / per_byte)
    return 1 << (max(fit, 1).bit_length() - 1)


def in_flight_per_worker(partition_bytes: int | None, working_set: float,
                         memory: WorkerMemory) -> int | None:
    """Partitions one worker may hold at once in a streaming run: one task per thread,
    and as many partitions read ahead (up to one per thread) as its budget leaves room
    for. None without a memory limit or partition size (the executor's own default).

    >>> in_flight_per_worker(16 * 2**20, 12.0, WorkerMemory(2, 1, 2**30))
    2
    >>> in_flight_per_worker(256 * 2**20, 12.0, WorkerMemory(2, 1, 2**30))   # too big: 1
    1
    """
    budget = task_budget(memory)
    if budget is None or not partition_bytes:
        return None
    threads = max(memory.threads, 1)
    spare = budget - threads * partition_bytes * working_set
    if spare < 0:
        logger.warning(
            "partitions of %d bytes need about %d bytes each to process, more than a "
            "worker's %d bytes for %d task(s) at once (memory_limit %d): pass a smaller "
            "blocksize, or give workers more memory", partition_bytes,
            int(partition_bytes * working_set), budget, threads, memory.limit)
    ahead = max(int(spare // (partition_bytes * WORKING_SETS["read"])), 0)
    return threads + min(ahead, threads)


def check_partitioning(files_per_partition: int | None, blocksize) -> int | None:
    """Validate the two ways of partitioning; return the blocksize in bytes, or None for
    ``files_per_partition`` or for the automatic choice (``blocksize`` None or ``"auto"``).

    Examples
    --------
    >>> check_partitioning(None, "64MiB"), check_partitioning(None, None)
    (67108864, None)
    >>> check_partitioning(2, None) is None
    True
    """
    if files_per_partition is not None and blocksize not in (None, AUTO):
        raise InvalidArgumentError(
            "give either files_per_partition or blocksize, not both "
            f"(got files_per_partition={files_per_partition!r}, blocksize={blocksize!r})"
        )
    if files_per_partition is not None:
        if (not isinstance(files_per_partition, int) or isinstance(files_per_partition, bool)
                or files_per_partition < 1):
            raise InvalidArgumentError(
                f"files_per_partition must be a positive integer, got {files_per_partition!r}"
            )
        return None
    if blocksize is None or blocksize == AUTO:
        return None
    return _byte_count(blocksize)


def _byte_count(blocksize) -> int:
    """``blocksize`` in bytes: a whole positive number of at most :data:`MAX_BYTE_SIZE`
    (1 TiB), given as a number or a size string; anything else is a ``ValueError``."""
    if isinstance(blocksize, bool):
        raise InvalidArgumentError(f"blocksize must be a number of bytes, got {blocksize!r}")
    try:
        size = parse_bytes(blocksize)
    except (ValueError, TypeError, OverflowError):  # "1e400" parses to infinity
        size = None
    if not isinstance(size, int) or not 1 <= size <= MAX_BYTE_SIZE:
        raise InvalidArgumentError(
            f"blocksize must be a number of bytes between 1 and {MAX_BYTE_SIZE} (1 TiB), or "
            f"a size such as '256MiB', got {blocksize!r}")
    return size


def auto_blocksize(total_bytes: int, threads: int) -> int:
    """The blocksize the planner chooses from the data alone.

    ``total_bytes / (2 * threads)``, rounded down to a power of two, between
    :data:`MIN_AUTO_BLOCKSIZE` and :data:`MAX_AUTO_BLOCKSIZE`: at least two partitions
    per thread when the data is large enough, none larger than 64 MiB. Rounding to a
    power of two makes clusters within a factor of two of each other choose the same
    plan.

    Examples
    --------
    >>> auto_blocksize(100 * 10**6, threads=2) // 2**20       # 25 MB a thread-half -> 16 MiB
    16
    >>> auto_blocksize(500 * 10**6, threads=2) // 2**20
    64
    >>> auto_blocksize(10**12, threads=2) // 2**20            # never above 64 MiB
    64
    >>> auto_blocksize(100_000, threads=64) // 2**20          # never below 1 MiB
    1
    """
    cap = parse_bytes(MAX_AUTO_BLOCKSIZE)
    floor = parse_bytes(MIN_AUTO_BLOCKSIZE)
    share = total_bytes // max(PARTITIONS_PER_THREAD * max(int(threads), 1), 1)
    if share <= floor:
        return floor
    return min(cap, 1 << (int(share).bit_length() - 1))


def resolve_blocksize(files: Sequence[InputFile], *, files_per_partition: int | None = None,
                      blocksize: int | str | None = None,
                      threads: int | None = None, memory: WorkerMemory | None = None,
                      work: str | float | None = None) -> int | None:
    """The blocksize in bytes a plan of ``files`` uses (None with ``files_per_partition``).

    ``blocksize`` None or ``"auto"``: :func:`auto_blocksize` of the files' total size
    and ``threads`` (default: those of ``memory``), and no larger than
    :func:`memory_blocksize` allows for ``work`` (a kind of work of
    :data:`WORKING_SETS` or its working set per input byte; default the heuristic
    filters') on workers of ``memory`` (default :func:`worker_memory`).
    """
    block = check_partitioning(files_per_partition, blocksize)
    if block is not None or files_per_partition is not None:
        return block
    if memory is None:
        memory = worker_memory() if threads is None else WorkerMemory(1, threads, None)
    threads = memory.total_threads if threads is None else threads
    total = sum(f.size for f in files)
    block = auto_blocksize(total, threads)
    fit = memory_blocksize(working_set_of(work), memory)
    if fit is not None and fit < block:
        floor = parse_bytes(MIN_AUTO_BLOCKSIZE)
        if fit < floor:
            logger.warning("a worker's memory (limit %d bytes) leaves room for partitions "
                           "of %d bytes only; using %d", memory.limit, fit, floor)
        block = max(fit, floor)
    logger.info("blocksize: %d bytes, chosen for %d bytes of input, %d worker threads and "
                "a memory limit of %s per worker", block, total, threads,
                memory.limit or "none")
    return block


def plan_partitions(
    files: Sequence[InputFile],
    *,
    files_per_partition: int | None = None,
    blocksize: int | str | None = None,
    fmt: str = "jsonl",
    fs=None,
    threads: int | None = None,
) -> list[PartitionSpec]:
    """Plan partitions for ``files`` (already in their deterministic order).

    ``files_per_partition=N`` groups whole files N at a time. ``blocksize`` groups
    consecutive small files until a partition reaches the blocksize, and splits a large
    file into several partitions: uncompressed JSONL at line boundaries (byte ranges),
    Parquet by row groups (this needs ``fs`` to read the footers), WARC (``fmt="warc"``)
    at record boundaries when plain or gzip with a member per record (``fs`` checks
    which). Compressed JSONL cannot be split and is always read whole. With neither, the
    blocksize is chosen by :func:`resolve_blocksize` (``threads``: the worker threads to
    fill; default, the current cluster's).

    Examples
    --------
    >>> from curator_dask.io.files import InputFile
    >>> files = [InputFile(f"/d/{i}.jsonl", 40, None, f"{i}.jsonl") for i in range(3)]
    >>> [len(p.slices) for p in plan_partitions(files, files_per_partition=2)]
    [2, 1]
    >>> big = [InputFile("/d/big.jsonl", 250, None, "big.jsonl")]
    >>> [(s.start, s.end) for p in plan_partitions(big, blocksize=100) for s in p.slices]
    [(0, 84), (84, 168), (168, None)]
    """
    block = resolve_blocksize(files, files_per_partition=files_per_partition,
                              blocksize=blocksize, threads=threads)
    if files_per_partition is not None:
        groups = [
            tuple(FileSlice(f) for f in files[i: i + files_per_partition])
            for i in range(0, len(files), files_per_partition)
        ]
        return [PartitionSpec(i, g) for i, g in enumerate(groups)]

    pieces: list[tuple[FileSlice, int]] = []
    for f in files:
        pieces.extend(_split_file(f, block, fmt, fs))

    groups: list[tuple[FileSlice, ...]] = []
    current: list[FileSlice] = []
    current_bytes = 0
    for piece, nbytes in pieces:
        if current and current_bytes + nbytes > block:
            groups.append(tuple(current))
            current, current_bytes = [], 0
        current.append(piece)
        current_bytes += nbytes
    if current:
        groups.append(tuple(current))
    return [PartitionSpec(i, g) for i, g in enumerate(groups)]


def _split_file(f: InputFile, block: int, fmt: str, fs) -> list[tuple[FileSlice, int]]:
    if fmt == "parquet":
        return _split_parquet(f, block, fs)
    if fmt == "warc":
        if f.size <= block or fs is None or not warc_splittable(fs, f):
            return [(FileSlice(f), f.size)]
        return _byte_ranges(f, block)
    if f.compression is not None or f.size <= block:
        return [(FileSlice(f), f.size)]
    return _byte_ranges(f, block)


def _even_cuts(total: int, pieces: int) -> list[tuple[int, int]]:
    """``[0, total)`` in at most ``pieces`` consecutive ``(start, stop)`` ranges of one
    size (the last up to ``pieces - 1`` smaller): cut at every block instead, a total
    just over a multiple of the block left a tail of a few KB as a partition of its own
    (a 67 MB file in 64 MiB blocks: 64 MiB and 52 KB), and the workers' shares of the
    real work came out uneven.

    >>> _even_cuts(250, 3)
    [(0, 84), (84, 168), (168, 250)]
    """
    step = -(-total // max(pieces, 1))
    return [(start, min(start + step, total)) for start in range(0, total, step)]


def _byte_ranges(f: InputFile, block: int) -> list[tuple[FileSlice, int]]:
    """``f`` in the fewest ranges of at most ``block`` bytes, of one size."""
    return [(FileSlice(f, start, None if stop >= f.size else stop), stop - start)
            for start, stop in _even_cuts(f.size, -(-f.size // block))]


def _split_parquet(f: InputFile, block: int, fs) -> list[tuple[FileSlice, int]]:
    if f.size <= block or fs is None:
        return [(FileSlice(f), f.size)]
    with open_input(fs, f.path) as handle:
        metadata = open_parquet(handle, f.path).metadata
    sizes = [metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)]
    if not sizes:
        return [(FileSlice(f), f.size)]
    # Row-group byte sizes are uncompressed; scale them to the file size so that
    # ``blocksize`` means the same thing for Parquet as for JSONL (bytes on storage).
    scale = f.size / max(sum(sizes), 1)
    out: list[tuple[FileSlice, int]] = []
    group: list[int] = []
    group_bytes = 0
    for i, size in enumerate(sizes):
        scaled = int(size * scale)
        if scaled > block:  # larger than a partition may be: its rows in parts
            if group:
                out.append((FileSlice(f, row_groups=tuple(group)), group_bytes))
                group, group_bytes = [], 0
            out.extend(_row_ranges(f, i, metadata.row_group(i).num_rows, scaled, block))
            continue
        if group and group_bytes + scaled > block:
            out.append((FileSlice(f, row_groups=tuple(group)), group_bytes))
            group, group_bytes = [], 0
        group.append(i)
        group_bytes += scaled
    if group:
        out.append((FileSlice(f, row_groups=tuple(group)), group_bytes))
    return out


def _row_ranges(f: InputFile, group: int, rows: int, nbytes: int,
                block: int) -> list[tuple[FileSlice, int]]:
    """One row group of ``nbytes`` in the fewest row ranges of about ``block`` bytes each.

    Each range is read by decoding its row group up to the range's last row: more
    decoding, bounded memory for everything after the read (a writer's 20,000-row groups
    of 60 MB got 512 MiB workers restarted where the plan asked for 8 MiB partitions)."""
    pieces = min(rows, -(-nbytes // block))
    if pieces <= 1:
        return [(FileSlice(f, row_groups=(group,)), nbytes)]
    return [(FileSlice(f, row_groups=(group,), rows=(first, stop)),
             nbytes * (stop - first) // rows)
            for first, stop in _even_cuts(rows, pieces)]
