"""Readers and writers as pipeline stages, built on the io layer.

A reader stage is a source: it plans its partitions once, on the client, and hands the
executors the plan and the reader of one planned partition
(:class:`~curator_dask.io.source.PartitionSource`), which they submit one task per
partition; ``DocumentDataset.read_*`` build their dataframe from the same source. A writer
stage writes one partition per task through ``write_partition``: atomically, under a
deterministic name (``part-00042.parquet`` for input partition 42).

After each part is renamed into place the writer records a completion marker
(``.part-00042.done``, hidden from readers) holding the part's stats. A rerun with
``resume=True`` skips input partitions whose marker exists. The output's manifest
(``.curator-output.json``, :mod:`curator_dask.io.output_state`) records a fingerprint of
the input (the partition plan and the identity of every input file: size, modification
time, checksum, a hash of its first and last blocks; :mod:`curator_dask.io.identity`)
and of the pipeline (every stage with its parameters, see
:meth:`~curator_dask.ProcessingStage.fingerprint`), so a resume against changed input or
a changed pipeline is refused, naming what changed, instead of mixing two outputs.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from curator_dask.bounds import ByteSize, PositiveInt
from curator_dask.compat import nemo_keywords
from curator_dask.dataset import DocumentDataset
from curator_dask.io import guard
from curator_dask.io.errors import ResumeMismatchError
from curator_dask.io.files import JSONL_EXTENSIONS, PARQUET_EXTENSIONS, list_files
from curator_dask.io.jsonl import EncodingErrors, OnBadLines
from curator_dask.io.output_state import (
    completed_parts,
    discard_parts,
    fingerprint_changes,
    finish_output,
    marker_name,
    read_manifest,
    remove_leftovers,
)
from curator_dask.io.overlap import InputPaths, input_paths
from curator_dask.io.planner import AUTO, check_partitioning, resolve_blocksize
from curator_dask.io.rollover import TargetFileSize
from curator_dask.io.source import PartitionSource, plan_jsonl, plan_parquet, plan_warc
from curator_dask.io.tables import Backend
from curator_dask.io.warc import WARC_EXTENSIONS
from curator_dask.io.writers import WriteMode, WriteSpec, check_mode, prepare_output
from curator_dask.resources import Resources
from curator_dask.stages.base import Stage
from curator_dask.stages.fingerprint import pipeline_changes

__all__ = [
    "JsonlReader",
    "JsonlWriter",
    "ParquetReader",
    "ParquetWriter",
    "PreparedOutput",
    "ReaderStage",
    "WarcReader",
    "WriterStage",
    "resume_changes",
]

logger = logging.getLogger(__name__)


# -- readers ---------------------------------------------------------------------------

class ReaderStage(Stage):
    """Base of reader stages: the first stage of a pipeline, and its source.

    The plan is made once, on the client, when an executor first asks for
    :meth:`source`; each task then reads one planned partition with the source's reader.
    Subclasses implement :meth:`plan`.
    """

    kind = "read"
    name: str = "read"
    resources: Resources = Resources(cpus=1)
    #: The file name endings the reader takes from a directory.
    extensions: tuple[str, ...] = ()

    def __init__(self, path: str | Sequence[str], **options):
        self.path = path
        self.options = options
        self._source: PartitionSource | None = None
        check_partitioning(options.get("files_per_partition"), options.get("blocksize"))

    def check_inputs(self) -> None:
        """Raise ``FileNotFoundError`` naming the path if the input does not exist or
        holds no file this reader reads (lists the files; reads none)."""
        list_files(self.path, self.extensions, self.options.get("storage_options"))

    def input_paths(self) -> InputPaths:
        """The paths this reader reads, as outputs must keep clear of them (no listing:
        :meth:`source` adds the files it finds)."""
        return input_paths(self.path, self.options.get("storage_options"))

    def plan(self, **options) -> PartitionSource:
        """Plan the partitions with ``options`` (the reader's, with the blocksize
        :meth:`source` chose): list the files, choose the blocksize, settle the schema."""
        raise NotImplementedError(f"{type(self).__name__} must implement plan()")

    def source(self, work: str | float | None = None) -> PartitionSource:
        """The planned input: made by :meth:`plan` on first use, then kept.

        The first call plans: without a ``blocksize`` or ``files_per_partition``, the
        automatic blocksize fits ``work`` (what runs on each partition: a kind of work
        of :data:`~curator_dask.io.planner.WORKING_SETS` or a working set per input
        byte; default the heuristic filters') in the workers' memory.
        """
        if self._source is None:
            options = dict(self.options)
            if (work is not None and self.extensions  # a reader of files
                    and options.get("files_per_partition") is None
                    and options.get("blocksize") in (None, AUTO)):
                _, files = list_files(self.path, self.extensions, options.get("storage_options"))
                options["blocksize"] = resolve_blocksize(files, work=work)
            self._source = self.plan(**options)
        return self._source

    def dataset(self, work: str | float | None = None) -> DocumentDataset:
        """The input as a lazy dataset, read from :meth:`source` (planned for ``work``)."""
        return DocumentDataset.from_source(self.source(work))

    def fingerprint(self) -> dict:
        """How the input is read (the files themselves are in the input plan's token;
        ``storage_options`` are left out: they may hold credentials)."""
        from curator_dask.stages.fingerprint import jsonable, qualified_name

        options = {k: jsonable(v) for k, v in sorted(self.options.items())
                   if k != "storage_options"}
        return {"stage": qualified_name(type(self)), "params": options}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r} ({self.resources})>"


class JsonlReader(ReaderStage):
    """Read JSONL: the options of :meth:`DocumentDataset.read_jsonl`.

    Examples
    --------
    >>> JsonlReader("data/", blocksize="512MiB")
    <JsonlReader 'data/' (CPU=1)>
    """

    name = "read_jsonl"
    extensions = JSONL_EXTENSIONS

    @nemo_keywords()
    def __init__(self, path: str | Sequence[str], *, blocksize: ByteSize | None = None,
                 files_per_partition: PositiveInt | None = None,
                 columns: Sequence[str] | None = None,
                 text_field: str | None = "text", add_filename: bool | str = False,
                 input_meta: Mapping | None = None, backend: Backend = "pandas",
                 on_bad_lines: OnBadLines = "error", encoding_errors: EncodingErrors = "strict",
                 text_cast: bool = False, storage_options: dict | None = None):
        super().__init__(path, blocksize=blocksize, files_per_partition=files_per_partition,
                         columns=columns, text_field=text_field, add_filename=add_filename,
                         input_meta=input_meta, backend=backend, on_bad_lines=on_bad_lines,
                         encoding_errors=encoding_errors, text_cast=text_cast,
                         storage_options=storage_options)

    def plan(self, **options) -> PartitionSource:
        return plan_jsonl(self.path, **options)


class ParquetReader(ReaderStage):
    """Read Parquet: the options of :meth:`DocumentDataset.read_parquet`."""

    name = "read_parquet"
    extensions = PARQUET_EXTENSIONS

    @nemo_keywords()
    def __init__(self, path: str | Sequence[str], *, blocksize: ByteSize | None = None,
                 files_per_partition: PositiveInt | None = None,
                 columns: Sequence[str] | None = None,
                 text_field: str | None = "text", add_filename: bool | str = False,
                 input_meta: Mapping | None = None, backend: Backend = "pandas",
                 text_cast: bool = False, storage_options: dict | None = None):
        super().__init__(path, blocksize=blocksize, files_per_partition=files_per_partition,
                         columns=columns, text_field=text_field, add_filename=add_filename,
                         input_meta=input_meta, backend=backend, text_cast=text_cast,
                         storage_options=storage_options)

    def plan(self, **options) -> PartitionSource:
        return plan_parquet(self.path, **options)


class WarcReader(ReaderStage):
    """Read the HTML responses of WARC files (:meth:`DocumentDataset.read_warc`'s options).

    Follow it with :class:`~curator_dask.stages.extract.HtmlExtractor` to get a ``text``
    column.

    Examples
    --------
    >>> WarcReader("crawl/", blocksize="32MiB")
    <WarcReader 'crawl/' (CPU=1)>
    """

    name = "read_warc"

    extensions = WARC_EXTENSIONS

    def __init__(self, path: str | Sequence[str], *, blocksize: ByteSize | None = None,
                 files_per_partition: PositiveInt | None = None,
                 content_types: Sequence[str] = ("text/html", "application/xhtml+xml"),
                 add_filename: bool | str = False, storage_options: dict | None = None):
        super().__init__(path, blocksize=blocksize, files_per_partition=files_per_partition,
                         content_types=tuple(content_types), add_filename=add_filename,
                         storage_options=storage_options)

    def plan(self, **options) -> PartitionSource:
        return plan_warc(self.path, **options)


# -- writers ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PreparedOutput:
    """An output directory made ready for one run: what each write task needs.

    ``source`` identifies what the parts are computed from (the plan token of the
    partitions the writer's segment streams): each completion marker records it, and a
    resume counts only parts computed from the same source.
    """

    fs: object
    spec: WriteSpec
    source: str | None = None

    def marker_path(self, index: int) -> str:
        return posixpath.join(self.spec.path, marker_name(self.spec.first_index + index))

    def completed(self) -> dict[int, dict]:
        """Stats of the parts already complete, by (first) input partition index (see
        :func:`~curator_dask.io.output_state.completed_parts`)."""
        return completed_parts(self.fs, self.spec.path, self.source)

    def discard(self) -> None:
        """Delete the parts, markers and temporary files of earlier runs (keeping the
        manifest): the project's own files only."""
        discard_parts(self.fs, self.spec.path)


class WriterStage(Stage):
    """Base of writer stages: the last stage of a pipeline, one output part per task.

    Parameters
    ----------
    path : str
        Output directory (any fsspec URL).
    mode : {"error", "overwrite", "overwrite_all", "append"}, default "error"
        What to do when ``path`` already holds files; see
        :meth:`DocumentDataset.to_parquet`. A run with ``resume=True`` keeps the parts
        of the earlier run instead (when its manifest matches this run).
    write_to_filename, filename_field, keep_filename_column
        Write each document to a file named after its source file.
    target_file_size : int or str, optional
        Cut each part into files of at most this size, ``part-00042-00000.parquet``,
        ``part-00042-00001.parquet``, ...: bytes (``"256MiB"``, counted before
        compression) or documents (``"100000 documents"``); see
        :mod:`curator_dask.io.rollover`. Default: one file per part.
    storage_options : dict, optional
    """

    kind = "write"
    name = "write"
    fmt = "parquet"
    resources: Resources = Resources(cpus=1)

    @nemo_keywords()
    def __init__(self, path: str, *, compression: str | None = None, mode: WriteMode = "error",
                 write_to_filename: bool = False, filename_field: str = "file_name",
                 keep_filename_column: bool = False, target_file_size: TargetFileSize | None = None,
                 storage_options: dict | None = None):
        self.path = str(path)
        self.mode = check_mode(mode)
        self.storage_options = dict(storage_options or {})
        # Validates format, compression and size now, not on the first worker.
        self.spec = WriteSpec(path=self.path, fmt=self.fmt, compression=compression,
                              filename_field=filename_field if write_to_filename else None,
                              keep_filename_column=keep_filename_column,
                              target_file_size=target_file_size, encoder=self.encoder())

    def encoder(self):
        """What turns a partition into this writer's files, for a format the io layer
        does not know (see :mod:`curator_dask.io.rollover`); None for Parquet and JSONL."""
        return None

    def outputs(self) -> list[tuple[str, str]]:
        """Every directory this writer writes, with what the run's guard calls it: each
        is registered before the run starts (checked against the inputs and the run's
        other outputs, and leased)."""
        return [(self.path, "output directory")]

    @property
    def input_columns(self) -> list[str]:
        """The file name column, when each document goes to a file named after it."""
        return [self.spec.filename_field] if self.spec.filename_field else []

    def fingerprint(self) -> dict:
        """How parts are written (format, compression, file naming); the path and mode
        are not part of it."""
        from curator_dask.stages.fingerprint import qualified_name

        spec = self.spec
        params = {"format": spec.fmt, "compression": spec.compression,
                  "filename_field": spec.filename_field,
                  "keep_filename_column": spec.keep_filename_column}
        if spec.target_file_size is not None:  # older manifests have no such key
            params["target_file_size"] = str(spec.target_file_size)
        if spec.encoder is not None:
            params["encoder"] = spec.encoder.fingerprint()
        return {"stage": qualified_name(type(self)), "params": params}

    def prepare(self, identity: dict, resume: bool = False, *,
                pipeline: list[dict] | None = None, inputs: Iterable[InputPaths] = (),
                restart_on_mismatch: bool = False) -> PreparedOutput:
        """Create or check the output directory on the client, before any task runs.

        Runs inside a run's :class:`~curator_dask.io.guard.OutputGuard` (an executor's),
        which checks the path against ``inputs`` and the run's other outputs and holds
        its lease. ``identity`` is the input's
        (:meth:`~curator_dask.io.source.PartitionSource.identity`) and ``pipeline``
        the stages (a list of ``{"name", "kind", "fingerprint"}``, see
        :meth:`~curator_dask.executors.layout.Layout.fingerprint`); both are recorded in
        the manifest. With ``resume=True`` and a manifest in the directory, an output
        written from other input (an input file changed in size, modification time,
        checksum or content) or by another pipeline is refused
        (:class:`~curator_dask.io.errors.ResumeMismatchError`, naming what changed), or
        with ``restart_on_mismatch`` (an executor's own cache) started over; a matching
        one is resumed, after deleting the temporary files a killed run left.
        """
        out = guard.claim(self.path, "output directory", storage_options=self.storage_options,
                          inputs=inputs)
        fs, root = out.fs, out.path
        fingerprint = {"input": identity, "pipeline": pipeline}
        mode = self.mode
        if resume:
            saved = read_manifest(fs, root)
            if saved is not None:
                changes = resume_changes(saved.get("fingerprint"), fingerprint)
                if not changes:
                    remove_leftovers(fs, root, saved)
                    return PreparedOutput(fs, replace(self.spec, path=root,
                                                      first_index=saved["first_index"]))
                if not restart_on_mismatch:
                    raise ResumeMismatchError(self.path, changes)
                logger.info("%s was written by another run (%s): starting it over", self.path,
                            "; ".join(changes))
                mode = "overwrite"
        first_index = prepare_output(out, mode, fingerprint=fingerprint)
        return PreparedOutput(fs, replace(self.spec, path=root, first_index=first_index))

    def finish(self, output: PreparedOutput, stats: list[dict]) -> None:
        """Called on the client once every part of a run is written (or was found
        complete by a resume), with the stats of all of them: what the output holds as a
        whole goes into its manifest (:func:`~curator_dask.io.output_state.finish_output`)."""
        finish_output(output.fs, output.spec.path, output.spec.encoder, stats)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r} ({self.resources})>"


class ParquetWriter(WriterStage):
    """Write one Parquet file per partition (``part-00042.parquet``).

    Examples
    --------
    >>> ParquetWriter("out/", compression="zstd")
    <ParquetWriter 'out/' (CPU=1)>
    """

    name = "write_parquet"
    fmt = "parquet"

    def __init__(self, path: str, *, compression: str | None = "snappy", **kwargs):
        super().__init__(path, compression=compression, **kwargs)


class JsonlWriter(WriterStage):
    """Write one JSONL file per partition; ``compression`` is gzip, zstd, bz2 or None."""

    name = "write_jsonl"
    fmt = "jsonl"


def resume_changes(saved, wanted: dict) -> list[str]:
    """What differs between the fingerprint a manifest recorded and this run's, in words
    (empty: the run may resume).

    Examples
    --------
    >>> stage = {"name": "word_count", "fingerprint": {"stage": "F", "params": {"n": 50}}}
    >>> changed = {"name": "word_count", "fingerprint": {"stage": "F", "params": {"n": 20}}}
    >>> inputs = {"plan": "p", "files": [["in/a.jsonl", 10, 1.5, None, "x"]]}
    >>> resume_changes({"input": inputs, "pipeline": [stage]},
    ...                {"input": inputs, "pipeline": [changed]})
    ["stage 'word_count': n 50 -> 20"]
    >>> edited = {"plan": "p", "files": [["in/a.jsonl", 10, 1.5, None, "y"]]}
    >>> resume_changes({"input": inputs, "pipeline": [stage]},
    ...                {"input": edited, "pipeline": [stage]})
    ["different input: the input files changed (1 file: 'in/a.jsonl' content changed ...)"]
    """
    return fingerprint_changes(saved, wanted, explain={"pipeline": pipeline_changes})
