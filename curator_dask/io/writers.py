"""Write partitions: one file per partition, atomically, under deterministic names.

Each part is written under a hidden temporary name in the output directory and renamed
into place only when complete, so a crash never leaves a half-written file that looks
like a finished part (readers skip names starting with ``.``).

The output contract
-------------------
Before anything is deleted or written, :func:`prepare_output` refuses an output that is,
contains or lies inside an input path (:mod:`curator_dask.io.overlap`), then records a
manifest, ``.curator-output.json``, in the directory. The manifest is what lets a later
write tell the project's files from anyone else's. The project's own files are, in a
directory with a manifest:

- the manifest itself;
- parts (``part-00042.parquet``, ``part-00042.jsonl.gz``, ...) and their hidden
  completion markers (``.part-00042.done``);
- hidden temporary files (``.part-00042.parquet.tmp-<32 hex digits>``) that a killed
  run left behind;
- files the manifest or a completion marker lists (those of ``write_to_filename``, and
  files such as a cache's ``_COMPLETE.json`` that were claimed with :func:`claim_files`).

Modes: ``"error"`` refuses a directory that holds anything but the project's leftovers
of a write that produced nothing; ``"overwrite"`` deletes the project's own files and
refuses (:class:`~curator_dask.io.errors.ForeignFilesError`, naming them) when anything
else is there; ``"overwrite_all"`` deletes everything in the directory, foreign files
included, and must be asked for explicitly; ``"append"`` deletes nothing but temporary
leftovers and numbers new parts after the existing ones.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, get_args

import pyarrow as pa
import pyarrow.parquet as pq

from curator_dask.backends import to_host
from curator_dask.dropped import get_counts
from curator_dask.io.errors import ForeignFilesError
from curator_dask.io.overlap import InputPaths, check_output_path
from curator_dask.io.rollover import (
    FileSize,
    FileSizeError,
    FrameEncoded,
    jsonl_lines,
    output_pieces,
    stale_pieces,
)

__all__ = ["WriteSpec", "prepare_output", "write_partition", "part_name", "MODES", "FORMATS",
           "MANIFEST", "check_mode", "read_manifest", "claim_files", "own_files",
           "remove_leftovers", "record_in_manifest", "finish_output"]

logger = logging.getLogger(__name__)

WriteMode = Literal["error", "overwrite", "overwrite_all", "append"]
MODES = get_args(WriteMode)
#: ``arrow`` (Arrow IPC files, uncompressed) is for the project's own intermediate data:
#: written at memory speed and read back as a memory map. ``encoded`` is a format whose
#: files a writer's encoder makes (Megatron's token files, see ``io/rollover.py``).
FORMATS = ("parquet", "jsonl", "arrow", "encoded")
COMPRESSIONS = {None: "", "gzip": ".gz", "zstd": ".zst", "bz2": ".bz2"}
#: The manifest every write records in its output directory, before any part.
MANIFEST = ".curator-output.json"
_MANIFEST_FORMAT = 1
_PART = re.compile(r"^part-(\d+)[.-]")
# A part is one file, or pieces ``part-00042-00003.*`` under a target_file_size; an
# encoder's parts are Megatron's ``.bin``/``.idx`` pairs.
_PART_FILE = re.compile(r"^part-\d{5,}(-\d{5,})?"
                        r"(\.parquet|\.arrow|\.bin|\.idx|\.jsonl(\.gz|\.zst|\.bz2)?)$")
_MARKER_FILE = re.compile(r"^\.part-\d{5,}\.done$")
_TMP_FILE = re.compile(r"^\..+\.tmp-[0-9a-f]{32}$")
_MANIFEST_TMP = re.compile(r"^" + re.escape(f"{MANIFEST}.tmp-") + r"[0-9a-f]{32}$")
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
    #: Cut each part into files of at most this size (io/rollover.py); None: one file.
    target_file_size: FileSize | None = None
    #: For fmt "encoded": turns a partition into its files (``encode(df)``, io/rollover.py).
    encoder: object = None

    def __post_init__(self):
        if self.fmt not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {self.fmt!r}")
        if (self.fmt == "encoded") != (self.encoder is not None):
            raise ValueError("an encoder goes with the format 'encoded', and only with it")
        object.__setattr__(self, "target_file_size", FileSize.parse(self.target_file_size))
        allowed = {"jsonl": COMPRESSIONS, "parquet": (None, "snappy", "zstd", "gzip"),
                   "arrow": (None,), "encoded": (None,)}[self.fmt]
        if self.target_file_size is not None and self.target_file_size.unit == "tokens" \
                and self.encoder is None:
            raise FileSizeError("target_file_size in tokens is for the tokenizing writers; "
                                "give this writer bytes ('256MiB') or documents")
        if self.target_file_size is not None and self.filename_field is not None:
            raise ValueError("target_file_size cuts parts into files of a size, "
                             "write_to_filename writes a file per source file: not both")
        if self.compression not in allowed:
            raise ValueError(
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


def part_name(index: int, suffix: str) -> str:
    """``part-00042.parquet``: zero-padded so names sort in partition order."""
    return f"part-{index:05d}{suffix}"


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`MODES`, else a ``ValueError`` listing them."""
    if mode not in MODES:
        raise ValueError(
            f"mode must be one of {MODES}, got {mode!r}: 'overwrite' replaces only the "
            "project's own files, 'overwrite_all' everything in the directory"
        )
    return mode


