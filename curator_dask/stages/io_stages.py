"""Readers and writers as pipeline stages, built on the io layer.

A reader stage plans partitions on the client (the io planner) and reads one planned
partition per task (``read_jsonl_partition``/``read_parquet_partition``); a writer
stage writes one partition per task through ``write_partition``: atomically, under a
deterministic name (``part-00042.parquet`` for input partition 42).

After each part is renamed into place the writer records a completion marker
(``.part-00042.done``, hidden from readers) holding the part's stats. A rerun with
``resume=True`` skips input partitions whose marker exists. The output's manifest
(``.curator-output.json``, :mod:`curator_dask.io.writers`) records a fingerprint of the
input plan and of the pipeline (every stage with its parameters, see
:meth:`~curator_dask.ProcessingStage.fingerprint`), so a resume against other input or
a changed pipeline is refused, naming what changed, instead of mixing two outputs.
"""

from __future__ import annotations

import json
import logging
import posixpath
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import dask
from fsspec.core import url_to_fs

from curator_dask.dataset import DocumentDataset
from curator_dask.io.errors import ResumeMismatchError
from curator_dask.io.files import JSONL_EXTENSIONS, PARQUET_EXTENSIONS, list_files
from curator_dask.io.jsonl import EncodingErrors, OnBadLines
from curator_dask.io.overlap import InputPaths, check_output_path
from curator_dask.io.planner import check_partitioning
from curator_dask.io.tables import Backend
from curator_dask.io.warc import WARC_EXTENSIONS
from curator_dask.io.writers import (
    MANIFEST,
    WriteMode,
    WriteSpec,
    check_mode,
    finish_output,
    own_files,
    part_name,
    prepare_output,
    read_manifest,
    remove_leftovers,
    write_partition,
)
from curator_dask.resources import Resources
from curator_dask.stages.base import Stage
from curator_dask.stages.fingerprint import param_changes, pipeline_changes

__all__ = ["ReaderStage", "JsonlReader", "ParquetReader", "WarcReader", "WriterStage",
           "JsonlWriter", "ParquetWriter", "PreparedOutput", "write_part", "resume_changes"]

logger = logging.getLogger(__name__)

MARKER_SUFFIX = ".done"


# -- readers ---------------------------------------------------------------------------

class ReaderStage(Stage):
    """Base of reader stages: the first stage of a pipeline.

    The plan is made once, on the client, when an executor first asks for
    :meth:`dataset`; each task then reads one planned partition.
    """

    kind = "read"
    name: str = "read"
    resources: Resources = Resources(cpus=1)
    #: The file name endings the reader takes from a directory.
    extensions: tuple[str, ...] = ()

    def __init__(self, path: str | Sequence[str], **options):
        self.path = path
        self.options = options
        self._dataset: DocumentDataset | None = None
        blocksize = options.get("blocksize")
        try:
            check_partitioning(options.get("files_per_partition"), blocksize)
        except ValueError as err:
            if "byte unit" in str(err):  # dask's parse_bytes
                raise ValueError(f"blocksize must be a number of bytes or a size such as "
                                 f"'256MiB', got {blocksize!r}") from None
            raise

    def check_inputs(self) -> None:
        """Raise ``FileNotFoundError`` naming the path if the input does not exist or
        holds no file this reader reads (lists the files; reads none)."""
        list_files(self.path, self.extensions, self.options.get("storage_options"))

    def _read(self) -> DocumentDataset:
        raise NotImplementedError

    def dataset(self) -> DocumentDataset:
        """The lazy dataset (with its partition plan and per-partition reader)."""
        if self._dataset is None:
            self._dataset = self._read()
        return self._dataset

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

    def __init__(self, path: str | Sequence[str], *, blocksize: int | str | None = None,
                 files_per_partition: int | None = None, columns: Sequence[str] | None = None,
                 text_field: str | None = "text", add_filename: bool | str = False,
                 input_meta: Mapping | None = None, backend: Backend = "pandas",
                 on_bad_lines: OnBadLines = "error", encoding_errors: EncodingErrors = "strict",
                 text_cast: bool = False, storage_options: dict | None = None):
        super().__init__(path, blocksize=blocksize, files_per_partition=files_per_partition,
                         columns=columns, text_field=text_field, add_filename=add_filename,
                         input_meta=input_meta, backend=backend, on_bad_lines=on_bad_lines,
                         encoding_errors=encoding_errors, text_cast=text_cast,
                         storage_options=storage_options)

    def _read(self) -> DocumentDataset:
        return DocumentDataset.read_jsonl(self.path, **self.options)


