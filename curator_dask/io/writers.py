"""Write partitions: one file per partition, atomically, under deterministic names.

Each part is written under a hidden temporary name in the output directory and renamed
into place only when complete (:func:`~curator_dask.io.atomic.atomic_open`), so a crash
never leaves a half-written file that looks like a finished part (readers skip names
starting with ``.``).

The output contract
-------------------
A write goes to a path its run's :class:`~curator_dask.io.guard.OutputGuard` checked
(never on, in or around an input or another output of the run) and leased (one writer
at a time). :func:`prepare_output` then handles what the directory already holds, as
``mode`` says, and records a fresh manifest (:mod:`curator_dask.io.output_state`, which
also defines the project's own files):

Modes: ``"error"`` refuses a directory that holds anything but the project's leftovers
of a write that produced nothing; ``"overwrite"`` deletes the project's own files and
refuses (:class:`~curator_dask.io.errors.ForeignFilesError`, naming them) when anything
else is there; ``"overwrite_all"`` deletes everything in the directory, foreign files
included, and must be asked for explicitly; ``"append"`` deletes nothing but temporary
leftovers and numbers new parts after the existing ones.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

import pyarrow as pa
import pyarrow.parquet as pq

from curator_dask.backends import rows_where, to_host
from curator_dask.errors import InvalidArgumentError, NameNotFoundError
from curator_dask.io import atomic
from curator_dask.io.arrow_types import to_table
from curator_dask.io.errors import ForeignFilesError, OutputExistsError
from curator_dask.io.guard import GuardedPath
from curator_dask.io.json_lines import json_lines
from curator_dask.io.output_state import (
    MANIFEST,
    clear_directory,
    is_leftover,
    mark_part,
    own_files,
    part_index,
    part_name,
    read_manifest,
    remove_leftovers,
    remove_own_files,
    stale_pieces,
    write_manifest,
)
from curator_dask.io.rollover import FileSize, FileSizeError, FrameEncoded, output_pieces
from curator_dask.partition import Partition

__all__ = [
    "FORMATS",
    "MANIFEST",
    "MODES",
    "WriteSpec",
    "check_mode",
    "own_files",
    "part_name",
    "prepare_output",
    "read_manifest",
    "remove_leftovers",
    "write_part",
    "write_partition",
]

logger = logging.getLogger(__name__)

WriteMode = Literal["error", "overwrite", "overwrite_all", "append"]
MODES = get_args(WriteMode)
#: ``arrow`` (Arrow IPC files, uncompressed) is for the project's own intermediate data:
#: written at memory speed and read back as a memory map. ``encoded`` is a format whose
#: files a writer's encoder makes (Megatron's token files, see ``io/rollover.py``).
FORMATS = ("parquet", "jsonl", "arrow", "encoded")
COMPRESSIONS = {None: "", "gzip": ".gz", "zstd": ".zst", "bz2": ".bz2"}
_SOURCE_SUFFIX = re.compile(r"(\.(jsonl|json|ndjson|parquet|pq))?(\.(gz|zst|bz2|xz))?$",
                            re.IGNORECASE)


@dataclass(frozen=True)
class WriteSpec:
    """Where and how to write: shared by every partition's write task."""

    path: str
    fmt: str = "parquet"
    compression: str | None = None
    filename_field: str | None = None  # set for write_to_filename
    keep_filename_column: bool = False
    first_index: int = 0  # part numbering offset (append mode)
    storage_options: dict = field(default_factory=dict)
    #: The Arrow schema the data was read with: string columns are written with the
    #: type it records for them (see :func:`~curator_dask.io.tables.to_table`).
    schema: pa.Schema | None = None
    #: Cut each part into files of at most this size (io/rollover.py); None: one file.
    target_file_size: FileSize | None = None
    #: For fmt "encoded": turns a partition into its files (``encode(df)``, io/rollover.py).
    encoder: object = None

    def __post_init__(self):
        if self.fmt not in FORMATS:
            raise InvalidArgumentError(f"format must be one of {FORMATS}, got {self.fmt!r}")
        if (self.fmt == "encoded") != (self.encoder is not None):
            raise InvalidArgumentError(
                "an encoder goes with the format 'encoded', and only with it")
        if self.encoder is not None and self.filename_field is not None:
            raise InvalidArgumentError("an encoder writes its own files per part; "
                                       "write_to_filename is for Parquet and JSONL")
        object.__setattr__(self, "target_file_size", FileSize.parse(self.target_file_size))
        if self.target_file_size is not None and self.target_file_size.unit == "tokens" \
                and self.encoder is None:
            raise FileSizeError("target_file_size in tokens is for the tokenizing writers; "
                                "give this writer bytes ('256MiB') or documents")
        if self.target_file_size is not None and self.filename_field is not None:
            raise InvalidArgumentError("target_file_size cuts parts into files of a size, "
                                       "write_to_filename writes a file per source file: "
                                       "not both")
        allowed = {"jsonl": COMPRESSIONS, "parquet": (None, "snappy", "zstd", "gzip"),
                   "arrow": (None,), "encoded": (None,)}[self.fmt]
        if self.compression not in allowed:
            raise InvalidArgumentError(
                f"compression for {self.fmt} must be one of {list(allowed)}, "
                f"got {self.compression!r}"
            )

    @property
    def suffix(self) -> str:
        if self.fmt == "encoded":
            return ""  # the encoder names its files' suffixes
        if self.fmt in ("parquet", "arrow"):
            return "." + self.fmt
        return ".jsonl" + COMPRESSIONS[self.compression]


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`MODES`, else a ``ValueError`` listing them."""
    if mode not in MODES:
        raise InvalidArgumentError(
            f"mode must be one of {MODES}, got {mode!r}: 'overwrite' replaces only the "
            "project's own files, 'overwrite_all' everything in the directory"
        )
    return mode


def prepare_output(out: GuardedPath, mode: str, *, fingerprint=None) -> int:
    """Prepare the output directory ``out`` (a path its run's guard checked and leased);
    returns the first part index to use.

    In order: the mode is checked; the directory is handled as ``mode`` says (see the
    module docstring); a fresh manifest recording ``fingerprint`` (what the output is
    computed from; JSON) is written. Nothing is deleted before every check has passed.
    """
    check_mode(mode)
    fs, path = out.fs, out.path
    if fs.exists(path) and not fs.isdir(path):
        raise OutputExistsError(f"output path {path!r} is a file, not a directory")
    manifest = read_manifest(fs, path) if fs.exists(path) else None
    own, foreign = own_files(fs, path, manifest)
    kept_files: list[str] = []
    if mode == "overwrite_all":
        if fs.exists(path):
            clear_directory(fs, path)
    elif mode == "append":
        remove_leftovers(fs, path, manifest)
        kept_files = list((manifest or {}).get("files", []))
    elif own or foreign:
        if mode == "error" and (foreign or any(not is_leftover(name) for name in own)):
            raise OutputExistsError(
                f"output directory {path!r} is not empty ({len(own) + len(foreign)} "
                "files); pass mode='overwrite' to replace the parts of an earlier write "
                "or mode='append' to add parts"
            )
        if foreign:
            raise ForeignFilesError(path, foreign)
        remove_own_files(fs, path, own)
    atomic.make_dirs(fs, path)
    first_index = 0
    if mode == "append":
        names = [posixpath.basename(e) for e in fs.ls(path, detail=False)]
        indices = [i for i in map(part_index, names) if i is not None]
        first_index = max(indices) + 1 if indices else 0
    write_manifest(fs, path, first_index=first_index, fingerprint=fingerprint,
                   files=kept_files)
    return first_index


def _safe_relative_name(name: str, source_field: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"write_to_filename: empty file name in column {source_field!r}")
    normal = posixpath.normpath(name.replace("\\", "/"))
    if posixpath.isabs(normal) or normal == ".." or normal.startswith("../") or ":" in normal:
        raise InvalidArgumentError(
            f"write_to_filename: file name {name!r} in column {source_field!r} would be "
            "written outside the output directory; names must be relative paths inside it"
        )
    return normal


def _output_name(source_name: str, suffix: str) -> str:
    return _SOURCE_SUFFIX.sub("", source_name, count=1) + suffix


def _write_frame(df, fs, target: str, spec: WriteSpec) -> int:
    """Write one frame (pandas, cuDF or Arrow) to ``target`` as ``spec.fmt``, atomically;
    or content encoded already (an object with ``write_to(handle)``: JSONL lines cut by
    size, an encoder's files, see :mod:`curator_dask.io.rollover`). Returns the bytes
    written."""
    exclusive = spec.filename_field is not None
    compression = spec.compression if spec.fmt == "jsonl" else None
    try:
        # Every format writes the same Arrow table: the partition's values and types as
        # read (an Arrow table read as Arrow is written as it is).
        table = None if hasattr(df, "write_to") else to_table(df, spec.schema)
        with atomic.atomic_open(fs, target, exclusive=exclusive,
                                compression=compression) as handle:
            if table is None:
                df.write_to(handle)
            elif spec.fmt == "parquet":
                pq.write_table(table, handle, compression=spec.compression or "snappy")
            elif spec.fmt == "arrow":
                with pa.ipc.new_file(handle, table.schema) as out:
                    out.write_table(table)
            else:
                for chunk in json_lines(table):
                    handle.write(chunk)
    except FileExistsError:
        if not exclusive:
            raise
        raise OutputExistsError(
            f"write_to_filename: {target!r} already exists: the documents of one source "
            "file came from more than one partition (a blocksize smaller than the file, or "
            "a repartition). Read with files_per_partition=1 to keep each file whole."
        ) from None
    return fs.info(target).get("size") or 0


def write_partition(df, spec: WriteSpec, index: int, fs, *,
                    dropped: dict[str, int] | None = None) -> dict:
    """Write one partition; returns its stats (rows, bytes, files, and ``dropped``:
    the partition's drop counts and counters, as :func:`curator_dask.dropped.join_counts`
    joins them).

    ``df`` is a pandas or cuDF frame, or a ``pyarrow.Table`` (written without a pandas
    round trip).
    """
    counts = {reason: int(count) for reason, count in (dropped or {}).items()}
    stats = {"partition": index, "rows": len(df), "bytes": 0, "files": [],
             "dropped": counts}
    if spec.filename_field is None:
        part = spec.first_index + index
        encoded = (spec.encoder.encode(df) if spec.encoder is not None
                   else FrameEncoded.of(df, spec.fmt, spec.suffix, spec.schema))
        for name, content in output_pieces(encoded, part, spec.target_file_size):
            target = posixpath.join(spec.path, name)
            stats["bytes"] += _write_frame(content, fs, target, spec)
            stats["files"].append(target)
        if spec.target_file_size is not None:
            # An earlier attempt's pieces beyond this one's would hold its rows again.
            for stale in stale_pieces(fs, spec.path, part, stats["files"]):
                atomic.remove(fs, stale, missing_ok=True)
        for name, count in encoded.counts().items():
            counts[name] = counts.get(name, 0) + int(count)
        stats["rows"] = len(encoded)  # an encoder may drop (and count) documents
        return stats
    if spec.filename_field not in df.columns:
        raise NameNotFoundError(
            f"write_to_filename needs the column {spec.filename_field!r}; read with "
            f"add_filename=True (columns present: {list(df.columns)})"
        )
    names = df[spec.filename_field]
    for name in sorted(set(to_host(names))):
        relative = _safe_relative_name(name, spec.filename_field)
        group = rows_where(df, names == name)
        if not spec.keep_filename_column:
            group = group.drop(columns=[spec.filename_field])
        target = posixpath.join(spec.path, _output_name(relative, spec.suffix))
        atomic.make_dirs(fs, posixpath.dirname(target))
        stats["bytes"] += _write_frame(group, fs, target, spec)
        stats["files"].append(target)
    return stats


def write_part(data, spec: WriteSpec, fs, input_partitions: Sequence[int], *,
               dropped: dict[str, int] | None = None, source: str | None = None,
               write=write_partition) -> dict:
    """Task body of every write: one part, then its completion marker; the part's stats.

    The part is named after the first input partition it holds. The marker
    (:func:`~curator_dask.io.output_state.mark_part`) is written after the part's
    atomic rename, so a marker always means a complete part, and it lists the files
    written, which makes them the project's; a task that dies between the two leaves a
    complete part without a marker, which a resume rewrites (same name, same content).
    ``data`` is a :class:`~curator_dask.partition.Partition` (written with its counts), or
    a frame or ``pyarrow.Table`` whose counts ``dropped`` gives. ``source`` identifies
    what the part was computed from (see
    :func:`~curator_dask.io.output_state.completed_parts`); ``write`` writes the part.
    """
    if isinstance(data, Partition):
        data, dropped = data.frame, data.counts
    index = input_partitions[0]
    stats = write(data, spec, index, fs, dropped=dropped)
    stats["input_partitions"] = list(input_partitions)
    stats["source"] = source
    mark_part(fs, spec.path, spec.first_index + index, stats)
    return stats
