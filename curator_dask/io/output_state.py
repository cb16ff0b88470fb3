"""What an output directory records about itself, in one place.

Every directory curator-dask writes (a pipeline's or a dataset's output, a barrier's
input and output in the executor's cache, each dedup phase in a workflow's cache) keeps
its state in the same few files, written atomically through
:mod:`curator_dask.io.atomic`:

- **the manifest**, ``.curator-output.json``, written before any part: the fingerprint
  of what the directory is computed from and the first part index. It tells the
  project's files from anyone else's (:func:`own_files`): without a manifest nothing in
  a directory is the project's; with one, the project's files are those it names itself
  (the manifest, parts, markers, completion records, temporary files) and those a part
  marker lists (files named after their sources, ``write_to_filename``).
- **part markers**, ``.part-00042.done``, written after each part's atomic rename by
  every write (a pipeline's writer, ``DocumentDataset.to_parquet``, a dedup phase): the
  part's stats, the files it wrote and the ``source`` it was computed from. A resume
  skips the partitions whose marker exists (:func:`completed_parts`).
- **completion records**, ``_COMPLETE.json``, written last when a whole result is in the
  directory (a dedup phase, a barrier's output): its fingerprint, rows, files and stats
  (:func:`mark_complete`, :func:`read_complete`).

One fingerprint comparison says what changed between the run that wrote a directory and
this one (:func:`fingerprint_changes`): which input file and how (size, modification
time, checksum, content; see :mod:`curator_dask.io.identity`), which parameter, which
stage. A cache whose fingerprint differs is computed again; an output a resume would
extend is refused instead (the callers say which).

Examples
--------
>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> write_manifest(fs, "/state-doc", first_index=0, fingerprint={"n": 1})
>>> mark_complete(fs, "/state-doc", fingerprint={"n": 1}, rows=3, files=0)
>>> manifest = read_manifest(fs, "/state-doc")
>>> read_complete(fs, "/state-doc")["rows"], own_files(fs, "/state-doc", manifest)
(3, (['.curator-output.json', '_COMPLETE.json'], []))
>>> fs.pipe_file("/state-doc/notes.txt", b"mine")
>>> own_files(fs, "/state-doc", manifest)[1]
['notes.txt']
>>> fingerprint_changes(read_complete(fs, "/state-doc")["fingerprint"], {"n": 2})
['n 1 -> 2']
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping

from curator_dask.io import atomic
from curator_dask.io.identity import identity_changes
from curator_dask.io.lease import LEASE

__all__ = [
    "COMPLETE",
    "MANIFEST",
    "MARKER_SUFFIX",
    "as_json",
    "clear_directory",
    "completed_parts",
    "discard_parts",
    "fingerprint_changes",
    "finish_output",
    "is_leftover",
    "mark_complete",
    "mark_part",
    "marker_name",
    "own_files",
    "param_changes",
    "part_index",
    "part_name",
    "read_complete",
    "read_manifest",
    "record_in_manifest",
    "remove_leftovers",
    "remove_own_files",
    "reusable",
    "stale_pieces",
    "write_manifest",
]

logger = logging.getLogger(__name__)

#: The manifest every write records in its output directory, before any part.
MANIFEST = ".curator-output.json"
_MANIFEST_FORMAT = 1
#: The suffix of a part's completion marker: ``.part-00042.done``.
MARKER_SUFFIX = ".done"
#: The record that a whole result is in its directory.
COMPLETE = "_COMPLETE.json"
_COMPLETE_FORMAT = 1
# A part is one file, or pieces ``part-00042-00003.*`` cut by a target_file_size; a
# tokenizing writer's parts are Megatron's ``.bin``/``.idx`` pairs.
_PART_FILE = re.compile(r"^part-(\d{5,})(-\d{5,})?"
                        r"(\.parquet|\.arrow|\.bin|\.idx|\.jsonl(\.gz|\.zst|\.bz2)?)$")
_MARKER_FILE = re.compile(r"^\.part-\d{5,}\.done$")


def part_name(index: int, suffix: str, piece: int | None = None) -> str:
    """``part-00042.parquet``: zero-padded so names sort in partition order; ``piece``
    of a part cut into files of a size, ``part-00042-00003.parquet``.

    Examples
    --------
    >>> part_name(42, ".parquet"), part_name(42, ".bin", piece=3)
    ('part-00042.parquet', 'part-00042-00003.bin')
    """
    if piece is None:
        return f"part-{index:05d}{suffix}"
    return f"part-{index:05d}-{piece:05d}{suffix}"


def part_index(name: str) -> int | None:
    """The index of the part a file (a base name) belongs to, or None when it is no part.

    Examples
    --------
    >>> part_index("part-00042.jsonl.gz"), part_index("part-00042-00003.idx"), part_index("x")
    (42, 42, None)
    """
    found = _PART_FILE.match(name)
    return int(found.group(1)) if found else None


def stale_pieces(fs, path: str, index: int, written: Iterable[str]) -> list[str]:
    """The pieces of part ``index`` in directory ``path`` that ``written`` (paths) does
    not hold: what an earlier attempt at the part wrote beyond this one's files."""
    keep = {posixpath.basename(w) for w in written}
    pieces = part_name(index, "-")
    return [f for f in fs.ls(path, detail=False)
            if (name := posixpath.basename(f)).startswith(pieces) and name not in keep
            and part_index(name) == index]