def prepare_output(fs, path: str, mode: str, *, inputs: Iterable[InputPaths] = (),
                   fingerprint=None) -> int:
    """Check and prepare an output directory; returns the first part index to use.

    In order: the mode is checked; an output that is, contains or lies inside one of
    ``inputs`` is refused; the directory is handled as ``mode`` says (see the module
    docstring); a fresh manifest recording ``fingerprint`` (what the output is computed
    from; JSON) is written. Nothing is deleted before every check has passed.
    """
    check_mode(mode)
    path = fs._strip_protocol(path).rstrip("/") or fs._strip_protocol(path)
    check_output_path(path, inputs, fs=fs)
    if fs.exists(path) and not fs.isdir(path):
        raise FileExistsError(f"output path {path!r} is a file, not a directory")
    existing = fs.ls(path, detail=False) if fs.exists(path) else []
    manifest = read_manifest(fs, path) if existing else None
    kept_files: list[str] = []
    if existing and mode in ("error", "overwrite"):
        own, foreign = own_files(fs, path, manifest)
        if mode == "error" and (foreign or any(not _leftover(name) for name in own)):
            raise FileExistsError(
                f"output directory {path!r} is not empty ({len(existing)} entries); pass "
                "mode='overwrite' to replace the parts of an earlier write or mode='append' "
                "to add parts"
            )
        if foreign:
            raise ForeignFilesError(path, foreign)
        _remove(fs, path, own)
    elif existing and mode == "overwrite_all":
        logger.warning("mode='overwrite_all': deleting everything in %s", path)
        for entry in existing:
            _remove_entry(fs, entry)
    elif existing and mode == "append":
        remove_leftovers(fs, path, manifest)
        kept_files = list((manifest or {}).get("files", []))
    fs.makedirs(path, exist_ok=True)
    first_index = 0
    if mode == "append":
        names = [posixpath.basename(e) for e in fs.ls(path, detail=False)]
        indices = [int(m.group(1)) for n in names if (m := _PART.match(n))]
        first_index = max(indices) + 1 if indices else 0
    _write_manifest(fs, path, {"format": _MANIFEST_FORMAT, "writer": "curator-dask",
                               "first_index": first_index, "fingerprint": fingerprint,
                               "files": kept_files})
    return first_index


# -- the manifest and the project's own files ------------------------------------------------

def read_manifest(fs, path: str) -> dict | None:
    """The manifest of the output directory ``path``, or None when it has none."""
    target = posixpath.join(path, MANIFEST)
    try:
        with fs.open(target, "rb") as handle:
            manifest = json.loads(handle.read())
    except FileNotFoundError:
        return None
    except (ValueError, OSError):
        logger.warning("unreadable manifest %s: treating the directory as not the project's",
                       target)
        return None
    return manifest if isinstance(manifest, dict) else None


def _write_manifest(fs, path: str, manifest: dict) -> None:
    target = posixpath.join(path, MANIFEST)
    tmp = posixpath.join(path, f"{MANIFEST}.tmp-{uuid.uuid4().hex}")  # hidden, as MANIFEST
    with fs.open(tmp, "wb") as handle:
        handle.write(json.dumps(manifest, sort_keys=True).encode("utf-8"))
    fs.mv(tmp, target)


