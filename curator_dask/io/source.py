"""A planned input: the partitions a reader will read, and how it reads one of them.

Reading files is two steps, made once each:

1. **Plan**, on the client: list the files, choose the blocksize, cut the files into
   partitions (:mod:`curator_dask.io.planner`) and settle the schema. :func:`plan_jsonl`,
   :func:`plan_parquet` and :func:`plan_warc` do it and return a :class:`PartitionSource`.
2. **Read** one planned partition, on a worker: :class:`PartitionReader`, the one place
   that dispatches on the format, reads a :class:`~curator_dask.io.partitions.PartitionSpec`
   into a frame (and the rows it skipped, by reason).

Everything that reads files goes through a source: ``DocumentDataset.read_jsonl`` (and
its siblings) build their Dask dataframe from it, the pipeline's reader stages hand it
to the executors, which submit one read per planned partition, and the dedup workflows
read Arrow tables through its reader.

Examples
--------
>>> import json, tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "a.jsonl").write_text(json.dumps({"text": "hello"}) + "\\n")
>>> source = plan_jsonl(str(folder))
>>> len(source.plan), list(source.meta.columns)
(1, ['text'])
>>> source.reader(source.plan[0])["text"].tolist()
['hello']
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import dask
import pyarrow as pa

from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.io.arrow_types import to_frame
from curator_dask.io.files import JSONL_EXTENSIONS, PARQUET_EXTENSIONS, list_files
from curator_dask.io.identity import digest, plan_identity
from curator_dask.io.jsonl import (
    ENCODING_ERRORS,
    ON_BAD_LINES,
    EncodingErrors,
    OnBadLines,
    filename_column,
    infer_jsonl_schema,
    read_jsonl_partition,
    read_jsonl_table,
)
from curator_dask.io.overlap import InputPaths, input_paths
from curator_dask.io.parquet import (
    infer_parquet_schema,
    read_parquet_partition,
    read_parquet_table,
    stored_rows,
)
from curator_dask.io.planner import PartitionSpec, plan_partitions, resolve_blocksize
from curator_dask.io.tables import (
    Backend,
    check_backend,
    schema_with_overrides,
    with_text_column,
)
from curator_dask.io.warc import (
    HTML_CONTENT_TYPES,
    WARC_BLOCKSIZE,
    WARC_EXTENSIONS,
    WARC_SCHEMA,
    read_warc_partition,
)
from curator_dask.partition import PlannedRead

__all__ = ["PartitionReader", "PartitionSource", "plan_jsonl", "plan_parquet", "plan_warc"]

logger = logging.getLogger(__name__)


class PartitionReader:
    """Reads one planned partition of files: the task a read runs, pickled to workers
    with its options (never the plan).

    Parameters
    ----------
    fmt : {"jsonl", "parquet", "warc"}
    fs : fsspec filesystem
    schema : pyarrow.Schema
        The schema the plan settled (without the file name column).
    options : dict
        The format's read options (``backend``, ``text_field``, ``add_filename``, ...).
    """

    def __init__(self, fmt: str, fs, schema: pa.Schema, options: dict):
        self.fmt, self.fs, self.schema, self.options = fmt, fs, schema, options

    def __call__(self, spec: PartitionSpec):
        """The partition as a frame (pandas or cuDF, as ``backend`` says)."""
        if self.fmt == "jsonl":
            return read_jsonl_partition(spec, self.fs, self.schema, **self.options)
        if self.fmt == "warc":
            return read_warc_partition(spec, self.fs, **self.options)
        return read_parquet_partition(spec, self.fs, self.schema, **self.options)

    def table(self, spec: PartitionSpec) -> tuple[pa.Table, dict[str, int]]:
        """The partition as an Arrow table, and the rows the reader skipped by reason:
        for work that stays in Arrow from the reader to the writer."""
        options = {k: v for k, v in self.options.items() if k != "backend"}
        if self.fmt == "jsonl":
            return read_jsonl_table(spec, self.fs, self.schema, **options)
        return read_parquet_table(spec, self.fs, self.schema, **options)

    @property
    def backend(self) -> str:
        return self.options.get("backend", "pandas")


@dataclass
class PartitionSource:
    """A planned input: the plan, the reader of one planned partition, and what the
    partitions hold.

    Attributes
    ----------
    reader : callable
        ``reader(plan[i])`` reads partition ``i`` into a frame.
    plan : list
        One entry per partition, each with an ``index`` (a
        :class:`~curator_dask.io.partitions.PartitionSpec` for files).
    meta : DataFrame
        An empty frame with the partitions' columns and dtypes.
    sources : InputPaths, optional
        Where the partitions are read from: outputs must keep clear of it.
    schema : pyarrow.Schema, optional
        The Arrow schema of the partitions (writers give string columns its types).
    blocksize : int, optional
        Bytes per partition the plan was made with (None for ``files_per_partition``).
    fs : fsspec filesystem, optional
        The filesystem of the planned files, whose identity :meth:`identity` records
        (None for a plan of something other than files).
    label : str
        The prefix of the read tasks' keys (``read_jsonl``, ...).
    steps : tuple
        Steps run on each partition after reading it, in the same task (see
        :class:`~curator_dask.partition.PlannedRead`): a dataset derived from a planned
        input streams from it this way.
    """

    reader: object
    plan: list
    meta: object
    sources: InputPaths | None = None
    schema: pa.Schema | None = None
    blocksize: int | None = None
    fs: object = None
    label: str = "read"
    steps: tuple = ()
    _identity: dict | None = field(default=None, repr=False)

    @property
    def npartitions(self) -> int:
        return len(self.plan)

    @property
    def max_partition_bytes(self) -> int | None:
        """The largest planned partition's bytes (None when the plan does not say)."""
        sizes = [p.nbytes for p in self.plan if hasattr(p, "nbytes")]
        return max(sizes) if sizes else None

    @property
    def read(self) -> PlannedRead:
        """The task that reads one planned partition into a
        :class:`~curator_dask.partition.Partition` and runs :attr:`steps` on it."""
        return PlannedRead(self.reader, self.steps)

    def most_rows(self) -> int | None:
        """The most rows the partitions can hold, known without reading them: for Parquet
        files read with no step since, the rows their footers record (a filter or a
        column choice only lowers the count); None where only reading would tell."""
        if (isinstance(self.reader, PartitionReader) and self.reader.fmt == "parquet"
                and not self.steps and self.fs is not None):
            return stored_rows(self.fs, self.plan)
        return None

    def identity(self) -> dict:
        """What the partitions are read from: for files, a token of the plan and every
        file's identity (size, modification time, checksum, a hash of its first and last
        blocks; :mod:`curator_dask.io.identity`), otherwise a token of the plan. Made
        once: resume and caches compare it."""
        if self._identity is None:
            if self.fs is not None:
                self._identity = plan_identity(self.fs, self.plan)
            else:
                self._identity = {"plan": dask.base.tokenize([repr(p) for p in self.plan])}
        return self._identity

    def token(self) -> str:
        """A short hash of :meth:`identity`: what a part written from this input records."""
        return digest(self.identity())

    def content_token(self) -> str:
        """:meth:`token` without the files' modification times: the same for input
        written again with the same bytes (a barrier's input, recomputed by a rerun)."""
        identity = self.identity()
        if "files" in identity:
            identity = {**identity, "files": [[f[0], f[1], *f[3:]] for f in identity["files"]]}
        return digest(identity)


