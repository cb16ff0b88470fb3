"""NeMo Curator's file helpers, over curator-dask's readers and writer.

NeMo Curator 0.x scripts list files with ``get_all_files_paths_under``, read them with
``read_data`` and split a dataset by a metadata column with ``separate_by_metadata``.
The same calls work here: listing through fsspec, reading through
:meth:`~curator_dask.DocumentDataset.read_jsonl` / ``read_parquet`` (the partition
planner, errors naming file and line), and writing through the project's writer (atomic
parts and a manifest, never on top of the input).

Examples
--------
>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> for name in ("a.jsonl", "b.txt"):
...     _ = open(os.path.join(root, name), "w").write('{"text": "x"}\\n')
>>> [os.path.basename(p) for p in get_all_files_paths_under(root, keep_extensions="jsonl")]
['a.jsonl']
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

import dask
import dask.dataframe as dd
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from curator_dask.dataset import DocumentDataset, WriteResult
from curator_dask.errors import InvalidArgumentError
from curator_dask.io.tables import Backend

__all__ = ["get_all_files_paths_under", "read_data", "separate_by_metadata"]

#: The column separate_by_metadata names each document's output file in (dropped).
_TARGET = "_curator_separate_target"
#: The directory of documents whose metadata value is missing.
MISSING_VALUE_DIR = "__missing__"


def get_all_files_paths_under(root: str, recurse_subdirectories: bool = True,
                              followlinks: bool = False,
                              keep_extensions: str | Sequence[str] | None = None,
                              storage_options: dict | None = None) -> list[str]:
    """The files under ``root`` (any fsspec URL), sorted; only those ending in
    ``keep_extensions`` (``"jsonl"`` or ``[".jsonl", ".json"]``) when given.

    ``followlinks`` is accepted for NeMo Curator's scripts; fsspec lists what the
    filesystem shows.
    """
    fs, path = url_to_fs(root, **(storage_options or {}))
    found = fs.find(path) if recurse_subdirectories else \
        [p for p in fs.ls(path, detail=False) if fs.isfile(p)]
    if keep_extensions is not None:
        wanted = [keep_extensions] if isinstance(keep_extensions, str) else list(keep_extensions)
        suffixes = tuple("." + e.lstrip(".") for e in wanted)
        found = [p for p in found if p.endswith(suffixes)]
    return sorted(fs.unstrip_protocol(p) if fs.protocol not in ("file", ("file", "local"))
                  else p for p in found)


def read_data(input_files: str | Sequence[str], file_type: str = "jsonl",
              backend: Backend = "pandas", blocksize: int | str | None = None,
              files_per_partition: int | None = 1, add_filename: bool | str = False,
              input_meta: dict | None = None, columns: Sequence[str] | None = None,
              **options) -> dd.DataFrame:
    """The Dask dataframe of ``input_files`` (``file_type`` ``"jsonl"`` or ``"parquet"``),
    read as :meth:`~curator_dask.DocumentDataset.read_jsonl` reads it; NeMo Curator's
    ``read_data``. Wrap it in a :class:`~curator_dask.DocumentDataset` as NeMo Curator
    scripts do (reading with ``DocumentDataset.read_jsonl`` directly keeps the input's
    paths, which writers check outputs against)."""
    if blocksize is not None:
        files_per_partition = None
    kwargs = dict(blocksize=blocksize, files_per_partition=files_per_partition,
                  add_filename=add_filename, columns=columns, backend=backend, **options)
    if file_type == "jsonl":
        return DocumentDataset.read_jsonl(input_files, input_meta=input_meta, **kwargs).df
    if file_type == "parquet":
        return DocumentDataset.read_parquet(input_files, input_meta=input_meta, **kwargs).df
    raise InvalidArgumentError(
        f"read_data: file_type must be 'jsonl' or 'parquet', got {file_type!r} "
        "(curator-dask does not read pickle files)")


def _with_target(df, metadata_field: str, suffix: str, partition_info=None):
    number = partition_info["number"] if partition_info else 0
    values = df[metadata_field].astype("string").fillna(MISSING_VALUE_DIR)
    return df.assign(**{_TARGET: values + f"/part-{number:05d}{suffix}"})


def separate_by_metadata(input_data, output_dir: str, metadata_field: str,
                         remove_metadata: bool = False, output_type: str = "jsonl",
                         include_values: Sequence | None = None,
                         exclude_values: Sequence | None = None, **options):
    """Write the documents of ``input_data`` under ``output_dir/<value>/``, one directory
    per value of ``metadata_field``; NeMo Curator's ``separate_by_metadata``.

    ``input_data`` is a Dask dataframe, a :class:`~curator_dask.DocumentDataset` or a
    path read as JSONL. Each partition's documents of one value go to
    ``<value>/part-<partition>.<output_type>`` (documents without a value to
    ``__missing__/``), through the project's writer. The writing happens at once; the
    return value is a ``dask.delayed`` of ``{value: documents}`` for scripts that call
    ``.compute()`` on it, as NeMo Curator's did. Other keywords go to the writer
    (``mode=``, ``storage_options=``).
    """
    if isinstance(input_data, str):
        ds = DocumentDataset.read_jsonl(input_data)
    elif isinstance(input_data, DocumentDataset):
        ds = input_data
    else:
        ds = DocumentDataset(input_data)
    df = ds.df
    if include_values is not None:
        df = df[df[metadata_field].isin(list(include_values))]
    if exclude_values is not None:
        df = df[~df[metadata_field].isin(list(exclude_values))]
    suffix = {"jsonl": ".jsonl", "parquet": ".parquet"}.get(output_type)
    if suffix is None:
        raise InvalidArgumentError(
            f"separate_by_metadata: output_type must be 'jsonl' or 'parquet', "
            f"got {output_type!r}")
    meta = df._meta.assign(**{_TARGET: df._meta[metadata_field].astype("string")})
    targeted = df.map_partitions(_with_target, metadata_field, suffix, meta=meta)
    if remove_metadata:
        targeted = targeted.drop(columns=[metadata_field])
    out = ds.with_frames(targeted)
    write = out.to_jsonl if output_type == "jsonl" else out.to_parquet
    written: WriteResult = write(output_dir, write_to_filename=True, filename_field=_TARGET,
                                 **options)
    # Counted from what was written (the files' rows), not by computing the input again.
    fs, root = url_to_fs(output_dir, **(options.get("storage_options") or {}))
    counts: dict[str, int] = {}
    for path in written.files:
        # The writer names its files under the root url_to_fs gives, protocol stripped.
        value = posixpath.relpath(path, root.rstrip("/")).split("/")[0]
        counts[value] = counts.get(value, 0) + _rows(fs, path, output_type)
    return dask.delayed(counts)


def _rows(fs, path: str, output_type: str) -> int:
    if output_type == "parquet":
        with fs.open(path, "rb") as handle:
            return pq.ParquetFile(handle).metadata.num_rows
    with fs.open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
