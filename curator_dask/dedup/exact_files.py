"""Exact deduplication of files in one read: hash while reading, Arrow to the writer.

:class:`~curator_dask.dedup.ExactDeduplicationWorkflow` (and ``curator-dask dedup
exact``) runs this; :class:`~curator_dask.dedup.ExactDuplicates` is the same algorithm on
a lazy dataset. Three steps, each a handful of plain tasks:

1. **hash** (one task per input partition): read the partition as an Arrow table (no
   pandas frame), number its rows (and assign ids as :class:`~curator_dask.AddId` would
   when the input has none), hash every text from the Arrow buffers, and write the
   table to ``cache_path/exact_staging/`` as an uncompressed Arrow IPC file, so the
   input is parsed once. What goes on is ``(id, hash, row)`` only, split by hash into
   ``hash_partitions`` buckets.
2. **group** (one task per bucket): every copy of a text is in one bucket; sort the
   bucket by hash, id and row, write the groups of two or more (the duplicate list,
   ``cache_path/exact_duplicates/``, as ``identify`` returns it), and mark the list
   complete. Every row of a group but the first (the lowest id, then the first row) is
   to be removed.
3. **remove and write** (one task per input partition): memory-map the staged table,
   drop the listed rows (checking that each still carries its listed id), and write it
   with ``pyarrow.parquet``. The list reaches the partitions either whole (``broadcast``:
   one sorted array sent once to each worker) or split by partition (``shuffle``: each
   task gets only its rows from each bucket); the output is the same.

The staged copy is deleted once the output is written. A rerun that finds the list
complete skips steps 1-2 and reads the staged copy if it is whole, or the input again.

An input that fits comfortably in the workers' memory (twice its size under a quarter of
it, :data:`~curator_dask.dedup.held.IN_MEMORY_FRACTION`) is not staged: the three steps
run as one graph and each partition's table stays in memory from its hash task to its
write task, on the same worker. A task between the group and write steps marks the list
complete and prepares the output directory, so a crash while writing still leaves a list
to resume from.
"""

from __future__ import annotations

import logging
import posixpath
import uuid
from dataclasses import dataclass

import dask
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from curator_dask.dataset import WriteResult
from curator_dask.dedup.exact import (
    DUPLICATE_REASON,
    HASH_FIELD,
    NULL_TEXT_REASON,
    default_hash_partitions,
    hex_digests,
)
from curator_dask.dedup.exact_arrow import (
    ArrowInput,
    HashSettings,
    hash_input,
    split_by,
)
from curator_dask.dedup.held import fits_in_memory
from curator_dask.dedup.ids import ROW_FIELD, first_row, partition_of_rows
from curator_dask.dedup.removal import REASON_FIELD, listed_rows_mask
from curator_dask.dropped import split_counts, sum_dropped
from curator_dask.errors import InvalidArgumentError
from curator_dask.io import atomic
from curator_dask.io.guard import GuardedPath, claim, guarded
from curator_dask.io.output_state import (
    mark_complete,
    own_files,
    read_manifest,
    remove_own_files,
)
from curator_dask.io.writers import WriteSpec, prepare_output, write_part, write_partition
from curator_dask.observe import progress
from curator_dask.task_names import task_name

__all__ = [
    "STAGING_DIR",
    "ExactFilesRun",
    "drop_listed",
    "route_removals",
    "rows_to_remove",
]

logger = logging.getLogger(__name__)

#: The subdirectory of a ``cache_path`` that holds the staged input (while a run lasts).
STAGING_DIR = "exact_staging"
_HI, _LO = "_hash_hi", "_hash_lo"


def _task(phase: str) -> str:
    """What the tasks of ``phase`` are called (``exact_dedup/hash``)."""
    return task_name(phase, scope="exact_dedup")


def _hash_partition(source: ArrowInput, spec, buckets: int, stage: WriteSpec | None,
                    keep_table: bool = False) -> dict:
    hashed = hash_input(source, spec)
    if stage is not None:
        write_part(hashed.table, stage, source.fs, (spec.index,))
    pieces = split_by((hashed.lo % np.uint64(buckets)).astype(np.int64), buckets,
                      {source.settings.id_field: hashed.ids, _HI: hashed.hi, _LO: hashed.lo,
                       ROW_FIELD: hashed.rows})
    return {"pieces": pieces, "rows": hashed.table.num_rows, "nulls": int(hashed.nulls.sum()),
            "dropped": hashed.dropped, "table": hashed.table if keep_table else None}


