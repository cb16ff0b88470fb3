"""Exact deduplication of a corpus on disk, end to end, resumable after a crash.

read and hash (ids assigned if missing) -> group (cached) -> remove -> write Parquet,
with the input parsed once (:mod:`curator_dask.dedup.exact_files`).

The duplicate list is the one result worth keeping across a crash: it costs a full pass
of hashing and a shuffle, and it is small. It is written to ``cache_path`` with a
completion marker; a rerun with the same input and parameters reads it back instead of
hashing again, then removes and writes. "The same input" is every input file with the
same identity (size, modification time, checksum, a hash of its first and last blocks:
:mod:`curator_dask.io.identity`): a file edited in place, even to a text of the same
length, makes the rerun compute the list again, and the log names the file.

The list names documents by row number as well as id, so the input's ids need not be
unique; rows and ids must be the same on every run, which the same files read with the
same blocksize guarantee (``AddId`` included). The blocksize is part of the cache's
fingerprint, and an automatic one is taken from the cache when the input is the same, so
a rerun on a cluster of another size resumes.
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass

import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from curator_dask.compat import nemo_keywords
from curator_dask.dataset import DocumentDataset, WriteResult
from curator_dask.dedup.cache import (
    DUPLICATES_DIR,
    FileType,
    OutputMode,
    check_workflow_options,
    mark_complete,
    output_mode_for,
    read_phase,
    recorded_blocksize,
    workflow_run,
)
from curator_dask.dedup.config import ExactDedupConfig, takes_config
from curator_dask.dedup.duplicate_ids import (
    ASSIGNED_ID_FIELD,
    IdNumbering,
    write_duplicate_ids,
)
from curator_dask.dedup.exact import DUPLICATE_REASON, NULL_TEXT_REASON, ExactDuplicates
from curator_dask.dedup.exact_files import ExactFilesRun, rows_to_remove
from curator_dask.dedup.ids import ROW_FIELD
from curator_dask.errors import InvalidArgumentError
from curator_dask.faults import faults_explained
from curator_dask.io.files import JSONL_EXTENSIONS, PARQUET_EXTENSIONS, list_files
from curator_dask.io.identity import files_identity
from curator_dask.io.jsonl import OnBadLines
from curator_dask.io.output_state import as_json
from curator_dask.io.planner import AUTO, resolve_blocksize
from curator_dask.observe.progress import phase, reporting
from curator_dask.stages.columns import require_columns
from curator_dask.stages.ids import AddId
from curator_dask.task_names import scoped

__all__ = ["ExactDedupResult", "ExactDeduplicationWorkflow"]

logger = logging.getLogger(__name__)



@dataclass
class ExactDedupResult:
    """What a run did. ``input_documents == kept_documents + duplicate_documents +
    null_text_documents``."""

    input_documents: int
    #: Documents removed as copies of a kept one.
    duplicate_documents: int
    kept_documents: int
    #: Groups of identical texts (one document of each is kept).
    duplicate_groups: int
    #: Documents with null text dropped (``on_null="skip"``).
    null_text_documents: int
    #: True when the duplicate list came from ``cache_path`` instead of being computed.
    identify_from_cache: bool
    #: The kept documents written (None with ``perform_removal=False``).
    output: WriteResult | None
    #: Seconds spent finding duplicates (or reading them from the cache), and removing
    #: and writing. An input small enough to run in one pass (no staged copy, see
    #: :mod:`curator_dask.dedup.exact_files`) counts all of its time as removing.
    identify_seconds: float = 0.0
    remove_seconds: float = 0.0
    #: Input lines skipped as unreadable (``on_bad_lines="skip"``): not documents, so not
    #: in ``input_documents``; by reason in ``output.dropped`` (``reader.*``).
    skipped_lines: int = 0
    #: With ``perform_removal=False``: where the ids to remove were written
    #: (``output_path/ExactDuplicateIds``; None when there were none).
    duplicate_ids_path: str | None = None


class ExactDeduplicationWorkflow:
    """Read a corpus, remove exact duplicates, write the rest as Parquet.

    Runs on the current Dask scheduler: a ``distributed.Client`` if one is active (then
    the shuffles are P2P), otherwise the local threads.

    Parameters
    ----------
    input_path : str or list of str
        Files or directories (any fsspec URL).
    output_path : str
        Directory for ``part-*.parquet``. It must be empty, unless ``output_mode`` says
        otherwise or a rerun that reuses the cache finds the output of an interrupted
        run of the same input and parameters there. It must not be, contain or lie
        inside an input path or ``cache_path``. With ``perform_removal=False``: the
        directory for the ids to remove, where NeMo Curator 1.x writes them (see below).
    cache_path : str, optional
        Directory for the duplicate list (``exact_duplicates/``), kept for reruns; it
        must not be, contain or lie inside an input path. Needed to remove; without
        removal it defaults to ``output_path``.
    perform_removal : bool, default True
        Remove the duplicates and write the rest. ``False`` only finds them, and (when
        there are any) writes the ids to remove to ``output_path/ExactDuplicateIds/``
        and how they were given to ``output_path/exact_id_generator.json``, NeMo
        Curator 1.x's layout, for :class:`~curator_dask.dedup.TextDuplicatesRemovalWorkflow`
        (see :mod:`curator_dask.dedup.duplicate_ids`).
    input_filetype : {"jsonl", "parquet"}
    input_blocksize : int or str, optional
        Bytes per partition. Default (or ``"auto"``): chosen from the data and the
        cluster, two partitions per worker thread where the data allows, at most 64 MiB
        and within the workers' memory (see ``docs/io.md``), and recorded in the cache so
        that a rerun reuses it. Peak worker memory follows it. A rerun with another value
        computes the list again.
    on_bad_lines : {"error", "skip", "warn"}
        JSONL input: a malformed line is an error naming the file and line, or is
        skipped and counted (:attr:`ExactDedupResult.skipped_lines`), see
        :meth:`~curator_dask.DocumentDataset.read_jsonl`.
    id_field, text_field, hash_method, on_null, removal_strategy, broadcast_threshold,
    hash_partitions
        As for :class:`~curator_dask.dedup.exact.ExactDuplicates`.
    config : ExactDedupConfig, optional
        Those parameters as one object (then leave them at their defaults), shared with
        :class:`~curator_dask.dedup.ExactDuplicates` and the ``ExactDedup`` stage.
    assign_id : bool, default True
        Add ids with :class:`~curator_dask.AddId` when the input has no ``id_field``;
        when False, a missing id column is an error.
    output_mode : {"error", "overwrite", "overwrite_all"}
        What to do when ``output_path`` holds files: refuse; replace the files an
        earlier run wrote (refusing if anything else is there); or delete everything in
        it. See :func:`~curator_dask.dedup.cache.output_mode_for`.
    storage_options : dict, optional
        For fsspec, used for input, output and cache.
    force : bool, default False
        Take over the lease of the output or cache directory when the run that held it
        stopped heart-beating (see :mod:`curator_dask.io.lease`); a directory another
        live run is writing is always refused.
    """

    #: What the automatic blocksize fits in the workers' memory: hashing (the largest task).
    working_set = "exact"

    @nemo_keywords()
    @takes_config(ExactDedupConfig)
    def __init__(self, input_path, output_path: str, cache_path: str | None = None, *,
                 perform_removal: bool = True,
                 input_filetype: FileType = "jsonl", input_blocksize: int | str | None = None,
                 on_bad_lines: OnBadLines = "error", assign_id: bool = True,
                 output_mode: OutputMode = "error", storage_options: dict | None = None,
                 config: ExactDedupConfig | None = None, force: bool = False):
        check_workflow_options(input_filetype, output_mode)
        if cache_path is None and perform_removal:
            raise InvalidArgumentError(
                "ExactDeduplicationWorkflow needs cache_path= (a directory for "
                "the duplicate list, kept for reruns) to remove duplicates; "
                "with perform_removal=False it only writes their ids")
        self.input_path = input_path
        self.output_path = output_path
        self.cache_path = cache_path if cache_path is not None else output_path
        self.perform_removal = perform_removal
        self.input_filetype = input_filetype
        self.input_blocksize = input_blocksize
        self.on_bad_lines = check_on_bad_lines(on_bad_lines, input_filetype)
        self.assign_id = assign_id
        self.output_mode = output_mode
        self.storage_options = storage_options
        self.force = force
        self.dedup = ExactDuplicates(config=config, storage_options=storage_options)

    def _files(self):
        return input_files(self.input_path, self.input_filetype, self.storage_options)

    def blocksize(self, identity: list | None = None) -> int:
        """Bytes per partition this run reads with: ``input_blocksize`` as given, or for
        the automatic choice the one an earlier run of the same input recorded in the
        cache (so a rerun on a cluster of another size reads the same partitions, ids
        and rows), or a new automatic choice (see ``docs/io.md``). ``identity`` is the
        input's (:meth:`identity`; computed unless given)."""
        fs, files = self._files()
        if self.input_blocksize not in (None, AUTO):
            return resolve_blocksize(files, blocksize=self.input_blocksize)
        recorded = recorded_blocksize(
            posixpath.join(self.cache_path.rstrip("/"), DUPLICATES_DIR),
            identity if identity is not None else files_identity(fs, [f.path for f in files]),
            storage_options=self.storage_options)
        return recorded or resolve_blocksize(files, work=self.working_set)

    def identity(self) -> list[list]:
        """The identity of every input file (see :mod:`curator_dask.io.identity`)."""
        fs, files = self._files()
        return files_identity(fs, [f.path for f in files])

    def _read_input(self, blocksize) -> DocumentDataset:
        return read_input(self.input_path, self.input_filetype, blocksize, self.on_bad_lines,
                          text_field=self.dedup.text_field,
                          storage_options=self.storage_options)

    def read(self) -> DocumentDataset:
        """The input with ids, as the run sees it."""
        ds = self._read_input(self.blocksize())
        id_field = self.dedup.id_field
        if id_field not in ds.df.columns:
            if not self.assign_id:
                require_columns("the dedup workflow", ds.df.columns, [id_field],
                                fix="Pass assign_id=True to add ids with AddId.")
            ds = AddId(id_field=id_field)(ds)
        return ds

    def fingerprint(self, blocksize: int | None = None, identity: list | None = None) -> dict:
        """What the duplicate list depends on: the input files (their identities), the
        bytes per partition (which decide ids and row numbers) and the parameters."""
        identity = identity if identity is not None else self.identity()
        d = self.dedup
        return {
            "files": identity,
            "input_filetype": self.input_filetype,
            "input_blocksize": blocksize if blocksize is not None else self.blocksize(identity),
            **({"on_bad_lines": "skip"} if self.on_bad_lines != "error" else {}),
            **d.config.decisive(),
        }

    @scoped("exact_dedup")
    def run(self) -> ExactDedupResult:
        """Deduplicate; resumes from a complete duplicate list in ``cache_path``.

        The input is parsed once: each partition is hashed as it is read and kept in
        the cache as Arrow until the kept documents are written (see
        :mod:`curator_dask.dedup.exact_files`). Progress is reported phase by phase
        (identify, remove): a bar on a terminal, else INFO lines (see
        :mod:`curator_dask.observe.progress`).
        """
        with reporting(), faults_explained(self.blocksize, setting="input_blocksize"):
            return self._run()

    def _run(self) -> ExactDedupResult:
        if not self.perform_removal:
            return self._identify_only()
        start = time.perf_counter()
        blocksize, identity, ds = self._begin()
        with workflow_run(self, ds):
            return self._dedup(ds, start, self.fingerprint(blocksize, identity))

    def _dedup(self, ds: DocumentDataset, start: float, fingerprint: dict) -> ExactDedupResult:
        d = self.dedup
        list_path, cached = self._cached_list(fingerprint)
        output_mode = output_mode_for(  # fail before hashing
            self.output_path, self.output_mode, resuming=cached is not None,
            fingerprint=fingerprint, storage_options=self.storage_options)
        run = ExactFilesRun(ds, id_field=d.id_field, text_field=d.text_field,
                            hash_method=d.hash_method, on_null=d.on_null,
                            assign_id=self.assign_id, cache_path=self.cache_path,
                            hash_partitions=d.hash_partitions,
                            storage_options=self.storage_options)
        if cached is None and run.fits_in_memory():
            # Small enough to hold in the workers' memory: one graph, no staged copy.
            # The list's size is unknown until it is made, so "auto" routes each
            # partition its own rows (there are few buckets at this size).
            strategy = "broadcast" if d.removal_strategy == "broadcast" else "shuffle"
            with phase("exact dedup: identify, remove and write"):
                found, written = run.in_one_pass(
                    list_path, as_json(fingerprint), self.output_path, output_mode,
                    as_json(fingerprint), strategy, inputs=[ds.sources])
            rows, from_cache = found.rows, False
            identified = start  # one pass: identify_seconds is 0, all is in remove
        else:
            if cached is None:
                with phase("exact dedup: identify"):
                    found = run.identify(list_path, as_json(fingerprint))
                mark_complete(list_path, fingerprint=fingerprint, rows=found.rows,
                              files=len(found.parts), stats=found.stats,
                              storage_options=self.storage_options)
                rows, stats, from_cache = found.rows, found.stats, False
            else:
                rows, stats, from_cache = cached.rows, cached.stats, True
            parts = _parts_of(list_path, self.storage_options)
            identified = time.perf_counter()
            strategy = d.removal_strategy
            if strategy == "auto":
                # The list's size is known: no count is needed to decide.
                strategy = "broadcast" if rows <= d.broadcast_threshold else "shuffle"
            with phase("exact dedup: remove and write"):
                written = run.remove(parts, stats, self.output_path, output_mode,
                                     as_json(fingerprint), strategy, inputs=[ds.sources])
        run.drop_staging()
        removed = written.dropped.get(DUPLICATE_REASON, 0)
        nulls = written.dropped.get(NULL_TEXT_REASON, 0)
        skipped = sum(n for reason, n in written.dropped.items() if reason.startswith("reader."))
        result = ExactDedupResult(
            input_documents=written.rows + removed + nulls,
            duplicate_documents=removed,
            kept_documents=written.rows,
            duplicate_groups=rows - removed,
            null_text_documents=nulls,
            identify_from_cache=from_cache,
            output=written,
            identify_seconds=identified - start,
            remove_seconds=time.perf_counter() - identified,
            skipped_lines=skipped,
        )
        logger.info("exact dedup: %d documents in, %d duplicates removed in %d groups, "
                    "%d kept", result.input_documents, removed, result.duplicate_groups,
                    written.rows)
        return result


    def _begin(self) -> tuple:
        """What every run starts with: the input's identity, the bytes per partition,
        and the input read with them (its id column checked)."""
        identity = self.identity()
        blocksize = self.blocksize(identity)
        ds = self._read_input(blocksize)
        d = self.dedup
        if d.id_field not in ds.df.columns and not self.assign_id:
            require_columns("the dedup workflow", ds.df.columns, [d.id_field],
                            fix="Pass assign_id=True to add ids with AddId.")
        return blocksize, identity, ds

    def _cached_list(self, fingerprint: dict) -> tuple:
        """The duplicate list's path, and the list an earlier run of the same input and
        parameters completed there (or None)."""
        list_path = posixpath.join(self.cache_path.rstrip("/"), DUPLICATES_DIR)
        cached = read_phase(list_path, fingerprint=fingerprint,
                            storage_options=self.storage_options)
        if cached is not None and not _lists_rows(list_path, self.storage_options):
            # A list of ids alone (an earlier version's) cannot tell apart documents that
            # share an id: find the duplicates again rather than trust the ids.
            logger.warning("%s lists ids without row numbers: computing it again", list_path)
            cached = None
        return list_path, cached

    def _identify_only(self) -> ExactDedupResult:
        """Find the duplicates and write the ids to remove (NeMo Curator 1.x's layout)."""
        start = time.perf_counter()
        blocksize, identity, ds = self._begin()
        with workflow_run(self, ds):
            return self._write_ids(ds, start, blocksize, self.fingerprint(blocksize, identity))

    def _write_ids(self, ds: DocumentDataset, start: float, blocksize: int,
                   fingerprint: dict) -> ExactDedupResult:
        list_path, cached = self._cached_list(fingerprint)
        d = self.dedup
        has_ids = d.id_field in ds.df.columns
        if cached is None:
            run = ExactFilesRun(ds, id_field=d.id_field, text_field=d.text_field,
                                hash_method=d.hash_method, on_null=d.on_null,
                                assign_id=self.assign_id, cache_path=self.cache_path,
                                hash_partitions=d.hash_partitions,
                                storage_options=self.storage_options)
            with phase("exact dedup: identify"):
                found = run.identify(list_path, as_json(fingerprint), stage_input=False)
            mark_complete(list_path, fingerprint=fingerprint, rows=found.rows,
                          files=len(found.parts), stats=found.stats,
                          storage_options=self.storage_options)
            listed, stats = found.rows, found.stats
        else:
            listed, stats = cached.rows, cached.stats
        # Ids AddId gave are the row numbers: NeMo Curator's column of assigned ids.
        column = d.id_field if has_ids else ASSIGNED_ID_FIELD
        ids = _listed_ids(_parts_of(list_path, self.storage_options), d.id_field, column,
                          ds.df._meta[d.id_field].dtype if has_ids else "int64",
                          self.storage_options).persist()
        removed = len(ids)
        written = None
        if removed:
            numbering = IdNumbering(self.input_filetype, blocksize, fingerprint["files"],
                                    column, assigned=not has_ids)
            written = write_duplicate_ids(ids, self.output_path, "exact", numbering,
                                          self.storage_options)
        else:
            logger.info("exact dedup: no duplicates; nothing written to %s", self.output_path)
        total, nulls = stats.get("input_rows", 0), stats.get("null_text", 0)
        return ExactDedupResult(
            input_documents=total, duplicate_documents=removed,
            kept_documents=total - removed - nulls, duplicate_groups=listed - removed,
            null_text_documents=nulls, identify_from_cache=cached is not None, output=None,
            identify_seconds=time.perf_counter() - start, duplicate_ids_path=written)