def marker_name(index: int) -> str:
    """The completion marker of part ``index``: ``.part-00042.done``."""
    return "." + part_name(index, MARKER_SUFFIX)


def as_json(value):
    """``value`` through JSON, so that tuples and lists, ints and numpy ints compare
    equal to what a file recorded."""
    return json.loads(json.dumps(value, sort_keys=True, default=atomic.json_default))


def _read_json(fs, path: str):
    try:
        return json.loads(fs.cat_file(path))
    except FileNotFoundError:
        return None
    except (ValueError, OSError):
        logger.warning("unreadable state file %s: ignoring it", path)
        return None


# -- the manifest and the project's own files --------------------------------------------------

def read_manifest(fs, path: str) -> dict | None:
    """The manifest of the directory ``path``, or None when it has none."""
    manifest = _read_json(fs, posixpath.join(path, MANIFEST))
    return manifest if isinstance(manifest, dict) else None


def write_manifest(fs, path: str, *, first_index: int, fingerprint, files: Iterable[str] = ()
                   ) -> None:
    """Record a fresh manifest in ``path``: what it is computed from (``fingerprint``,
    JSON), the first part index, and the files claimed so far."""
    _write_manifest(fs, path, {"format": _MANIFEST_FORMAT, "writer": "curator-dask",
                               "first_index": first_index, "fingerprint": fingerprint,
                               "files": sorted(files)})


def _write_manifest(fs, path: str, manifest: dict) -> None:
    atomic.write_json(fs, posixpath.join(path, MANIFEST), manifest)


def record_in_manifest(fs, path: str, key: str, value) -> None:
    """Record ``value`` (JSON) under ``key`` in the manifest of the output directory
    ``path``: what a reader of the output should know about all of it (a tokenized
    output's tokenizer and token counts). Does nothing where there is no manifest."""
    manifest = read_manifest(fs, path)
    if manifest is not None:
        manifest[key] = value
        _write_manifest(fs, path, manifest)


def finish_output(fs, path: str, encoder, stats: list[dict]) -> None:
    """Once every part of an output is written: the summary an ``encoder`` (a writer's,
    see :mod:`curator_dask.io.rollover`) makes of the parts' ``stats`` goes into the
    manifest under ``encoded``. Nothing for writers without one."""
    summary = getattr(encoder, "summary", None)
    if summary is not None:
        record_in_manifest(fs, path, "encoded", summary(stats))


def _files_under(fs, path: str) -> list[str]:
    """Every file under ``path`` (relative), but the lease of the run writing it."""
    if not fs.exists(path):
        return []
    prefix = path.rstrip("/") + "/"
    names = (p[len(prefix):] if p.startswith(prefix) else posixpath.basename(p)
             for p in fs.find(path, withdirs=False, detail=False))
    return sorted(n for n in names if not _is_lease(n))


def _is_lease(name: str) -> bool:
    return name == LEASE or (name.startswith(LEASE) and atomic.is_temporary(name))


def _project_name(name: str) -> bool:
    base = posixpath.basename(name)
    if atomic.is_temporary(base):
        return True
    if "/" in name:
        return False
    return name in (MANIFEST, COMPLETE) or bool(_PART_FILE.match(name) or _MARKER_FILE.match(name))


def is_leftover(name: str) -> bool:
    """The manifest or a temporary file: what a write that produced nothing leaves."""
    return name == MANIFEST or atomic.is_temporary(posixpath.basename(name))