def _piece(hashed: dict, bucket: int) -> pa.Table:
    return hashed["pieces"][bucket]


# -- step 2: group ----------------------------------------------------------------------------

def _group_bucket(pieces: list[pa.Table], bucket: int, settings: HashSettings,
                  listing: WriteSpec, fs) -> dict:
    """Write the groups of bucket ``bucket`` (the duplicate list's part); return its size."""
    table = pa.concat_tables(pieces)
    table = table.sort_by([(_HI, "ascending"), (_LO, "ascending"),
                           (settings.id_field, "ascending"), (ROW_FIELD, "ascending")])
    hi = table.column(_HI).to_numpy()
    lo = table.column(_LO).to_numpy()
    same = np.zeros(len(hi), dtype=bool)
    same[1:] = (hi[1:] == hi[:-1]) & (lo[1:] == lo[:-1])
    grouped = same.copy()
    grouped[:-1] |= same[1:]
    members = table.filter(pa.array(grouped))
    packed = np.column_stack([members.column(_HI).to_numpy(),
                              members.column(_LO).to_numpy()]).astype(">u8").tobytes()
    listed = pa.table({settings.id_field: members.column(settings.id_field),
                       HASH_FIELD: hex_digests(packed),
                       ROW_FIELD: members.column(ROW_FIELD)})
    write_part(listed, listing, fs, (bucket,))
    return {"rows": listed.num_rows}


# -- step 3: remove and write -----------------------------------------------------------------

def rows_to_remove(path: str, fs, id_field: str) -> pa.Table:
    """``(_row, id)`` to remove from one part of the duplicate list: all but the first
    row of each group by hash, id, row (the list holds whole groups), sorted by row."""
    with fs.open(path, "rb") as handle:
        listed = pq.read_table(handle, columns=[id_field, HASH_FIELD, ROW_FIELD])
    listed = listed.sort_by([(HASH_FIELD, "ascending"), (id_field, "ascending"),
                             (ROW_FIELD, "ascending")])
    hashes = listed.column(HASH_FIELD)
    same = np.zeros(listed.num_rows, dtype=bool)
    if listed.num_rows > 1:
        same[1:] = pc.equal(hashes.slice(1), hashes.slice(0, listed.num_rows - 1)).to_numpy(
            zero_copy_only=False)
    removed = listed.filter(pa.array(same)).select([ROW_FIELD, id_field])
    return removed.sort_by([(ROW_FIELD, "ascending")])


def _for_partition(removal: pa.Table, i: int) -> pa.Table:
    rows = removal.column(ROW_FIELD).to_numpy()
    start, stop = np.searchsorted(rows, [first_row(i), first_row(i + 1)])
    return removal.slice(start, stop - start)


def _combine(removals: list[pa.Table], npartitions: int) -> pa.Table:
    """Every part's removals in one table sorted by row (the broadcast list)."""
    combined = pa.concat_tables(removals).sort_by([(ROW_FIELD, "ascending")])
    rows = combined.column(ROW_FIELD).to_numpy()
    if len(rows) and partition_of_rows(rows[-1:])[0] >= npartitions:
        from curator_dask.dedup.removal import raise_mismatch

        raise_mismatch(f"the list names rows of partition {partition_of_rows(rows[-1:])[0]}, "
                  f"but the dataset has {npartitions} partitions")
    return combined


def _remove_and_write(source: ArrowInput, spec, removals: list[pa.Table], staged,
                      output: WriteSpec, dropped: dict[str, int], write=write_partition,
                      after=None) -> dict:
    """Drop the listed rows of partition ``spec`` and write it. ``staged``: True to read
    the staged copy, False to read the input, or the hash task's result holding the
    table in memory. ``after`` only orders this task after another."""
    settings = source.settings
    i = spec.index
    if isinstance(staged, dict):
        table, dropped = staged["table"], staged["dropped"]
    elif staged:
        table = source.staged(i)
    else:
        table, dropped = source.read(spec)
    table, counts = drop_listed(table, removals, i, settings, dropped)
    return write_part(table, output, source.fs, (i,), dropped=counts, write=write)