def _listed_ids(parts: list[str], id_field: str, column: str, dtype,
                storage_options: dict | None) -> dd.DataFrame:
    """The ids to remove that the duplicate list's ``parts`` name, in ``column``: the
    rows (ids AddId gave) for NeMo Curator's assigned-id column, else the input's ids."""
    fs, _ = url_to_fs(parts[0] if parts else "/", **(storage_options or {}))
    meta = pd.DataFrame({column: pd.Series([], dtype=dtype)})
    frames = [dask.delayed(_ids_of_part)(part, fs, id_field, column) for part in parts]
    return dd.from_delayed(frames, meta=meta, verify_meta=False) if frames else \
        dd.from_pandas(meta, npartitions=1)


def _ids_of_part(path: str, fs, id_field: str, column: str) -> pd.DataFrame:
    removed = rows_to_remove(path, fs, id_field)
    source = ROW_FIELD if column == ASSIGNED_ID_FIELD else id_field
    return pd.DataFrame({column: removed.column(source).to_pandas()})


def check_on_bad_lines(on_bad_lines: str, input_filetype: str) -> str:
    """``on_bad_lines`` if it is valid for the input (it applies to JSONL only)."""
    from curator_dask.io.jsonl import ON_BAD_LINES

    if on_bad_lines not in ON_BAD_LINES:
        raise InvalidArgumentError(
            f"on_bad_lines must be one of {ON_BAD_LINES}, got {on_bad_lines!r}")
    if on_bad_lines != "error" and input_filetype != "jsonl":
        raise InvalidArgumentError(f"on_bad_lines={on_bad_lines!r} applies to JSONL input; Parquet "
                                   "files have no lines to skip")
    return on_bad_lines


