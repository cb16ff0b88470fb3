"""DocumentDataset: a partitioned corpus, a thin wrapper over a Dask dataframe.

``ds.df`` is the Dask dataframe; everything Dask offers works on it. The wrapper adds
curator-dask's readers (planned partitions, clear errors on bad input), atomic writers
and the drop counts that stages record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
from fsspec.core import url_to_fs

from curator_dask.dropped import get_dropped, sum_dropped
from curator_dask.io.files import JSONL_EXTENSIONS, PARQUET_EXTENSIONS, list_files
from curator_dask.io.warc import (
    HTML_CONTENT_TYPES,
    WARC_BLOCKSIZE,
    WARC_EXTENSIONS,
    WARC_SCHEMA,
    read_warc_partition,
)
from curator_dask.io.jsonl import (
    ENCODING_ERRORS,
    ON_BAD_LINES,
    filename_column,
    infer_jsonl_schema,
    read_jsonl_partition,
)
from curator_dask.io.parquet import infer_parquet_schema, read_parquet_partition
from curator_dask.io.planner import PartitionSpec, plan_partitions
from curator_dask.io.tables import check_backend, schema_with_overrides, to_frame
from curator_dask.io.writers import WriteSpec, prepare_output, write_partition

__all__ = ["DocumentDataset", "WriteResult"]

logger = logging.getLogger(__name__)


@dataclass
class WriteResult:
    """What a write produced: the files, and rows, bytes and drop counts in total."""

    path: str
    files: list[str]
    rows: int
    bytes: int
    dropped: dict[str, int] = field(default_factory=dict)
    partitions: list[dict] = field(default_factory=list, repr=False)


class _ReadPartition:
    """The task that reads one planned partition (pickled to workers with its options)."""

    def __init__(self, fmt: str, fs, schema: pa.Schema, options: dict):
        self.fmt, self.fs, self.schema, self.options = fmt, fs, schema, options

    def __call__(self, spec: PartitionSpec):
        if self.fmt == "jsonl":
            return read_jsonl_partition(spec, self.fs, self.schema, **self.options)
        if self.fmt == "warc":
            return read_warc_partition(spec, self.fs, **self.options)
        return read_parquet_partition(spec, self.fs, self.schema, **self.options)


class DocumentDataset:
    """A corpus as a Dask dataframe of documents, one row per document.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
        Partitions are pandas (Arrow-backed strings) or cuDF frames with a text column.

    Examples
    --------
    >>> import pandas as pd
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "b", "c"]}), npartitions=2)
    >>> ds.npartitions, len(ds.df)
    (2, 3)
    """

    def __init__(self, df: dd.DataFrame, *, plan: Sequence[PartitionSpec] | None = None):
        if not isinstance(df, dd.DataFrame):
            raise TypeError(
                f"DocumentDataset wraps a dask.dataframe.DataFrame, got {type(df).__name__}; "
                "use DocumentDataset.from_pandas for a pandas frame"
            )
        self.df = df
        # The partition plan the data was read with, kept while partitions map 1:1 to it.
        self.plan = list(plan) if plan is not None else None
        # For a dataset read from files: the callable that reads one PartitionSpec of
        # ``plan`` (executors stream partitions through stages with it). Not carried on.
        self.partition_reader = None

    def _derive(self, df: dd.DataFrame) -> DocumentDataset:
        keep_plan = self.plan is not None and df.npartitions == self.df.npartitions
        return DocumentDataset(df, plan=self.plan if keep_plan else None)

    @property
    def npartitions(self) -> int:
        return self.df.npartitions

    def __repr__(self) -> str:
        return f"DocumentDataset(npartitions={self.npartitions}, columns={list(self.df.columns)})"

    # -- reading ----------------------------------------------------------------------
    @classmethod
    def read_jsonl(
        cls,
        path: str | Sequence[str],
        *,
        blocksize: int | str | None = None,
        files_per_partition: int | None = None,
        columns: Sequence[str] | None = None,
        text_field: str = "text",
        add_filename: bool | str = False,
        input_meta: Mapping | None = None,
        backend: str = "pandas",
        on_bad_lines: str = "error",
        encoding_errors: str = "strict",
        storage_options: dict | None = None,
    ) -> DocumentDataset:
        """Read JSONL files (``.jsonl``/``.json``, optionally ``.gz``, ``.zst``, ``.bz2``).

        Parameters
        ----------
        path : str or list of str
            A directory (searched recursively), a glob, a file or a list of them; any
            fsspec URL (``memory://``, ``s3://`` with s3fs installed).
        blocksize : int or str, optional
            Target bytes per partition (default ``"256MiB"``). Small files are grouped,
            large uncompressed files split at line boundaries.
        files_per_partition : int, optional
            Whole files per partition instead of ``blocksize``; not both.
        columns : list of str, optional
            Columns to keep.
        text_field : str, default "text"
            The text column; a file without it is an error.
        add_filename : bool or str
            Add a column (``file_name``, or the given name) with each document's source
            file, relative to the input directory.
        input_meta : mapping, optional
            Column dtypes (``{"id": "int64", "text": "str"}``); otherwise inferred from
            the first rows of the first file.
        backend : {"pandas", "cudf"}
        on_bad_lines : {"error", "skip", "warn"}
            A malformed line raises an error naming the file and line, or is skipped and
            counted (``reader.bad_json_line`` in :meth:`dropped_counts`).
        encoding_errors : {"strict", "replace"}
            Invalid UTF-8 raises an error naming the file and line, or is replaced.
        storage_options : dict, optional
            Passed to fsspec.
        """
        if on_bad_lines not in ON_BAD_LINES:
            raise ValueError(f"on_bad_lines must be one of {ON_BAD_LINES}, got {on_bad_lines!r}")
        if encoding_errors not in ENCODING_ERRORS:
            raise ValueError(
                f"encoding_errors must be one of {ENCODING_ERRORS}, got {encoding_errors!r}"
            )
        check_backend(backend)
        fs, files = list_files(path, JSONL_EXTENSIONS, storage_options)
        plan = plan_partitions(files, files_per_partition=files_per_partition,
                               blocksize=blocksize, fmt="jsonl", fs=fs)
        schema = schema_with_overrides(infer_jsonl_schema(fs, files), input_meta, columns)
        if text_field not in schema.names and columns is None:
            schema = schema.append(pa.field(text_field, pa.string()))
        options = dict(text_field=text_field, add_filename=filename_column(add_filename),
                       on_bad_lines=on_bad_lines, encoding_errors=encoding_errors,
                       backend=backend)
        return cls._from_plan("jsonl", fs, plan, schema, options)

    @classmethod
    def read_parquet(
        cls,
        path: str | Sequence[str],
        *,
        blocksize: int | str | None = None,
        files_per_partition: int | None = None,
        columns: Sequence[str] | None = None,
        text_field: str = "text",
        add_filename: bool | str = False,
        input_meta: Mapping | None = None,
        backend: str = "pandas",
        storage_options: dict | None = None,
    ) -> DocumentDataset:
        """Read Parquet files; ``blocksize`` groups small files and splits by row groups.

        Parameters are those of :meth:`read_jsonl`, less the JSON-specific ones.
        """
        check_backend(backend)
        fs, files = list_files(path, PARQUET_EXTENSIONS, storage_options)
        plan = plan_partitions(files, files_per_partition=files_per_partition,
                               blocksize=blocksize, fmt="parquet", fs=fs)
        schema = schema_with_overrides(infer_parquet_schema(fs, files), input_meta, columns)
        options = dict(text_field=text_field, add_filename=filename_column(add_filename),
                       backend=backend)
        return cls._from_plan("parquet", fs, plan, schema, options)

    @classmethod
    def read_warc(
        cls,
        path: str | Sequence[str],
        *,
        blocksize: int | str | None = None,
        files_per_partition: int | None = None,
        content_types: Sequence[str] = HTML_CONTENT_TYPES,
        add_filename: bool | str = False,
        storage_options: dict | None = None,
    ) -> DocumentDataset:
        """Read the HTML responses of WARC files (``.warc``, ``.warc.gz``), one row each.

        Columns: ``url`` (``WARC-Target-URI``), ``warc_date`` (``WARC-Date``, as written),
        ``warc_record_id``, ``content_type`` (the payload's MIME type), ``charset`` (from
        the HTTP ``Content-Type`` header, or null) and ``html``: the HTTP payload as raw
        bytes, with transfer and content encodings (chunked, gzip, brotli) undone. The
        bytes are decoded by :class:`~curator_dask.stages.extract.HtmlExtractor`, which
        adds the ``text`` column. Partitions are pandas frames: cuDF has no bytes column
        for the HTML (``to_backend("cudf")`` after extraction moves the text to the GPU).

        Parameters
        ----------
        path : str or list of str
            A directory (searched recursively), a glob, a file or a list of them, on any
            fsspec filesystem: local, ``s3://`` (the ``s3`` extra), ``https://`` (the
            ``warc`` extra).
        blocksize : int or str, optional
            Bytes of the stored file per partition (default ``"64MiB"``, about a thousand
            pages and a minute of extraction on one core): a large plain WARC, or a gzip WARC
            with one member per record (as Common Crawl ships), is split into byte ranges
            at record boundaries; other compressed files are read whole.
        files_per_partition : int, optional
            Whole files per partition instead of ``blocksize``; not both.
        content_types : sequence of str
            The payload types kept (default HTML and XHTML). Response records of other
            types are counted under ``reader.warc_not_html`` in :meth:`dropped_counts`.
        add_filename : bool or str
            Add a column with each record's source file.
        storage_options : dict, optional
            Passed to fsspec.

        Examples
        --------
        >>> ds = DocumentDataset.read_warc("crawl/")  # doctest: +SKIP
        >>> list(ds.df.columns)  # doctest: +SKIP
        ['url', 'warc_date', 'warc_record_id', 'content_type', 'charset', 'html']
        """
        if files_per_partition is None and blocksize is None:
            blocksize = WARC_BLOCKSIZE
        fs, files = list_files(path, WARC_EXTENSIONS, storage_options)
        plan = plan_partitions(files, files_per_partition=files_per_partition,
                               blocksize=blocksize, fmt="warc", fs=fs)
        options = dict(content_types=tuple(content_types),
                       add_filename=filename_column(add_filename), backend="pandas")
        return cls._from_plan("warc", fs, plan, WARC_SCHEMA, options)

    @classmethod
    def _from_plan(cls, fmt, fs, plan, schema, options) -> DocumentDataset:
        full = schema
        if options["add_filename"]:
            full = schema.append(pa.field(options["add_filename"], pa.string()))
        meta = to_frame(full.empty_table(), options["backend"])
        reader = _ReadPartition(fmt, fs, schema, options)
        df = dd.from_map(reader, plan, meta=meta, label=f"read_{fmt}",
                         enforce_metadata=False, divisions=[None] * (len(plan) + 1))
        logger.info("planned %d partitions over %d bytes", len(plan),
                    sum(p.nbytes for p in plan))
        ds = cls(df, plan=plan)
        ds.partition_reader = reader
        return ds

    @classmethod
    def from_pandas(cls, df: pd.DataFrame, npartitions: int = 1) -> DocumentDataset:
        """A dataset from an in-memory pandas frame, split into ``npartitions``."""
        return cls(dd.from_pandas(df, npartitions=npartitions, sort=False))

    # -- writing ----------------------------------------------------------------------
    def to_parquet(self, path: str, *, write_to_filename: bool = False,
                   filename_field: str = "file_name", keep_filename_column: bool = False,
                   compression: str | None = "snappy", mode: str = "error",
                   storage_options: dict | None = None) -> WriteResult:
        """Write one Parquet file per partition (``part-00000.parquet``, ...).

        Parameters
        ----------
        write_to_filename : bool
            Write each document to a file named after its source file (needs
            ``add_filename`` when reading); names that would leave ``path`` are refused.
        mode : {"error", "overwrite", "append"}
            What to do when ``path`` already holds files.
        """
        return self._write(path, "parquet", compression, write_to_filename, filename_field,
                           keep_filename_column, mode, storage_options)

    def to_jsonl(self, path: str, *, compression: str | None = None,
                 write_to_filename: bool = False, filename_field: str = "file_name",
                 keep_filename_column: bool = False, mode: str = "error",
                 storage_options: dict | None = None) -> WriteResult:
        """Write one JSONL file per partition; ``compression`` is gzip, zstd or bz2.

        Other parameters are those of :meth:`to_parquet`.
        """
        return self._write(path, "jsonl", compression, write_to_filename, filename_field,
                           keep_filename_column, mode, storage_options)

    def _write(self, path, fmt, compression, write_to_filename, filename_field,
               keep_filename_column, mode, storage_options) -> WriteResult:
        fs, root = url_to_fs(path, **(storage_options or {}))
        if write_to_filename:
            if filename_field not in self.df.columns:
                raise KeyError(
                    f"write_to_filename needs the column {filename_field!r}; read with "
                    f"add_filename=True (columns: {list(self.df.columns)})"
                )
            self._check_whole_files()
        # Validate the format options before touching the output directory.
        spec = WriteSpec(path=root.rstrip("/") or root, fmt=fmt, compression=compression,
                         filename_field=filename_field if write_to_filename else None,
                         keep_filename_column=keep_filename_column)
        spec = replace(spec, first_index=prepare_output(fs, root, mode))
        token = dask.base.tokenize(self.df, spec)
        tasks = [
            dask.delayed(write_partition)(part, spec, i, fs, dask_key_name=f"write-{token}-{i}")
            for i, part in enumerate(self.df.to_delayed())
        ]
        stats = list(dask.compute(*tasks))
        files = sorted(f for s in stats for f in s["files"])
        return WriteResult(
            path=path, files=files, rows=sum(s["rows"] for s in stats),
            bytes=sum(s["bytes"] for s in stats),
            dropped=sum_dropped(s["dropped"] for s in stats), partitions=stats,
        )

    def _check_whole_files(self) -> None:
        if self.plan is None:
            return
        split = sorted({s.file.name for p in self.plan for s in p.slices if not s.whole})
        if split:
            raise ValueError(
                f"write_to_filename: {len(split)} source file(s) were split across partitions "
                f"by blocksize (first: {split[0]!r}), so each would be written twice. Read with "
                "files_per_partition=1, or a blocksize larger than the largest file."
            )

    # -- in memory ----------------------------------------------------------------------
    def persist(self) -> DocumentDataset:
        """Compute the partitions and keep them in (cluster) memory."""
        return self._derive(self.df.persist())

    def head(self, n: int = 5):
        """The first ``n`` documents (from the first partition)."""
        return self.df.head(n)

    def repartition(self, npartitions: int | None = None,
                    partition_size: int | str | None = None) -> DocumentDataset:
        """Change the number of partitions (``npartitions``) or their size in memory."""
        if (npartitions is None) == (partition_size is None):
            raise ValueError("give exactly one of npartitions or partition_size")
        if npartitions is not None:
            return DocumentDataset(self.df.repartition(npartitions=npartitions))
        return DocumentDataset(self.df.repartition(partition_size=partition_size))

    def to_backend(self, backend: str) -> DocumentDataset:
        """Move partitions to ``"pandas"`` (host) or ``"cudf"`` (GPU) frames."""
        check_backend(backend)
        return self._derive(self.df.to_backend(backend))

    def dropped_counts(self) -> dict[str, int]:
        """Documents dropped upstream, by reason, summed over partitions (computes)."""
        tasks = [dask.delayed(get_dropped)(part) for part in self.df.to_delayed()]
        return sum_dropped(dask.compute(*tasks))