def check_text_cast(text_cast) -> None:
    if not isinstance(text_cast, bool):
        raise ArgumentTypeError(f"text_cast must be True or False, got {text_cast!r}")


def plan_jsonl(path: str | Sequence[str], *, blocksize: int | str | None = None,
               files_per_partition: int | None = None, columns: Sequence[str] | None = None,
               text_field: str | None = "text", add_filename: bool | str = False,
               input_meta: Mapping | None = None, backend: Backend = "pandas",
               on_bad_lines: OnBadLines = "error", encoding_errors: EncodingErrors = "strict",
               text_cast: bool = False, storage_options: dict | None = None
               ) -> PartitionSource:
    """Plan reading JSONL files; the options are those of
    :meth:`curator_dask.DocumentDataset.read_jsonl`."""
    if on_bad_lines not in ON_BAD_LINES:
        raise InvalidArgumentError(
            f"on_bad_lines must be one of {ON_BAD_LINES}, got {on_bad_lines!r}")
    if encoding_errors not in ENCODING_ERRORS:
        raise InvalidArgumentError(
            f"encoding_errors must be one of {ENCODING_ERRORS}, got {encoding_errors!r}"
        )
    check_text_cast(text_cast)
    check_backend(backend)
    fs, files, plan, sources, block = _plan_files(path, "jsonl", JSONL_EXTENSIONS, blocksize,
                                                  files_per_partition, storage_options)
    inferred = infer_jsonl_schema(
        fs, files, settled={text_field, *(input_meta or {})}, columns=columns,
        on_conflict="error" if on_bad_lines == "error" else "keep",
    )
    schema = with_text_column(schema_with_overrides(inferred, input_meta, columns),
                              text_field, columns is not None)
    options = dict(text_field=text_field, add_filename=filename_column(add_filename),
                   on_bad_lines=on_bad_lines, encoding_errors=encoding_errors,
                   text_cast=text_cast, typed=tuple(input_meta or ()),
                   columns_chosen=columns is not None, backend=backend)
    return _files_source("jsonl", fs, plan, schema, options, sources, block)