def input_files(path, input_filetype: str, storage_options: dict | None = None):
    """A workflow's input files of ``input_filetype``: ``(fs, [InputFile, ...])``."""
    extensions = JSONL_EXTENSIONS if input_filetype == "jsonl" else PARQUET_EXTENSIONS
    return list_files(path, extensions, storage_options)


def read_input(path, input_filetype: str, blocksize, on_bad_lines: str, **options
               ) -> DocumentDataset:
    """A workflow's input as a dataset (``on_bad_lines`` for JSONL only)."""
    if input_filetype == "jsonl":
        return DocumentDataset.read_jsonl(path, blocksize=blocksize, on_bad_lines=on_bad_lines,
                                          **options)
    return DocumentDataset.read_parquet(path, blocksize=blocksize, **options)


def _parts_of(path: str, storage_options: dict | None) -> list[str]:
    fs, root = url_to_fs(path, **(storage_options or {}))
    return sorted(p for p in fs.ls(root, detail=False)
                  if posixpath.basename(p).startswith("part-") and p.endswith(".parquet"))


def _lists_rows(path: str, storage_options: dict | None) -> bool:
    """Whether the duplicate list at ``path`` names rows (``_row``), not ids alone."""
    fs, _ = url_to_fs(path, **(storage_options or {}))
    for part in _parts_of(path, storage_options)[:1]:
        with fs.open(part, "rb") as handle:
            return ROW_FIELD in pq.read_schema(handle).names
    return True