def own_files(fs, path: str, manifest: dict | None = None) -> tuple[list[str], list[str]]:
    """The files under ``path`` (relative paths) that the project wrote, and the others.

    Without a manifest nothing is the project's but a manifest's own temporary file (a
    run killed while writing its first manifest leaves it and nothing else). With one:
    the manifest, parts, part markers, completion records, temporary leftovers, and the
    files a marker lists (or, written by earlier versions, the manifest). The lease of
    the run writing the directory is neither.
    """
    files = _files_under(fs, path)
    if manifest is None:
        own = [n for n in files if n.startswith(MANIFEST) and atomic.is_temporary(n)]
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


def _marker_files(fs, path: str, own: list[str]) -> set[str]:
    prefix = path.rstrip("/") + "/"
    listed: set[str] = set()
    for name in own:
        if _MARKER_FILE.match(name):
            stats = _read_json(fs, posixpath.join(path, name))
            for file in (stats or {}).get("files", []):
                listed.add(file[len(prefix):] if file.startswith(prefix) else file)
    return listed


def remove_leftovers(fs, path: str, manifest: dict | None = None) -> list[str]:
    """Delete the temporary files a killed run left in the project's directory ``path``;
    returns their names. A directory without a manifest is left alone."""
    if manifest is None:
        manifest = read_manifest(fs, path)
    if manifest is None:
        return []
    leftovers = [n for n in _files_under(fs, path) if atomic.is_temporary(posixpath.basename(n))]
    for name in leftovers:
        atomic.remove(fs, posixpath.join(path, name), missing_ok=True)
    if leftovers:
        logger.info("removed %d temporary file(s) of an interrupted write from %s",
                    len(leftovers), path)
    return leftovers


def remove_own_files(fs, path: str, own: list[str], *, keep_manifest: bool = False) -> None:
    """Delete the project's files ``own`` (from :func:`own_files`): markers and claimed
    files first, the manifest last, so an interruption never leaves parts without the
    manifest that makes them the project's; then the directories left empty."""
    def order(name: str) -> int:
        if name == MANIFEST:
            return 3
        if _PART_FILE.match(name) or atomic.is_temporary(posixpath.basename(name)):
            return 2
        return 0 if _MARKER_FILE.match(name) else 1

    directories = set()
    for name in sorted(own, key=order):
        if name == MANIFEST and keep_manifest:
            continue
        atomic.remove(fs, posixpath.join(path, name), missing_ok=True)
        if "/" in name:
            directories.add(posixpath.dirname(name))
    # Directories that write_to_filename made and that are now empty.
    for directory in sorted(directories, key=lambda d: d.count("/"), reverse=True):
        while directory:
            atomic.remove_empty_directory(fs, posixpath.join(path, directory))
            directory = posixpath.dirname(directory)


def clear_directory(fs, path: str) -> None:
    """Delete everything in ``path``, foreign files included (links unlinked, never
    followed), but the lease of the run writing it."""
    logger.warning("mode='overwrite_all': deleting everything in %s", path)
    for entry in fs.ls(path, detail=False):
        if not _is_lease(posixpath.basename(entry)):
            atomic.remove_entry(fs, entry)


# -- part markers ----------------------------------------------------------------------------

def mark_part(fs, path: str, index: int, stats: dict) -> None:
    """Record part ``index`` of ``path`` complete, with its stats (after its rename)."""
    atomic.write_json(fs, posixpath.join(path, marker_name(index)), stats)


def completed_parts(fs, path: str, source: str | None) -> dict[int, dict]:
    """Stats of the parts of ``path`` already complete, by (first) input partition index.

    Parts computed from another ``source`` (a barrier's output computed again since)
    cannot be matched to this run's partitions: they are deleted (they are the project's
    own) and every partition is written again.
    """
    done: dict[int, dict] = {}
    for entry in fs.ls(path, detail=False):
        if not _MARKER_FILE.match(posixpath.basename(entry)):
            continue
        stats = _read_json(fs, entry)
        if not isinstance(stats, dict) or stats.get("source") != source:
            logger.warning("%s: the parts written so far were computed from another version "
                           "of their input (a barrier's output computed again): writing every "
                           "part again", path)
            discard_parts(fs, path)
            return {}
        for index in stats["input_partitions"]:
            done[index] = stats
    return done


def discard_parts(fs, path: str) -> None:
    """Delete the parts, markers and temporary files of earlier runs in ``path``, keeping
    the manifest: the project's own files only."""
    own, _ = own_files(fs, path, read_manifest(fs, path))
    remove_own_files(fs, path, own, keep_manifest=True)


# -- completion records --------------------------------------------------------------------------