def drop_listed(table: pa.Table, removals: list[pa.Table], i: int, settings: HashSettings,
                dropped: dict[str, int]) -> tuple[pa.Table, dict[str, int]]:
    """Partition ``i`` without the rows ``removals`` list (tables of ``(_row, id)``
    sorted by row, each row checked to carry its id), and without null texts under
    ``on_null="skip"``; with ``dropped`` and what it dropped, by reason: a list's own
    ``_reason`` column where it has one, else ``exact_duplicate``."""
    listed = pa.concat_tables([_for_partition(r, i) for r in removals])
    if len(removals) > 1:
        listed = listed.sort_by([(ROW_FIELD, "ascending")])
    counts = dict(dropped)
    hit = listed_rows_mask(table.column(settings.id_field),
                           listed.column(ROW_FIELD).to_numpy(), listed.column(settings.id_field),
                           i, settings.id_field)
    if hit.any():
        reasons = (listed.column(REASON_FIELD).value_counts().to_pylist()
                   if REASON_FIELD in listed.column_names
                   else [{"values": DUPLICATE_REASON, "counts": int(hit.sum())}])
        for reason in reasons:
            counts[reason["values"]] = counts.get(reason["values"], 0) + reason["counts"]
    keep = ~hit
    if settings.on_null == "skip":
        nulls = pc.is_null(table.column(settings.text_field)).to_numpy(zero_copy_only=False)
        if nulls.any():
            counts[NULL_TEXT_REASON] = int(nulls.sum())
            keep &= ~nulls
    if not keep.all():
        table = table.filter(pa.array(keep))
    return table, counts


def route_removals(removals: list, npartitions: int, strategy: str, token: str) -> list[list]:
    """Each input partition's share of ``removals`` (Delayed tables of ``(_row, id)``
    sorted by row, one per bucket): the whole list combined once (``broadcast``), or
    each partition its own rows of each bucket (``shuffle``)."""
    if strategy == "broadcast":
        whole = dask.delayed(_combine, pure=True)(
            removals, npartitions, dask_key_name=f"{_task('remove')}-{token}-combine")
        return [[whole]] * npartitions
    return [[dask.delayed(_for_partition, pure=True)(
        r, i, dask_key_name=f"{_task('remove')}-{token}-route-{i}-{b}")
        for b, r in enumerate(removals)] for i in range(npartitions)]


# -- the run ----------------------------------------------------------------------------------

@dataclass
class Identified:
    """What steps 1-2 left: the list's size, and what the run learnt of the input."""

    rows: int
    parts: list[str]
    stats: dict