def claim_files(fs, path: str, names: Iterable[str]) -> None:
    """Record files (paths relative to ``path``) as the project's in the directory's
    manifest, so a later ``overwrite`` deletes them; call it before writing them.

    Does nothing in a directory without a manifest (nothing there is the project's).
    """
    manifest = read_manifest(fs, path)
    if manifest is None:
        return
    files = set(manifest.get("files", []))
    new = [n for n in names if n not in files]
    if new:
        manifest["files"] = sorted(files | set(new))
        _write_manifest(fs, path, manifest)


def record_in_manifest(fs, path: str, key: str, value) -> None:
    """Record ``value`` (JSON) under ``key`` in the manifest of the output directory
    ``path``: what a reader of the output should know about all of it (a tokenized
    output's tokenizer and token counts). Does nothing where there is no manifest."""
    manifest = read_manifest(fs, path)
    if manifest is not None:
        manifest[key] = value
        _write_manifest(fs, path, manifest)


def finish_output(fs, path: str, spec: WriteSpec, stats: list[dict]) -> None:
    """Once every part of an output is written: an encoder's summary of the parts
    (``stats``, as :func:`write_partition` returns them) goes into the manifest."""
    summary = getattr(spec.encoder, "summary", None)
    if summary is not None:
        record_in_manifest(fs, path, "encoded", summary(stats))


def own_files(fs, path: str, manifest: dict | None = None) -> tuple[list[str], list[str]]:
    """The files under ``path`` (relative paths) that the project wrote, and the others.

    Without a manifest nothing is the project's. With one: the manifest, parts,
    completion markers, temporary leftovers, and what the manifest or a marker lists.
    """
    files = _files_under(fs, path)
    if manifest is None:
        # Only a manifest's own temporary file is unmistakably the project's: a run killed
        # while writing its first manifest leaves it and nothing else.
        own = [n for n in files if _MANIFEST_TMP.match(n)]
        return own, [n for n in files if n not in own]
    own, unknown = [], []
    for name in files:
        (own if _project_name(name) else unknown).append(name)
    if unknown:
        listed = set(manifest.get("files", []))
        if not listed.issuperset(unknown):
            listed |= _marker_files(fs, path, own)
        own += [n for n in unknown if n in listed]
        unknown = [n for n in unknown if n not in listed]
    return own, unknown


def remove_leftovers(fs, path: str, manifest: dict | None = None) -> list[str]:
    """Delete the temporary files a killed run left in the project's directory ``path``;
    returns their names. A directory without a manifest is left alone."""
    if manifest is None:
        manifest = read_manifest(fs, path)
    if manifest is None:
        return []
    leftovers = [n for n in _files_under(fs, path) if _TMP_FILE.match(posixpath.basename(n))]
    for name in leftovers:
        fs.rm(posixpath.join(path, name))
    if leftovers:
        logger.info("removed %d temporary file(s) of an interrupted write from %s",
                    len(leftovers), path)
    return leftovers


def _project_name(name: str) -> bool:
    base = posixpath.basename(name)
    if _TMP_FILE.match(base):
        return True
    if "/" in name:
        return False
    return name == MANIFEST or bool(_PART_FILE.match(name) or _MARKER_FILE.match(name))


def _leftover(name: str) -> bool:
    """The manifest or a temporary file: what a write that produced nothing leaves."""
    return name == MANIFEST or bool(_TMP_FILE.match(posixpath.basename(name)))


def _files_under(fs, path: str) -> list[str]:
    if not fs.exists(path):
        return []
    prefix = path.rstrip("/") + "/"
    return sorted(p[len(prefix):] if p.startswith(prefix) else posixpath.basename(p)
                  for p in fs.find(path, withdirs=False, detail=False))


def _marker_files(fs, path: str, own: list[str]) -> set[str]:
    prefix = path.rstrip("/") + "/"
    listed: set[str] = set()
    for name in own:
        if not _MARKER_FILE.match(name):
            continue
        try:
            with fs.open(posixpath.join(path, name), "rb") as handle:
                stats = json.loads(handle.read())
        except (ValueError, OSError):
            continue
        for file in stats.get("files", []):
            listed.add(file[len(prefix):] if file.startswith(prefix) else file)
    return listed


