"""Whole-dataset results under ``cache_path``, each marked complete when written whole.

One protocol for every dedup phase (exact dedup's duplicate list, fuzzy dedup's
signatures, edges and groups, semantic dedup's embeddings...): a directory of
``part-*.parquet`` files (one per partition), then a completion record,
``_COMPLETE.json`` (:mod:`curator_dask.io.output_state`), written last and atomically
with the row and file counts and a fingerprint of what the result was computed from: the
identity of every input file (size, modification time, checksum, a hash of its first and
last blocks, see :mod:`curator_dask.io.identity`) and the parameters. A directory without
the record is an interrupted write and is computed again; a record with another
fingerprint (an input file changed in any of those, other parameters) is computed again
too, and the log names what changed; so is a directory missing some of the files its
record lists.

Computing a phase again replaces its whole directory (the parts, the marker and the
manifest are the project's own files), so no directory ever holds parts of two
fingerprints: a changed parameter costs a recomputation, never a mix, and the log says
what changed. The one place a run picks up what an earlier run wrote *outside* the cache
is the final output of a workflow; :func:`output_mode_for` decides there, and refuses
(naming what changed) when that output was written from other input or parameters.

Reading back is per kind: the exact duplicate list as a dataset whose partitions are the
hash partitions (:func:`read_duplicates`), a fuzzy phase with its Arrow types as they are
(:func:`read_parquet_parts`: ``list<uint32>`` signatures stay one Arrow column).
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal, get_args

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.ids import HASH_FIELD, mark_hash_partitioned
from curator_dask.errors import InvalidArgumentError
from curator_dask.io import output_state
from curator_dask.io.errors import OutputExistsError, ResumeMismatchError
from curator_dask.io.guard import OutputGuard, guarded, run_guard
from curator_dask.io.output_state import as_json, fingerprint_changes, read_manifest
from curator_dask.task_names import task_label

__all__ = [
    "DUPLICATES_DIR",
    "FILETYPES",
    "MARKER",
    "OUTPUT_MODES",
    "CachedDuplicates",
    "FileType",
    "PhaseResult",
    "check_workflow_options",
    "fingerprint_changes",
    "mark_complete",
    "output_mode_for",
    "read_duplicates",
    "read_parquet_parts",
    "read_phase",
    "recorded_blocksize",
    "register_workflow",
    "removal_output_intact",
    "workflow_run",
    "write_duplicates",
    "write_phase",
    "write_removal",
]

logger = logging.getLogger(__name__)

MARKER = output_state.COMPLETE
#: The subdirectory of a ``cache_path`` that holds the exact duplicate list.
DUPLICATES_DIR = "exact_duplicates"

#: What a dedup workflow may do with an output directory that holds files.
OutputMode = Literal["error", "overwrite", "overwrite_all"]
OUTPUT_MODES = get_args(OutputMode)
#: The files a dedup workflow reads.
FileType = Literal["jsonl", "parquet"]
FILETYPES = get_args(FileType)


def check_workflow_options(input_filetype: str, output_mode: str, *,
                           perform_removal: bool = False,
                           output_path: str | None = "") -> None:
    """Refuse, before anything runs, an input file type or an output mode a dedup
    workflow does not know, and a removal with nowhere to write the kept documents."""
    if input_filetype not in FILETYPES:
        raise InvalidArgumentError(
            f"input_filetype must be one of {FILETYPES}, got {input_filetype!r}")
    if output_mode not in OUTPUT_MODES:
        raise InvalidArgumentError(
            f"output_mode must be one of {OUTPUT_MODES}, got {output_mode!r}")
    if perform_removal and not output_path:
        raise InvalidArgumentError(
            "perform_removal=True needs an output_path for the kept documents")


@dataclass
class PhaseResult:
    """A finished phase on disk: where, how many rows and files, what it counted."""

    path: str
    rows: int
    files: int
    from_cache: bool
    stats: dict = field(default_factory=dict)


def register_workflow(guard: OutputGuard, workflow) -> None:
    """Register a dedup workflow's output directory (when it writes one) and its cache
    directory with ``guard``: refused, naming both paths, if one is, contains or lies
    inside an input or the other."""
    options = workflow.storage_options
    if getattr(workflow, "perform_removal", True) and workflow.output_path:
        guard.register(workflow.output_path, "output directory", storage_options=options)
    guard.register(workflow.cache_path, "cache directory", storage_options=options)


@contextlib.contextmanager
def workflow_run(workflow, ds: DocumentDataset) -> Iterator[OutputGuard]:
    """A dedup workflow's run over ``ds``: before anything is written, its output and
    cache are checked against the input and each other, and leased for the run."""
    with run_guard([ds.sources], force=workflow.force) as guard:
        register_workflow(guard, workflow)
        yield guard


def write_phase(df: dd.DataFrame | DocumentDataset, path: str, *, fingerprint: dict | None,
                stats: Callable[[PhaseResult], dict] | None = None,
                storage_options: dict | None = None, inputs=()) -> PhaseResult:
    """Compute ``df`` into ``path`` (one Parquet file per partition), then mark it complete.

    ``stats``, if given, is called with the written (not yet marked) result and returns
    what the marker records beside the counts (read from the files just written). What
    the write's partitions carried as dropped (lines the reader skipped) is recorded
    under ``stats["dropped"]``. ``inputs`` (:class:`~curator_dask.io.overlap.InputPaths`):
    what the result was computed from, which ``path`` must keep clear of.
    """
    dataset: DocumentDataset = df if isinstance(df, DocumentDataset) else DocumentDataset(df)
    with guarded(path, "cache directory", inputs=inputs, storage_options=storage_options):
        written = dataset.to_parquet(path, mode="overwrite", storage_options=storage_options,
                                     fingerprint=as_json(fingerprint))
        result = PhaseResult(path, written.rows, len(written.files), False)
        if stats is not None:
            result.stats = dict(stats(result))
        if written.dropped:
            result.stats["dropped"] = dict(written.dropped)
        mark_complete(path, fingerprint=fingerprint, rows=result.rows, files=result.files,
                      stats=result.stats, storage_options=storage_options)
    return result


def mark_complete(path: str, *, fingerprint: dict | None, rows: int, files: int,
                  stats: dict | None = None, storage_options: dict | None = None) -> None:
    """Write ``path/_COMPLETE.json`` atomically (see
    :func:`curator_dask.io.output_state.mark_complete`)."""
    with guarded(path, "cache directory", storage_options=storage_options) as out:
        output_state.mark_complete(out.fs, out.path, fingerprint=fingerprint, rows=rows,
                                   files=files, stats=stats)


def read_phase(path: str, *, fingerprint: dict | None,
               storage_options: dict | None = None) -> PhaseResult | None:
    """The finished phase at ``path``, or None when it must be computed (again)."""
    fs, root = url_to_fs(path, **(storage_options or {}))
    record = output_state.reusable(fs, root, fingerprint)
    if record is None:
        return None
    if len(_parts(fs, root)) != record["files"]:
        logger.warning("%s holds fewer files than its record lists: computing it again", path)
        return None
    return PhaseResult(path, record["rows"], record["files"], True, record.get("stats", {}))


def recorded_blocksize(path: str, files: list, *,
                       storage_options: dict | None = None) -> int | None:
    """The ``input_blocksize`` (bytes) that the phase marked complete at ``path`` was
    computed with, if it was computed from these ``files`` (their identities, see
    :func:`~curator_dask.io.identity.files_identity`).

    A workflow whose blocksize is chosen automatically reads with this one when it
    finds it, so a rerun on a cluster of another size (which would choose another)
    reads the same partitions and reuses the cache instead of mixing two plans.
    """
    fs, root = url_to_fs(path, **(storage_options or {}))
    record = output_state.read_complete(fs, root)
    fingerprint = record.get("fingerprint") if record is not None else None
    if not isinstance(fingerprint, dict) or fingerprint.get("files") != as_json(files):
        return None
    block = fingerprint.get("input_blocksize")
    return block if isinstance(block, int) and not isinstance(block, bool) else None


def output_mode_for(output_path: str, output_mode: str, *, resuming: bool, fingerprint: dict,
                    storage_options: dict | None = None) -> str:
    """The write mode for a workflow's final output; raises now if the output holds what
    this run must not replace.

    ``"overwrite"`` and ``"overwrite_all"`` are the user's explicit choice. With
    ``"error"``, an empty or missing directory is written; a directory holding the
    output of an interrupted run of the same workflow, input and parameters (its manifest
    has this ``fingerprint``) is replaced when the run resumes from its cache; one
    written from other input or parameters is refused with
    :class:`~curator_dask.io.errors.ResumeMismatchError` naming what changed; anything
    else with ``FileExistsError``.
    """
    if output_mode not in OUTPUT_MODES:
        raise InvalidArgumentError(
            f"output_mode must be one of {OUTPUT_MODES}, got {output_mode!r}")
    if output_mode != "error":
        return output_mode
    fs, root = url_to_fs(output_path, **(storage_options or {}))
    manifest = read_manifest(fs, root) if fs.exists(root) and fs.isdir(root) else None
    own, foreign = output_state.own_files(fs, root, manifest)
    entries = own + foreign  # not the run's lease
    if not entries:
        return "error"
    if manifest is not None and "fingerprint" in manifest:
        changes = fingerprint_changes(manifest["fingerprint"], fingerprint)
        if changes:
            raise ResumeMismatchError(
                output_path, changes,
                fix="Pass output_mode='overwrite' to replace it, or choose another output "
                    "directory.")
        if resuming:
            # The parts of an interrupted run of this same job: those, and only those
            # (overwrite refuses anything it did not write), are replaced.
            logger.info("replacing the parts of an interrupted run in %s", output_path)
            return "overwrite"
    raise OutputExistsError(
        f"output directory {output_path!r} is not empty ({len(entries)} entries); pass "
        "output_mode='overwrite' to replace what an earlier run wrote there, or choose "
        "another path"
    )


def write_removal(remove: Callable[[], DocumentDataset], output_path: str, output_mode: str,
                  marker_path: str, *, fingerprint: dict, resuming: bool,
                  storage_options: dict | None = None) -> PhaseResult:
    """A workflow's last phase: write what ``remove()`` keeps to ``output_path`` and mark
    the phase complete at ``marker_path``, its written files in the marker's stats.

    The output mode is checked (:func:`output_mode_for`) before ``remove`` builds anything.
    """
    mode = output_mode_for(output_path, output_mode, resuming=resuming,
                           fingerprint=fingerprint, storage_options=storage_options)
    kept: DocumentDataset = remove()
    written = kept.to_parquet(output_path, mode=mode, storage_options=storage_options,
                              fingerprint=fingerprint)
    stats = {"path": written.path, "files": written.files, "rows": written.rows,
             "bytes": written.bytes, "dropped": written.dropped}
    mark_complete(marker_path, fingerprint=fingerprint, rows=written.rows, files=0,
                  stats=stats, storage_options=storage_options)
    return PhaseResult(marker_path, written.rows, 0, False, stats)


def removal_output_intact(output_path: str, removal: PhaseResult,
                          storage_options: dict | None = None) -> bool:
    """Whether every file a finished :func:`write_removal` wrote is still there (a rerun
    writes the output again when one is gone)."""
    fs, _ = url_to_fs(output_path, **(storage_options or {}))
    if all(fs.exists(f) for f in removal.stats.get("files", [])):
        return True
    logger.warning("the output of the finished removal is gone from %s: removing again",
                   output_path)
    return False


def read_parquet_parts(path: str, schema: pa.Schema, *,
                       storage_options: dict | None = None) -> dd.DataFrame:
    """The ``part-*.parquet`` files of ``path``, one partition each, cast to ``schema``."""
    fs, root = url_to_fs(path, **(storage_options or {}))
    files = _parts(fs, root)
    meta = _to_pandas(schema.empty_table())
    if not files:
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_map(_ReadPart(fs, schema), files, meta=meta, enforce_metadata=False,
                       label=task_label("read_cache"), divisions=[None] * (len(files) + 1))


class _ReadPart:
    def __init__(self, fs, schema: pa.Schema):
        self.fs, self.schema = fs, schema

    def __call__(self, file: str) -> pd.DataFrame:
        with self.fs.open(file, "rb") as handle:
            table = pq.read_table(handle, columns=self.schema.names, use_threads=False)
        return _to_pandas(table.replace_schema_metadata(None).cast(self.schema))


def _parts(fs, root: str) -> list[str]:
    if not fs.exists(root):
        return []
    return sorted(p for p in fs.ls(root, detail=False)
                  if posixpath.basename(p).startswith("part-") and p.endswith(".parquet"))


def _types(arrow_type: pa.DataType):
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pd.ArrowDtype(arrow_type)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return pd.StringDtype("pyarrow", na_value=np.nan)
    return None


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas(types_mapper=_types)


# -- exact dedup's duplicate list ---------------------------------------------------------

@dataclass
class CachedDuplicates:
    """A duplicate list on disk: the dataset read back, its row count and origin."""

    duplicates: DocumentDataset
    path: str
    rows: int
    from_cache: bool


def _directory(cache_path: str) -> str:
    return cache_path.rstrip("/") + "/" + DUPLICATES_DIR


def write_duplicates(duplicates: DocumentDataset, cache_path: str, *,
                     fingerprint: dict | None = None, storage_options: dict | None = None,
                     inputs=()) -> CachedDuplicates:
    """Compute ``duplicates`` into ``cache_path/exact_duplicates``, then mark it complete.

    Anything already in that directory (an earlier or interrupted list) is replaced; it
    must keep clear of ``inputs`` (what the duplicates were found in).
    """
    path = _directory(cache_path)
    written = write_phase(duplicates, path, fingerprint=fingerprint,
                          storage_options=storage_options, inputs=inputs)
    return CachedDuplicates(_read_back(path, storage_options), path, written.rows, False)


def read_duplicates(cache_path: str, *, fingerprint: dict | None = None,
                    storage_options: dict | None = None) -> CachedDuplicates | None:
    """The complete duplicate list in ``cache_path``, or None when there is none to reuse."""
    path = _directory(cache_path)
    found = read_phase(path, fingerprint=fingerprint, storage_options=storage_options)
    if found is None:
        return None
    return CachedDuplicates(_read_back(path, storage_options), path, found.rows, True)


def _read_back(path: str, storage_options: dict | None) -> DocumentDataset:
    # One file per partition: each file is one hash partition, so groups stay whole.
    ds = DocumentDataset.read_parquet(path, files_per_partition=1, text_field=HASH_FIELD,
                                      storage_options=storage_options)
    return mark_hash_partitioned(ds)
