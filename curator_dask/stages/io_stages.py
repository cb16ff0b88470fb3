"""Readers and writers as pipeline stages, built on the io layer.

A reader stage plans partitions on the client (the io planner) and reads one planned
partition per task (``read_jsonl_partition``/``read_parquet_partition``); a writer
stage writes one partition per task through ``write_partition``: atomically, under a
deterministic name (``part-00042.parquet`` for input partition 42).

After each part is renamed into place the writer records a completion marker
(``.part-00042.done``, hidden from readers) holding the part's stats. A rerun with
``resume=True`` skips input partitions whose marker exists, and a manifest
(``.curator-output.json``) ties the output directory to the input it was written from,
so a resume against different input is refused instead of mixing two datasets.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import dask
from fsspec.core import url_to_fs

from curator_dask.dataset import DocumentDataset
from curator_dask.io.writers import WriteSpec, part_name, prepare_output, write_partition
from curator_dask.resources import Resources

__all__ = ["ReaderStage", "JsonlReader", "ParquetReader", "WarcReader", "WriterStage",
           "JsonlWriter", "ParquetWriter", "PreparedOutput", "write_part"]

MANIFEST = ".curator-output.json"
MARKER_SUFFIX = ".done"


# -- readers ---------------------------------------------------------------------------

class ReaderStage:
    """Base of reader stages: the first stage of a pipeline.

    The plan is made once, on the client, when an executor first asks for
    :meth:`dataset`; each task then reads one planned partition.
    """

    name: str = "read"
    resources: Resources = Resources(cpus=1)

    def __init__(self, path: str | Sequence[str], **options):
        self.path = path
        self.options = options
        self._dataset: DocumentDataset | None = None

    def _read(self) -> DocumentDataset:
        raise NotImplementedError

    def dataset(self) -> DocumentDataset:
        """The lazy dataset (with its partition plan and per-partition reader)."""
        if self._dataset is None:
            self._dataset = self._read()
        return self._dataset

    @property
    def stage_name(self) -> str:
        return self.name

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

    def __init__(self, path: str | Sequence[str], *, blocksize: int | str | None = None,
                 files_per_partition: int | None = None, columns: Sequence[str] | None = None,
                 text_field: str = "text", add_filename: bool | str = False,
                 input_meta: Mapping | None = None, backend: str = "pandas",
                 on_bad_lines: str = "error", encoding_errors: str = "strict",
                 storage_options: dict | None = None):
        super().__init__(path, blocksize=blocksize, files_per_partition=files_per_partition,
                         columns=columns, text_field=text_field, add_filename=add_filename,
                         input_meta=input_meta, backend=backend, on_bad_lines=on_bad_lines,
                         encoding_errors=encoding_errors, storage_options=storage_options)

    def _read(self) -> DocumentDataset:
        return DocumentDataset.read_jsonl(self.path, **self.options)


class ParquetReader(ReaderStage):
    """Read Parquet: the options of :meth:`DocumentDataset.read_parquet`."""

    name = "read_parquet"

    def __init__(self, path: str | Sequence[str], *, blocksize: int | str | None = None,
                 files_per_partition: int | None = None, columns: Sequence[str] | None = None,
                 text_field: str = "text", add_filename: bool | str = False,
                 input_meta: Mapping | None = None, backend: str = "pandas",
                 storage_options: dict | None = None):
        super().__init__(path, blocksize=blocksize, files_per_partition=files_per_partition,
                         columns=columns, text_field=text_field, add_filename=add_filename,
                         input_meta=input_meta, backend=backend, storage_options=storage_options)

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
    """An output directory made ready for one run: what each write task needs."""

    fs: object
    spec: WriteSpec

    def marker_path(self, index: int) -> str:
        return posixpath.join(self.spec.path,
                              "." + part_name(self.spec.first_index + index, MARKER_SUFFIX))

    def completed(self) -> dict[int, dict]:
        """Stats of the parts already complete, by (first) input partition index."""
        done: dict[int, dict] = {}
        prefix = "." + "part-"
        for entry in self.fs.ls(self.spec.path, detail=False):
            base = posixpath.basename(entry)
            if base.startswith(prefix) and base.endswith(MARKER_SUFFIX):
                with self.fs.open(entry, "rb") as handle:
                    stats = json.loads(handle.read())
                for index in stats["input_partitions"]:
                    done[index] = stats
        return done


class WriterStage:
    """Base of writer stages: the last stage of a pipeline, one output part per task.

    Parameters
    ----------
    path : str
        Output directory (any fsspec URL).
    mode : {"error", "overwrite", "append"}, default "error"
        What to do when ``path`` already holds files; see
        :meth:`DocumentDataset.to_parquet`. A run with ``resume=True`` keeps the parts
        of the earlier run instead.
    write_to_filename, filename_field, keep_filename_column
        Write each document to a file named after its source file.
    storage_options : dict, optional
    """

    name = "write"
    fmt = "parquet"
    resources: Resources = Resources(cpus=1)

    def __init__(self, path: str, *, compression: str | None = None, mode: str = "error",
                 write_to_filename: bool = False, filename_field: str = "file_name",
                 keep_filename_column: bool = False, storage_options: dict | None = None):
        self.path = str(path)
        self.mode = mode
        self.storage_options = dict(storage_options or {})
        # Validates format and compression now, not on the first worker.
        self.spec = WriteSpec(path=self.path, fmt=self.fmt, compression=compression,
                              filename_field=filename_field if write_to_filename else None,
                              keep_filename_column=keep_filename_column)

    @property
    def stage_name(self) -> str:
        return self.name

    def prepare(self, input_token: str, resume: bool = False) -> PreparedOutput:
        """Create or check the output directory on the client, before any task runs.

        ``input_token`` identifies the input plan; with ``resume=True`` an output
        directory written from another input is refused.
        """
        fs, root = url_to_fs(self.path, **self.storage_options)
        root = root.rstrip("/") or root
        manifest = posixpath.join(root, MANIFEST)
        if resume and fs.exists(manifest):
            with fs.open(manifest, "rb") as handle:
                saved = json.loads(handle.read())
            if saved.get("input") != input_token:
                raise ValueError(
                    f"cannot resume into {self.path!r}: it was written from different input "
                    "(another file listing or partitioning). Run without resume=True and "
                    "with mode='overwrite' to start over."
                )
            return PreparedOutput(fs, replace(self.spec, path=root,
                                              first_index=saved["first_index"]))
        first_index = prepare_output(fs, root, self.mode)
        with fs.open(manifest, "wb") as handle:
            handle.write(json.dumps({"input": input_token, "first_index": first_index}).encode())
        return PreparedOutput(fs, replace(self.spec, path=root, first_index=first_index))

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
    marker = output.marker_path(index)
    tmp = f"{marker}.tmp-{uuid.uuid4().hex}"
    with output.fs.open(tmp, "wb") as handle:
        handle.write(json.dumps(stats).encode("utf-8"))
    output.fs.mv(tmp, marker)
    return stats


def plan_token(ds: DocumentDataset) -> str:
    """A fingerprint of the input plan (files, sizes, partitioning)."""
    return dask.base.tokenize([repr(p) for p in ds.plan]) if ds.plan is not None else ""