def plan_parquet(path: str | Sequence[str], *, blocksize: int | str | None = None,
                 files_per_partition: int | None = None, columns: Sequence[str] | None = None,
                 text_field: str | None = "text", add_filename: bool | str = False,
                 input_meta: Mapping | None = None, backend: Backend = "pandas",
                 text_cast: bool = False, storage_options: dict | None = None
                 ) -> PartitionSource:
    """Plan reading Parquet files; the options are those of
    :meth:`curator_dask.DocumentDataset.read_parquet`."""
    check_text_cast(text_cast)
    check_backend(backend)
    fs, files, plan, sources, block = _plan_files(path, "parquet", PARQUET_EXTENSIONS,
                                                  blocksize, files_per_partition,
                                                  storage_options)
    inferred = infer_parquet_schema(fs, files, settled={text_field, *(input_meta or {})},
                                    columns=columns)
    schema = with_text_column(schema_with_overrides(inferred, input_meta, columns),
                              text_field, True)
    options = dict(text_field=text_field, add_filename=filename_column(add_filename),
                   text_cast=text_cast, typed=tuple(input_meta or ()),
                   columns_chosen=columns is not None, backend=backend)
    return _files_source("parquet", fs, plan, schema, options, sources, block)


def plan_warc(path: str | Sequence[str], *, blocksize: int | str | None = None,
              files_per_partition: int | None = None,
              content_types: Sequence[str] = HTML_CONTENT_TYPES,
              add_filename: bool | str = False, storage_options: dict | None = None
              ) -> PartitionSource:
    """Plan reading the HTML responses of WARC files; the options are those of
    :meth:`curator_dask.DocumentDataset.read_warc`."""
    if files_per_partition is None and blocksize is None:
        blocksize = WARC_BLOCKSIZE
    fs, _, plan, sources, _ = _plan_files(path, "warc", WARC_EXTENSIONS, blocksize,
                                          files_per_partition, storage_options)
    options = dict(content_types=tuple(content_types),
                   add_filename=filename_column(add_filename), backend="pandas")
    return _files_source("warc", fs, plan, WARC_SCHEMA, options, sources)


def _plan_files(path, fmt: str, extensions, blocksize, files_per_partition,
                storage_options) -> tuple:
    """``(fs, files, plan, sources, blocksize)``: the files of ``path`` a reader of
    ``fmt`` reads, cut into partitions by ``files_per_partition`` or ``blocksize``
    (resolved to bytes, or chosen from the data when None or ``"auto"``; a WARC
    blocksize is taken as given)."""
    fs, files = list_files(path, extensions, storage_options)
    block = blocksize if fmt == "warc" else resolve_blocksize(
        files, files_per_partition=files_per_partition, blocksize=blocksize)
    plan = plan_partitions(files, files_per_partition=files_per_partition, blocksize=block,
                           fmt=fmt, fs=fs)
    sources = input_paths(path, storage_options, files=[f.path for f in files])
    return fs, files, plan, sources, block


def _files_source(fmt: str, fs, plan: list, schema: pa.Schema, options: dict,
                  sources: InputPaths, blocksize: int | None = None) -> PartitionSource:
    full = schema
    if options["add_filename"]:
        full = schema.append(pa.field(options["add_filename"], pa.string()))
    logger.info("planned %d partitions over %d bytes", len(plan), sum(p.nbytes for p in plan))
    return PartitionSource(PartitionReader(fmt, fs, schema, options), list(plan),
                           meta=to_frame(full.empty_table(), options["backend"]),
                           sources=sources, schema=full, blocksize=blocksize, fs=fs,
                           label=f"read_{fmt}")