class ExactFilesRun:
    """One run of the three steps over a dataset read from files (see the module docstring).

    ``ds`` must be read from files by ``DocumentDataset.read_jsonl``/``read_parquet`` on
    pandas partitions, without ids if ``settings.assign_id``.
    """

    def __init__(self, ds, *, id_field: str, text_field: str, hash_method: str,
                 on_null: str, assign_id: bool, cache_path: str,
                 hash_partitions: int | None = None, storage_options: dict | None = None):
        if ds.source is None:
            raise InvalidArgumentError("ExactFilesRun needs a dataset read from files")
        self.ds = ds
        self.settings = HashSettings(id_field, text_field, hash_method, on_null, assign_id)
        self.storage_options = storage_options or {}
        self.fs, root = url_to_fs(cache_path, **self.storage_options)
        self.staging = posixpath.join(root.rstrip("/"), STAGING_DIR)
        self.npartitions = len(ds.plan)
        self.buckets = hash_partitions or default_hash_partitions(
            sum(p.nbytes for p in ds.plan))
        self.token = uuid.uuid4().hex[:12]  # new keys each run (see the executors' notes)

    def _input(self, staging: str | None) -> ArrowInput:
        return ArrowInput(self.ds.source.reader, self.settings, staging, self.fs)

    def _claim_staging(self) -> GuardedPath:
        return claim(self.staging, "cache directory", fs=self.fs)

    def identify(self, list_path: str, fingerprint, stage_input: bool = True) -> Identified:
        """Steps 1-2: hash (and, for step 3, stage) every partition, write the duplicate
        list's parts. ``stage_input=False`` when nothing will be removed."""
        with guarded(list_path, "cache directory", storage_options=self.storage_options) as out:
            return self._identify(out, fingerprint, stage_input)

    def _identify(self, out: GuardedPath, fingerprint, stage_input: bool) -> Identified:
        fs, root = out.fs, out.path
        listing = WriteSpec(path=root, fmt="parquet")
        prepare_output(out, "overwrite", fingerprint=fingerprint)
        stage = None
        if stage_input:
            staging = self._claim_staging()
            stage = WriteSpec(path=staging.path, fmt="arrow")
            prepare_output(staging, "overwrite", fingerprint=fingerprint)
        source = self._input(None)
        plan = self.ds.plan
        hashed = [dask.delayed(_hash_partition, pure=False)(
            source, plan[i], self.buckets, stage,
            dask_key_name=f"{_task('hash')}-{self.token}-hash-{i}")
            for i in range(self.npartitions)]
        groups = []
        for b in range(self.buckets):
            pieces = [dask.delayed(_piece, pure=True)(h, b, dask_key_name=(
                f"{_task('shuffle')}-{self.token}-piece-{i}-{b}")) for i, h in enumerate(hashed)]
            groups.append(dask.delayed(_group_bucket, pure=False)(
                pieces, b, self.settings, listing, fs,
                dask_key_name=f"{_task('groups')}-{self.token}-group-{b}"))
        counts = [dask.delayed(_counts, pure=True)(
            h, dask_key_name=f"{_task('hash')}-{self.token}-count-{i}")
            for i, h in enumerate(hashed)]
        computed = progress.compute(*groups, *counts)  # values, not lists: no gathering task
        grouped, counted = computed[:len(groups)], computed[len(groups):]
        stats = {**_input_stats(counted), "staged": self.npartitions}
        parts = [posixpath.join(root, f"part-{b:05d}.parquet") for b in range(self.buckets)]
        return Identified(sum(g["rows"] for g in grouped), parts, stats)

    def fits_in_memory(self, fraction: float | None = None) -> bool:
        """Whether the input, held as Arrow between the steps, fits (see
        :func:`~curator_dask.dedup.held.fits_in_memory`)."""
        return fits_in_memory(sum(p.nbytes for p in self.ds.plan), fraction)

    def in_one_pass(self, list_path: str, list_fingerprint, output_path: str, mode: str,
                    output_fingerprint, strategy: str, inputs) -> tuple[Identified, WriteResult]:
        """All three steps in one graph, each partition's table kept in worker memory from
        its hash task to its write task (no staged copy): for inputs that fit
        (:meth:`fits_in_memory`). The list is marked complete, and the output directory
        prepared, by a task between the group and write steps, so a crash while writing
        leaves a complete list to resume from."""
        with guarded(list_path, "cache directory", storage_options=self.storage_options) as out, \
                guarded(output_path, "output directory", inputs=inputs,
                        storage_options=self.storage_options) as written:
            return self._in_one_pass(out, list_fingerprint, written, output_path, mode,
                                     output_fingerprint, strategy)

    def _in_one_pass(self, out: GuardedPath, list_fingerprint, written: GuardedPath,
                     output_path: str, mode: str, output_fingerprint, strategy: str
                     ) -> tuple[Identified, WriteResult]:
        fs, root = out.fs, out.path
        listing = WriteSpec(path=root, fmt="parquet")
        prepare_output(out, "overwrite", fingerprint=list_fingerprint)
        output = WriteSpec(path=written.path, fmt="parquet")
        source = self._input(None)
        t = self.token
        plan = self.ds.plan
        hashed = [dask.delayed(_hash_partition, pure=False)(
            source, plan[i], self.buckets, None, True,
            dask_key_name=f"{_task('hash')}-{t}-hash-{i}")
            for i in range(self.npartitions)]
        groups = [dask.delayed(_group_bucket, pure=False)(
            [dask.delayed(_piece, pure=True)(
                h, b, dask_key_name=f"{_task('shuffle')}-{t}-piece-{i}-{b}")
             for i, h in enumerate(hashed)], b, self.settings, listing, fs,
            dask_key_name=f"{_task('groups')}-{t}-group-{b}") for b in range(self.buckets)]
        counts = [dask.delayed(_counts, pure=True)(
            h, dask_key_name=f"{_task('hash')}-{t}-count-{i}")
            for i, h in enumerate(hashed)]
        parts = [posixpath.join(root, f"part-{b:05d}.parquet") for b in range(self.buckets)]
        marked = dask.delayed(_mark_and_prepare, pure=False)(
            groups, counts, out, list_fingerprint, written, mode, output_fingerprint,
            dask_key_name=f"{_task('groups')}-{t}-mark")
        removals = [dask.delayed(_removal_after, pure=True)(
            p, self.fs, self.settings.id_field, marked,
            dask_key_name=f"{_task('remove')}-{t}-removal-{b}") for b, p in enumerate(parts)]
        routed = self._route(removals, strategy)
        writes = [dask.delayed(_remove_and_write, pure=False)(
            source, plan[i], routed[i], hashed[i], output, {}, write_partition, marked,
            dask_key_name=f"{_task('write')}-{t}-write-{i}") for i in range(self.npartitions)]
        found, *written = progress.compute(marked, *writes)  # values, not a list: no task
        return Identified(found["rows"], parts, found["stats"]), _write_result(
            output_path, written)

    def _route(self, removals, strategy: str):
        return route_removals(removals, self.npartitions, strategy, self.token)

    def staged_whole(self, stats: dict) -> bool:
        """Whether the staged copy an earlier run recorded is all there."""
        if stats.get("staged") != self.npartitions or not self.fs.exists(self.staging):
            return False
        names = {posixpath.basename(p) for p in self.fs.ls(self.staging, detail=False)}
        return all(f"part-{i:05d}.arrow" in names for i in range(self.npartitions))

    def remove(self, parts: list[str], stats: dict, output_path: str, mode: str,
               fingerprint, strategy: str, inputs) -> WriteResult:
        """Step 3: drop all but the first of each group and write the rest as Parquet."""
        staged = self.staged_whole(stats)
        if not staged:
            logger.info("exact dedup: no whole staged copy in %s; reading the input again",
                        self.staging)
        with guarded(output_path, "output directory", inputs=inputs,
                     storage_options=self.storage_options) as out:
            first = prepare_output(out, mode, fingerprint=fingerprint)
            output = WriteSpec(path=out.path, fmt="parquet", first_index=first)
            return self._remove(parts, stats, staged, output, output_path, strategy)

    def _remove(self, parts: list[str], stats: dict, staged: bool, output: WriteSpec,
                output_path: str, strategy: str) -> WriteResult:
        removals = [dask.delayed(rows_to_remove, pure=True)(
            p, self.fs, self.settings.id_field,
            dask_key_name=f"{_task('remove')}-{self.token}-removal-{b}")
            for b, p in enumerate(parts)]
        routed = self._route(removals, strategy)
        reader_dropped = stats.get("reader_dropped", {})
        source = self._input(self.staging)
        # The writer is looked up here, on the client, and shipped with the tasks.
        writes = [dask.delayed(_remove_and_write, pure=False)(
            source, self.ds.plan[i], routed[i], staged, output, reader_dropped.get(str(i), {}),
            write_partition, dask_key_name=f"{_task('write')}-{self.token}-write-{i}")
            for i in range(self.npartitions)]
        return _write_result(output_path, list(progress.compute(*writes)))

    def drop_staging(self) -> None:
        """Delete the staged copy (only the project's own files; kept if anything else
        is in the directory)."""
        if not self.fs.exists(self.staging):
            return
        manifest = read_manifest(self.fs, self.staging)
        own, foreign = own_files(self.fs, self.staging, manifest)
        if foreign:
            logger.warning("%s holds files curator-dask did not write (%s); leaving it",
                           self.staging, ", ".join(foreign[:3]))
            return
        remove_own_files(self.fs, self.staging, own)
        atomic.remove_empty_directory(self.fs, self.staging)