def mark_complete(fs, path: str, *, fingerprint, rows: int, files: int,
                  stats: dict | None = None) -> None:
    """Record that the whole result in directory ``path`` is written: its fingerprint,
    rows, files and stats (written last, atomically)."""
    atomic.make_dirs(fs, path)
    atomic.write_json(fs, posixpath.join(path, COMPLETE), {
        "format": _COMPLETE_FORMAT, "rows": int(rows), "files": int(files),
        "fingerprint": as_json(fingerprint), "stats": as_json(stats or {})})
    logger.debug("complete: %d rows in %d files at %s", rows, files, path)


def read_complete(fs, path: str) -> dict | None:
    """The completion record of directory ``path``, or None (none, or another format)."""
    record = _read_json(fs, posixpath.join(path, COMPLETE))
    if not isinstance(record, dict) or record.get("format") != _COMPLETE_FORMAT:
        return None
    return record


def reusable(fs, path: str, fingerprint, *, explain: Mapping[str, Callable] | None = None
             ) -> dict | None:
    """The completion record of ``path`` if it was computed from ``fingerprint``; else
    None, and the log says why (no record, or what changed: it is computed again)."""
    record = read_complete(fs, path)
    if record is None:
        if fs.exists(path):
            logger.info("%s has no completion record: computing it again", path)
        return None
    changes = fingerprint_changes(record.get("fingerprint"), fingerprint, explain=explain)
    if changes:
        logger.warning("%s was computed from other input or parameters (%s): computing it "
                       "again", path, "; ".join(changes))
        return None
    logger.info("reusing %s (complete, %d rows)", path, record["rows"])
    return record


# -- fingerprints ----------------------------------------------------------------------------

def fingerprint_changes(old, new, *, explain: Mapping[str, Callable] | None = None
                        ) -> list[str]:
    """What differs between the fingerprint a directory recorded and this run's, in
    words (empty: the same).

    A fingerprint is a JSON object. ``files`` (a list of input identities) and ``input``
    (a partition plan's identity) say which file changed and how; ``explain`` maps other
    keys to a function of the two values that says what changed, or nothing when what
    differs does not count (a pipeline's stages, whose names do not); any other key is
    compared as parameters.

    Examples
    --------
    >>> fingerprint_changes({"files": [], "hash_method": "md5"},
    ...                     {"files": [], "hash_method": "xxh3_128"})
    ["hash_method 'md5' -> 'xxh3_128'"]
    >>> fingerprint_changes(None, {"input": {}})
    ['no fingerprint was recorded (written by an earlier version, or not by this kind of run)']
    """
    if old == new:
        return []
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return ["no fingerprint was recorded (written by an earlier version, or not by "
                "this kind of run)"]
    old, new = as_json(old), as_json(new)
    out: list[str] = []
    rest_old, rest_new = {}, {}
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if key == "files":
            out.append(identity_changes(before, after) or "the input files changed")
        elif key == "input":
            out.append(_input_changes(before, after))
        elif explain and key in explain and isinstance(before, list) and isinstance(after, list):
            # The explainer decides what counts (a pipeline: not the stages' names).
            out += explain[key](before, after)
        else:
            rest_old[key], rest_new[key] = before, after
    return out + param_changes({k: v for k, v in rest_old.items() if k in old},
                               {k: v for k, v in rest_new.items() if k in new})


def _input_changes(old, new) -> str:
    if not isinstance(old, Mapping) or "files" not in old:
        return ("different input (recorded by an earlier version, without the identity of "
                "its files)")
    files = identity_changes(old.get("files"), (new or {}).get("files"))
    if files:
        return f"different input: {files}"
    return "different input: the partitioning changed (blocksize or files_per_partition)"


def param_changes(old, new, prefix: str = "") -> list[str]:
    """``"key old -> new"`` for each parameter that differs (nested keys dotted).

    Examples
    --------
    >>> param_changes({"a": 1, "b": {"c": "x"}}, {"a": 1, "b": {"c": "y"}, "d": 2})
    ["b.c 'x' -> 'y'", 'd (none) -> 2']
    """
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                out.append(f"{name} (none) -> {_short(new[key])}")
            elif key not in new:
                out.append(f"{name} {_short(old[key])} -> (none)")
            else:
                out.extend(param_changes(old[key], new[key], name))
        return out
    if old == new:
        return []
    if prefix == "code" or prefix.endswith(".code"):  # a digest: its values mean nothing
        owner = prefix[:-len("code")].rstrip(".")
        return [f"{owner}: code changed" if owner else "function code changed"]
    return [f"{prefix or 'value'} {_short(old)} -> {_short(new)}"]


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