def _remove(fs, path: str, own: list[str]) -> None:
    """Delete the project's files: markers and claimed files first, the manifest last, so
    an interruption never leaves parts without the manifest that makes them the project's."""
    def order(name: str) -> int:
        if name == MANIFEST:
            return 3
        if _PART_FILE.match(name) or _TMP_FILE.match(posixpath.basename(name)):
            return 2
        if _MARKER_FILE.match(name):
            return 0
        return 1

    directories = set()
    for name in sorted(own, key=order):
        fs.rm(posixpath.join(path, name))
        if "/" in name:
            directories.add(posixpath.dirname(name))
    # Directories that write_to_filename made and that are now empty.
    for directory in sorted(directories, key=lambda d: d.count("/"), reverse=True):
        while directory:
            full = posixpath.join(path, directory)
            if fs.exists(full) and not fs.ls(full, detail=False):
                fs.rmdir(full)
            directory = posixpath.dirname(directory)


def _remove_entry(fs, entry: str) -> None:
    local = "file" in ({fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol))
    if local and os.path.islink(entry):
        os.unlink(entry)  # the link, never what it points to
    else:
        fs.rm(entry, recursive=True)


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
        if hasattr(df, "write_to"):  # encoded already (io/rollover.py)
            with fs.open(tmp, "wb", compression=spec.compression if spec.fmt == "jsonl"
                         else None) as handle:
                df.write_to(handle)
        elif isinstance(df, pa.Table) and spec.fmt == "parquet":
            # Arrow all the way: no pandas frame is made for a table read as Arrow.
            with fs.open(tmp, "wb") as handle:
                pq.write_table(df, handle, compression=spec.compression or "snappy")
        elif spec.fmt == "parquet":
            with fs.open(tmp, "wb") as handle:
                df.to_parquet(handle, index=False, compression=spec.compression or "snappy")
        elif spec.fmt == "arrow":
            table = df if isinstance(df, pa.Table) else pa.Table.from_pandas(
                df, preserve_index=False)
            with fs.open(tmp, "wb") as handle, pa.ipc.new_file(handle, table.schema) as out:
                out.write_table(table)
        else:
            # cuDF frames and Arrow tables are written through pandas: one JSON writer.
            with fs.open(tmp, "wb", compression=spec.compression) as handle:
                handle.write(jsonl_lines(df)[0])
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


def write_partition(df, spec: WriteSpec, index: int, fs, *,
                    dropped: dict[str, int] | None = None) -> dict:
    """Write one partition; returns its stats (rows, bytes, files, drop counts and
    counters, see :mod:`curator_dask.dropped`).

    ``df`` is a pandas or cuDF frame, or a ``pyarrow.Table`` (written without a pandas
    round trip); ``dropped`` gives the counts of a table, which carries none itself.
    """
    counts = get_counts(df)
    for reason, count in (dropped or {}).items():
        counts[reason] = counts.get(reason, 0) + int(count)
    stats = {"partition": index, "rows": len(df), "bytes": 0, "files": [],
             "dropped": counts}
    if spec.filename_field is None:
        base = part_name(spec.first_index + index, "")
        encoded = (spec.encoder.encode(df) if spec.encoder is not None
                   else FrameEncoded(df, spec.fmt, spec.suffix))
        for name, content in output_pieces(encoded, base, spec.target_file_size):
            target = posixpath.join(spec.path, name)
            stats["bytes"] += _write_frame(content, fs, target, spec)
            stats["files"].append(target)
        if spec.target_file_size is not None:
            for stale in stale_pieces(fs, spec.path, base, stats["files"]):
                fs.rm(stale)  # an earlier attempt's piece beyond this one's: its rows again
        for name, count in encoded.counts().items():
            counts[name] = counts.get(name, 0) + int(count)
        stats["rows"] = len(encoded)  # an encoder may drop (and count) documents
        return stats
    if spec.filename_field not in df.columns:
        raise KeyError(
            f"write_to_filename needs the column {spec.filename_field!r}; read with "
            f"add_filename=True (columns present: {list(df.columns)})"
        )
    names = df[spec.filename_field]
    for name in sorted(set(to_host(names))):
        relative = _safe_relative_name(name, spec.filename_field)
        group = df[names == name]
        if not spec.keep_filename_column:
            group = group.drop(columns=[spec.filename_field])
        target = posixpath.join(spec.path, _output_name(relative, spec.suffix))
        fs.makedirs(posixpath.dirname(target), exist_ok=True)
        stats["bytes"] += _write_frame(group, fs, target, spec)
        stats["files"].append(target)
    return stats
