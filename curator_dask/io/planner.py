"""Partition plans: which bytes or row groups of which files make each partition.

A plan is computed on the client from file sizes (and Parquet footers) alone, before any
data is read, and is a pure function of the input listing and the partitioning settings:
the same files with the same settings give the same plan, so partition indices, and the
ids derived from them, are stable across runs.

When neither ``blocksize`` nor ``files_per_partition`` is given, the blocksize is chosen
from the data and the cluster (:func:`auto_blocksize`): enough partitions for two per
worker thread when the data allows, never more than :data:`DEFAULT_BLOCKSIZE` a
partition, never less than :data:`MIN_AUTO_BLOCKSIZE`, rounded down to a power of two so
that clusters of similar size choose the same plan. The choice is a number of bytes that
callers record (:attr:`~curator_dask.DocumentDataset.blocksize`, the dedup workflows'
fingerprints and output manifests) and can pass back to get the same plan elsewhere.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from dask.utils import parse_bytes

from curator_dask._distributed import scheduler_workers
from curator_dask.bounds import MAX_BYTE_SIZE
from curator_dask.io.files import InputFile, open_input
from curator_dask.io.parquet import open_parquet
from curator_dask.io.partitions import FileSlice, PartitionSpec
from curator_dask.io.warc import warc_splittable

__all__ = ["FileSlice", "PartitionSpec", "plan_partitions", "check_partitioning",
           "auto_blocksize", "resolve_blocksize", "cluster_threads", "DEFAULT_BLOCKSIZE",
           "MIN_AUTO_BLOCKSIZE", "AUTO"]

logger = logging.getLogger(__name__)

#: The largest partition the automatic choice makes, and the blocksize NeMo Curator users
#: know as the default.
DEFAULT_BLOCKSIZE = "256MiB"
#: The smallest partition the automatic choice makes: below this, per-task and per-shuffle
#: overheads outweigh the gain of spreading the work.
MIN_AUTO_BLOCKSIZE = "1MiB"
#: ``blocksize=AUTO`` (or ``None`` with no ``files_per_partition``): choose from the data.
AUTO = "auto"
#: Partitions per worker thread the automatic choice aims for (at least).
PARTITIONS_PER_THREAD = 2


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
        raise ValueError(
            "give either files_per_partition or blocksize, not both "
            f"(got files_per_partition={files_per_partition!r}, blocksize={blocksize!r})"
        )
    if files_per_partition is not None:
        if (not isinstance(files_per_partition, int) or isinstance(files_per_partition, bool)
                or files_per_partition < 1):
            raise ValueError(
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
        raise ValueError(f"blocksize must be a number of bytes, got {blocksize!r}")
    try:
        size = parse_bytes(blocksize)
    except (ValueError, TypeError, OverflowError):  # "1e400" parses to infinity
        size = None
    if not isinstance(size, int) or not 1 <= size <= MAX_BYTE_SIZE:
        raise ValueError(
            f"blocksize must be a number of bytes between 1 and {MAX_BYTE_SIZE} (1 TiB), or "
            f"a size such as '256MiB', got {blocksize!r}")
    return size


def cluster_threads() -> int:
    """Worker threads that will run the partitions: those of the current
    ``distributed`` client's workers, or this machine's CPU count without one (or
    while the client has no workers yet)."""
    try:
        from distributed import default_client

        client = default_client()
    except (ImportError, ValueError):
        client = None
    if client is not None:
        workers = scheduler_workers(client).values()
        threads = sum(int(w.get("nthreads", 0)) for w in workers)
        if threads > 0:
            return threads
    return os.cpu_count() or 1


def auto_blocksize(total_bytes: int, threads: int) -> int:
    """The blocksize the planner chooses when the user gives none.

    ``total_bytes / (2 * threads)``, rounded down to a power of two, between
    :data:`MIN_AUTO_BLOCKSIZE` and :data:`DEFAULT_BLOCKSIZE`: at least two partitions
    per thread when the data is large enough, none larger than 256 MiB. Rounding to a
    power of two makes clusters within a factor of two of each other choose the same
    plan.

    Examples
    --------
    >>> auto_blocksize(100 * 10**6, threads=2) // 2**20       # 25 MB a thread-half -> 16 MiB
    16
    >>> auto_blocksize(500 * 10**6, threads=2) // 2**20
    64
    >>> auto_blocksize(10**12, threads=2) // 2**20            # never above 256 MiB
    256
    >>> auto_blocksize(100_000, threads=64) // 2**20          # never below 1 MiB
    1
    """
    cap = parse_bytes(DEFAULT_BLOCKSIZE)
    floor = parse_bytes(MIN_AUTO_BLOCKSIZE)
    share = total_bytes // max(PARTITIONS_PER_THREAD * max(int(threads), 1), 1)
    if share <= floor:
        return floor
    return min(cap, 1 << (int(share).bit_length() - 1))


def resolve_blocksize(files: Sequence[InputFile], *, files_per_partition: int | None = None,
                      blocksize: int | str | None = None,
                      threads: int | None = None) -> int | None:
    """The blocksize in bytes a plan of ``files`` uses (None with ``files_per_partition``).

    ``blocksize`` None or ``"auto"``: :func:`auto_blocksize` of the files' total size
    and ``threads`` (default :func:`cluster_threads`).
    """
    block = check_partitioning(files_per_partition, blocksize)
    if block is not None or files_per_partition is not None:
        return block
    threads = cluster_threads() if threads is None else threads
    total = sum(f.size for f in files)
    block = auto_blocksize(total, threads)
    logger.info("blocksize: %d bytes, chosen for %d bytes of input and %d worker threads",
                block, total, threads)
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
    [(0, 100), (100, 200), (200, None)]
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


def _byte_ranges(f: InputFile, block: int) -> list[tuple[FileSlice, int]]:
    out = []
    for start in range(0, f.size, block):
        end = start + block
        out.append((FileSlice(f, start, None if end >= f.size else end), min(block, f.size - start)))
    return out


def _split_parquet(f: InputFile, block: int, fs) -> list[tuple[FileSlice, int]]:
    if f.size <= block or fs is None:
        return [(FileSlice(f), f.size)]
    with open_input(fs, f.path) as handle:
        metadata = open_parquet(handle, f.path).metadata
    sizes = [metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)]
    if len(sizes) <= 1:
        return [(FileSlice(f), f.size)]
    # Row-group byte sizes are uncompressed; scale them to the file size so that
    # ``blocksize`` means the same thing for Parquet as for JSONL (bytes on storage).
    scale = f.size / max(sum(sizes), 1)
    out: list[tuple[FileSlice, int]] = []
    group: list[int] = []
    group_bytes = 0
    for i, size in enumerate(sizes):
        scaled = int(size * scale)
        if group and group_bytes + scaled > block:
            out.append((FileSlice(f, row_groups=tuple(group)), group_bytes))
            group, group_bytes = [], 0
        group.append(i)
        group_bytes += scaled
    out.append((FileSlice(f, row_groups=tuple(group)), group_bytes))
    return out