class ParquetReader(ReaderStage):
    """Read Parquet: the options of :meth:`DocumentDataset.read_parquet`."""

    name = "read_parquet"
    extensions = PARQUET_EXTENSIONS

    def __init__(self, path: str | Sequence[str], *, blocksize: int | str | None = None,
                 files_per_partition: int | None = None, columns: Sequence[str] | None = None,
                 text_field: str | None = "text", add_filename: bool | str = False,
                 input_meta: Mapping | None = None, backend: Backend = "pandas",
                 text_cast: bool = False, storage_options: dict | None = None):
        super().__init__(path, blocksize=blocksize, files_per_partition=files_per_partition,
                         columns=columns, text_field=text_field, add_filename=add_filename,
                         input_meta=input_meta, backend=backend, text_cast=text_cast,
                         storage_options=storage_options)

    def _read(self) -> DocumentDataset:
        return DocumentDataset.read_parquet(self.path, **self.options)


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

    def __init__(self, path: str | Sequence[str], *, blocksize: int | str | None = None,
                 files_per_partition: int | None = None,
                 content_types: Sequence[str] = ("text/html", "application/xhtml+xml"),
                 add_filename: bool | str = False, storage_options: dict | None = None):
        super().__init__(path, blocksize=blocksize, files_per_partition=files_per_partition,
                         content_types=tuple(content_types), add_filename=add_filename,
                         storage_options=storage_options)

    def _read(self) -> DocumentDataset:
        return DocumentDataset.read_warc(self.path, **self.options)


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
        return posixpath.join(self.spec.path,
                              "." + part_name(self.spec.first_index + index, MARKER_SUFFIX))

    def completed(self) -> dict[int, dict]:
        """Stats of the parts already complete, by (first) input partition index.

        Parts computed from another source (a barrier's output that was computed again
        since) cannot be matched to this run's partitions: they are deleted (they are
        the project's own) and every partition is written again.
        """
        done: dict[int, dict] = {}
        stale = False
        prefix = "." + "part-"
        for entry in self.fs.ls(self.spec.path, detail=False):
            base = posixpath.basename(entry)
            if base.startswith(prefix) and base.endswith(MARKER_SUFFIX):
                with self.fs.open(entry, "rb") as handle:
                    stats = json.loads(handle.read())
                if stats.get("source") != self.source:
                    stale = True
                    break
                for index in stats["input_partitions"]:
                    done[index] = stats
        if stale:
            logger.warning("%s: the parts written so far were computed from another version "
                           "of their input (a barrier's output computed again): writing every "
                           "part again", self.spec.path)
            self.discard()
            return {}
        return done

    def discard(self) -> None:
        """Delete the parts, markers and temporary files of earlier runs (keeping the
        manifest): the project's own files only."""
        root = self.spec.path
        own, _ = own_files(self.fs, root, read_manifest(self.fs, root))
        for name in sorted(own, key=lambda n: not n.startswith(".part-")):  # markers first
            if name != MANIFEST:
                self.fs.rm(posixpath.join(root, name))


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

    def __init__(self, path: str, *, compression: str | None = None, mode: WriteMode = "error",
                 write_to_filename: bool = False, filename_field: str = "file_name",
                 keep_filename_column: bool = False, target_file_size: int | str | None = None,
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

    def prepare(self, input_token: str, resume: bool = False, *,
                pipeline: list[dict] | None = None, inputs: Iterable[InputPaths] = (),
                restart_on_mismatch: bool = False) -> PreparedOutput:
        """Create or check the output directory on the client, before any task runs.

        ``input_token`` identifies the input plan and ``pipeline`` the stages (a list of
        ``{"name", "kind", "fingerprint"}``, see
        :meth:`~curator_dask.executors.base.Layout.fingerprint`); both are recorded in
        the manifest. With ``resume=True`` and a manifest in the directory, an output
        written from other input or by another pipeline is refused
        (:class:`~curator_dask.io.errors.ResumeMismatchError`, naming what changed), or
        with ``restart_on_mismatch`` (an executor's own cache) started over; a matching
        one is resumed, after deleting the temporary files a killed run left. An output
        that is, contains or lies inside one of ``inputs`` is always refused.
        """
        fs, root = url_to_fs(self.path, **self.storage_options)
        root = root.rstrip("/") or root
        fingerprint = {"input": input_token, "pipeline": pipeline}
        mode = self.mode
        if resume:
            check_output_path(root, inputs, fs=fs)
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
        first_index = prepare_output(fs, root, mode, inputs=inputs, fingerprint=fingerprint)
        return PreparedOutput(fs, replace(self.spec, path=root, first_index=first_index))

    def finish(self, output: PreparedOutput, stats: list[dict]) -> None:
        """Called on the client once every part of a run is written (or was found
        complete by a resume), with the stats of all of them: what the output holds as a
        whole goes into its manifest (:func:`~curator_dask.io.writers.finish_output`)."""
        finish_output(output.fs, output.spec.path, output.spec, stats)

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


def write_part(df, output: PreparedOutput, input_partitions: Sequence[int]) -> dict:
    """Task body: write one part, then its completion marker; returns the part's stats.

    The part is named after the first input partition it holds. The marker is written
    after the part's atomic rename, so a marker always means a complete part; a task
    that dies between the two leaves a complete part without a marker, which a resume
    rewrites (same name, same content).
    """
    index = input_partitions[0]
    stats = write_partition(df, output.spec, index, output.fs)
    stats["input_partitions"] = list(input_partitions)
    stats["source"] = output.source
    marker = output.marker_path(index)
    tmp = f"{marker}.tmp-{uuid.uuid4().hex}"
    with output.fs.open(tmp, "wb") as handle:
        handle.write(json.dumps(stats).encode("utf-8"))
    output.fs.mv(tmp, marker)
    return stats


def plan_token(ds: DocumentDataset) -> str:
    """A fingerprint of the input plan (files, sizes, partitioning)."""
    return dask.base.tokenize([repr(p) for p in ds.plan]) if ds.plan is not None else ""


def resume_changes(saved, wanted: dict) -> list[str]:
    """What differs between the fingerprint a manifest recorded and this run's, in words
    (empty: the run may resume).

    Examples
    --------
    >>> stage = {"name": "word_count", "fingerprint": {"stage": "F", "params": {"n": 50}}}
    >>> changed = {"name": "word_count", "fingerprint": {"stage": "F", "params": {"n": 20}}}
    >>> resume_changes({"input": "a", "pipeline": [stage]}, {"input": "a", "pipeline": [changed]})
    ["stage 'word_count': n 50 -> 20"]
    >>> resume_changes({"input": "a", "pipeline": [stage]}, {"input": "b", "pipeline": [stage]})
    ['different input (the input files, their sizes or the partitioning changed)']
    """
    if not isinstance(saved, dict) or "input" not in saved:
        return ["the output was written without a fingerprint of its input and pipeline "
                "(by an earlier version, or not by a pipeline)"]
    changes = []
    if saved.get("input") != wanted.get("input"):
        changes.append("different input (the input files, their sizes or the partitioning "
                       "changed)")
    old, new = saved.get("pipeline"), wanted.get("pipeline")
    if isinstance(old, list) and isinstance(new, list):
        # Stage names are for messages: a renamed stage computes the same.
        if [e.get("fingerprint") for e in old] != [e.get("fingerprint") for e in new]:
            changes += pipeline_changes(old, new) or ["the pipeline changed"]
    elif old != new:
        changes += param_changes(old, new) or ["the pipeline changed"]
    return changes