def _counts(hashed: dict) -> dict:
    return {k: hashed[k] for k in ("rows", "nulls", "dropped")}


def _input_stats(counted: list[dict]) -> dict:
    return {"partitions": len(counted), "input_rows": sum(c["rows"] for c in counted),
            "null_text": sum(c["nulls"] for c in counted),
            "reader_dropped": {str(i): c["dropped"] for i, c in enumerate(counted)
                               if c["dropped"]}}


def _mark_and_prepare(groups: list[dict], counted: list[dict], listing: GuardedPath,
                      list_fingerprint, output: GuardedPath, mode: str,
                      output_fingerprint) -> dict:
    """Mark the duplicate list complete, then prepare the output directory (both checked
    and leased by the run's guard on the client)."""
    rows = sum(g["rows"] for g in groups)
    stats = _input_stats(counted)
    mark_complete(listing.fs, listing.path, fingerprint=list_fingerprint, rows=rows,
                  files=len(groups), stats=stats)
    prepare_output(output, mode, fingerprint=output_fingerprint)
    return {"rows": rows, "stats": stats}


def _removal_after(path: str, fs, id_field: str, after) -> pa.Table:
    return rows_to_remove(path, fs, id_field)


def _write_result(path: str, written: list[dict]) -> WriteResult:
    files = sorted(f for s in written for f in s["files"])
    dropped, counters = split_counts(sum_dropped(s["dropped"] for s in written))
    return WriteResult(path=path, files=files, rows=sum(s["rows"] for s in written),
                       bytes=sum(s["bytes"] for s in written), dropped=dropped,
                       counters=counters, partitions=written)
