"""Write partitions: one file per partition, atomically, under deterministic names.

Each part is written under a hidden temporary name in the output directory and renamed
into place only when complete, so a crash never leaves a half-written file that looks
like a finished part (readers skip names starting with ``.``).
"""

from __future__ import annotations

import posixpath
import re
import uuid
from dataclasses import dataclass, field

from curator_dask.dropped import get_counts

__all__ = ["WriteSpec", "prepare_output", "write_partition", "part_name", "MODES", "FORMATS"]

MODES = ("error", "overwrite", "append")
FORMATS = ("parquet", "jsonl")
COMPRESSIONS = {None: "", "gzip": ".gz", "zstd": ".zst", "bz2": ".bz2"}
_PART = re.compile(r"^part-(\d+)\.")
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

    def __post_init__(self):
        if self.fmt not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {self.fmt!r}")
        allowed = COMPRESSIONS if self.fmt == "jsonl" else (None, "snappy", "zstd", "gzip")
        if self.compression not in allowed:
            raise ValueError(
                f"compression for {self.fmt} must be one of {list(allowed)}, "
                f"got {self.compression!r}"
            )

    @property
    def suffix(self) -> str:
        if self.fmt == "parquet":
            return ".parquet"
        return ".jsonl" + COMPRESSIONS[self.compression]


def part_name(index: int, suffix: str) -> str:
    """``part-00042.parquet``: zero-padded so names sort in partition order."""
    return f"part-{index:05d}{suffix}"


def prepare_output(fs, path: str, mode: str) -> int:
    """Create or check the output directory; returns the first part index to use.

    ``mode="error"`` refuses a directory that holds files, ``"overwrite"`` empties it
    first, ``"append"`` keeps what is there and numbers new parts after existing ones.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    path = fs._strip_protocol(path)
    if fs.exists(path) and not fs.isdir(path):
        raise FileExistsError(f"output path {path!r} is a file, not a directory")
    existing = fs.ls(path, detail=False) if fs.exists(path) else []
    if existing and mode == "error":
        raise FileExistsError(
            f"output directory {path!r} is not empty ({len(existing)} entries); pass "
            "mode='overwrite' to replace its contents or mode='append' to add parts"
        )
    if existing and mode == "overwrite":
        for entry in existing:
            fs.rm(entry, recursive=True)
    fs.makedirs(path, exist_ok=True)
    if mode != "append":
        return 0
    indices = [int(m.group(1)) for e in existing if (m := _PART.match(posixpath.basename(e)))]
    return max(indices) + 1 if indices else 0


def _safe_relative_name(name: str, source_field: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"write_to_filename: empty file name in column {source_field!r}")
    normal = posixpath.normpath(name.replace("\\", "/"))
    if posixpath.isabs(normal) or normal == ".." or normal.startswith("../") or ":" in normal:
        raise ValueError(
            f"write_to_filename: file name {name!r} in column {source_field!r} would be "
            "written outside the output directory; names must be relative paths inside it"
        )
    return normal


def _output_name(source_name: str, suffix: str) -> str:
    return _SOURCE_SUFFIX.sub("", source_name, count=1) + suffix


def _write_frame(df, fs, target: str, spec: WriteSpec) -> int:
    tmp = posixpath.join(posixpath.dirname(target),
                         f".{posixpath.basename(target)}.tmp-{uuid.uuid4().hex}")
    try:
        if spec.fmt == "parquet":
            with fs.open(tmp, "wb") as handle:
                df.to_parquet(handle, index=False, compression=spec.compression or "snappy")
        else:
            # cuDF frames are written through pandas: one JSON writer for both backends.
            frame = df.to_pandas() if hasattr(df, "to_pandas") else df
            with fs.open(tmp, "wb", compression=spec.compression) as handle:
                if len(frame):
                    text = frame.to_json(orient="records", lines=True, force_ascii=False)
                    handle.write(text.encode("utf-8"))
                    if not text.endswith("\n"):
                        handle.write(b"\n")
    except BaseException:
        if fs.exists(tmp):
            fs.rm(tmp)
        raise
    nbytes = fs.info(tmp).get("size") or 0
    if spec.filename_field and fs.exists(target):
        fs.rm(tmp)
        raise FileExistsError(
            f"write_to_filename: {target!r} already exists: the documents of one source "
            "file came from more than one partition (a blocksize smaller than the file, or "
            "a repartition). Read with files_per_partition=1 to keep each file whole."
        )
    fs.mv(tmp, target)
    return nbytes


def write_partition(df, spec: WriteSpec, index: int, fs) -> dict:
    """Write one partition; returns its stats (rows, bytes, files, drop counts and
    counters, see :mod:`curator_dask.dropped`)."""
    stats = {"partition": index, "rows": len(df), "bytes": 0, "files": [],
             "dropped": get_counts(df)}
    if spec.filename_field is None:
        target = posixpath.join(spec.path, part_name(spec.first_index + index, spec.suffix))
        stats["bytes"] = _write_frame(df, fs, target, spec)
        stats["files"].append(target)
        return stats
    if spec.filename_field not in df.columns:
        raise KeyError(
            f"write_to_filename needs the column {spec.filename_field!r}; read with "
            f"add_filename=True (columns present: {list(df.columns)})"
        )
    names = df[spec.filename_field]
    for name in sorted(set(names.to_pandas() if hasattr(names, "to_pandas") else names)):
        relative = _safe_relative_name(name, spec.filename_field)
        group = df[names == name]
        if not spec.keep_filename_column:
            group = group.drop(columns=[spec.filename_field])
        target = posixpath.join(spec.path, _output_name(relative, spec.suffix))
        fs.makedirs(posixpath.dirname(target), exist_ok=True)
        stats["bytes"] += _write_frame(group, fs, target, spec)
        stats["files"].append(target)
    return stats
