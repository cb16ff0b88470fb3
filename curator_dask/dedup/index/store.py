"""A dedup index on disk: generations of hash-partitioned segments behind one pointer file.

Layout, on any fsspec path::

    index/
      INDEX.json                       the pointer: kind, parameters, partitions, segments
      gen-00001-3f2a9c1e/              one segment a generation (an append)
        part-00000.parquet ... part-P  one file per index partition
      gen-00002-b07d44e0/ ...

Every key (an exact hash, an LSH bucket) lives in exactly one of the ``P`` index
partitions, chosen from the key's own bits, and every segment has one file per
partition, its keys sorted and each once, so a query reads partition ``p`` of each
segment in one task, finds its keys there by binary search, and never loads the whole
index on one worker.

An append writes a whole new segment first (through the project's writer, which writes
each part under a temporary name and renames it), then replaces the pointer in one move
of a temporary file. Until that move, readers see the previous generation; a crash
before it leaves a segment no pointer names, removed by the next append. The index is
never half-updated: a generation is either in the pointer, with all its files, or not.

One append runs at a time. An append checks, just before it moves the pointer, that the
index is still at the generation its query read, and refuses
(:class:`IndexChangedError`) otherwise, so a concurrent append cannot be lost silently.

The index records the parameters its keys were made with; opening it with others is an
:class:`IndexParameterError` naming each difference. It also records every batch
appended to it (where it was read from, and a digest of its keys), so that a batch
queried again after its append (a rerun after a crash between the append and the write
of its output) is queried as of the generation before its own, and is not appended
twice. Another batch with the same texts, read from other files, is a new batch: all its
documents are duplicates of the index.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import uuid
from dataclasses import asdict, dataclass, field

import dask
import dask.dataframe as dd
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.removal import route_to_partitions
from curator_dask.errors import CuratorError
from curator_dask.io import atomic
from curator_dask.io.lease import LEASE
from curator_dask.stages.fingerprint import param_changes
from curator_dask.task_names import delayed_task

__all__ = [
    "GENERATION_FIELD",
    "PARTITION_FIELD",
    "POINTER",
    "IndexChangedError",
    "IndexParameterError",
    "IndexState",
    "IndexStore",
    "Segment",
    "batch_digest",
    "digest_of_sums",
    "index_kind",
    "key_sums",
]

logger = logging.getLogger(__name__)

#: The pointer file: what the index holds now.
POINTER = "INDEX.json"
#: The column of a key's index partition, while keys travel to their partition.
PARTITION_FIELD = "_index_partition"
#: The generation that added a key, stored beside it.
GENERATION_FIELD = "_generation"

_FORMAT = 1
_SEGMENT = re.compile(r"^gen-(\d{5,})-[0-9a-f]{8}$")


class IndexParameterError(CuratorError, ValueError):
    """A dedup index opened with parameters other than those its keys were made with,
    or a path that holds something other than a dedup index of this kind."""


class IndexChangedError(CuratorError, RuntimeError):
    """The index moved to another generation between a query and its append."""


@dataclass(frozen=True)
class Segment:
    """One append's files: ``name/part-*.parquet`` under the index root."""

    name: str
    generation: int
    rows: int


@dataclass
class IndexState:
    """What the pointer file says."""

    kind: str
    parameters: dict
    partitions: int
    generation: int = 0
    segments: list[Segment] = field(default_factory=list)
    #: Each batch appended (where it was read from, and a digest of its keys) -> the
    #: generation it became.
    batches: dict[str, int] = field(default_factory=dict)
    #: Keys in the index, over all segments.
    rows: int = 0

    def to_json(self) -> dict:
        return {"format": _FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict, where: str) -> IndexState:
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise IndexParameterError(
                f"{where} is not a dedup index this version of curator-dask can read "
                f"(format {data.get('format') if isinstance(data, dict) else None!r}, "
                f"expected {_FORMAT})")
        data = {k: v for k, v in data.items() if k != "format"}
        data["segments"] = [Segment(**s) for s in data.get("segments", [])]
        return cls(**data)


def batch_digest(frame: dd.DataFrame, columns: list[str]) -> str:
    """A digest of a batch's keys that does not depend on their order or partitioning:
    the row count and the wrapping sum of each uint64 column, as hex."""
    parts = [delayed_task(_column_sums, "index")(part, columns) for part in frame.to_delayed()]
    return digest_of_sums(dask.compute(*parts))


def key_sums(columns: list[np.ndarray]) -> np.ndarray:
    """The row count and the wrapping sum of each uint64 column of one piece of a batch:
    the pieces' sums, added up (:func:`digest_of_sums`), are :func:`batch_digest`'s.

    Examples
    --------
    >>> key_sums([np.array([2**64 - 1, 2], dtype=np.uint64)]).tolist()
    [2, 1]
    """
    sums = [np.asarray(c, dtype=np.uint64).sum(dtype=np.uint64) for c in columns]
    return np.array([len(columns[0]), *sums], dtype=np.uint64)


def digest_of_sums(parts) -> str:
    """The digest of a batch from :func:`key_sums` of its pieces."""
    parts = list(parts)
    return "-".join(f"{int(value):x}" for value in _add_sums(parts, len(parts[0])))


def _column_sums(df, columns: list[str]) -> np.ndarray:
    return key_sums([df[c].to_numpy(dtype=np.uint64) for c in columns])


def _add_sums(parts, width: int) -> np.ndarray:
    total = np.zeros(width, dtype=np.uint64)
    for part in parts:
        total += part  # uint64 arrays wrap around, as the digest means them to
    return total


def index_kind(path: str, storage_options: dict | None = None) -> str | None:
    """The kind of the dedup index at ``path`` (``"exact"`` or ``"fuzzy"``), or None
    where there is none."""
    fs, root = url_to_fs(path, **(storage_options or {}))
    try:
        data = json.loads(fs.cat_file(posixpath.join(root.rstrip("/"), POINTER)))
    except FileNotFoundError:
        return None
    return data.get("kind") if isinstance(data, dict) else None


class IndexStore:
    """The files of one index: read the pointer, read a partition, append a segment.

    Parameters
    ----------
    path : str
        The index directory (any fsspec URL).
    kind : str
        ``"exact"`` or ``"fuzzy"``: an index of one kind refuses to open as the other.
    storage_options : dict, optional
        For fsspec.
    """

    def __init__(self, path: str, kind: str, storage_options: dict | None = None):
        self.path = path
        self.kind = kind
        self.storage_options = storage_options
        self.fs, self.root = url_to_fs(path, **(storage_options or {}))
        self.root = self.root.rstrip("/")

    # -- the pointer -------------------------------------------------------------------------
    def state(self) -> IndexState | None:
        """The index as its pointer says, or None where there is no index yet.

        Raises
        ------
        IndexParameterError
            If the pointer is of another kind, or the directory holds files but no
            pointer (it is not an index, and an append would write among someone
            else's files).
        """
        target = posixpath.join(self.root, POINTER)
        try:
            raw = self.fs.cat_file(target)
        except FileNotFoundError:
            if self.fs.exists(self.root) and self._foreign_entries():
                raise IndexParameterError(
                    f"{self.path} holds files but no {POINTER}: it is not a dedup index. "
                    "Choose an empty or new directory for the index") from None
            return None
        state = IndexState.from_json(json.loads(raw), self.path)
        if state.kind != self.kind:
            raise IndexParameterError(
                f"{self.path} is a {state.kind} dedup index, not a {self.kind} one: open it "
                f"with {'Exact' if state.kind == 'exact' else 'Fuzzy'}DedupIndex")
        return state

    def _foreign_entries(self) -> list[str]:
        return [e for e in self.fs.ls(self.root, detail=False)
                if not _SEGMENT.match(posixpath.basename(e.rstrip("/")))
                and not posixpath.basename(e).startswith(f".{POINTER}.tmp-")
                and posixpath.basename(e.rstrip("/")) != LEASE]

    def check_parameters(self, recorded: dict, given: dict) -> None:
        """Raise :class:`IndexParameterError` naming every parameter that differs."""
        changes = param_changes(recorded, given)
        if changes:
            raise IndexParameterError(
                f"the {self.kind} dedup index at {self.path} was made with other parameters "
                f"({'; '.join(changes)}; index -> given). Its keys only match keys made the "
                "same way: query it with the parameters it records (leave config= out to "
                "use them), or build a new index")

    def _write_state(self, state: IndexState) -> None:
        """Replace the pointer in one move of a complete temporary file.

        The one place the index writes its pointer.
        """
        atomic.make_dirs(self.fs, self.root)
        atomic.write_json(self.fs, posixpath.join(self.root, POINTER), state.to_json())

    # -- reading -----------------------------------------------------------------------------
    def partition_files(self, state: IndexState | None, partition: int,
                        as_of: int | None = None) -> list[str]:
        """Partition ``partition``'s file in each segment up to generation ``as_of``."""
        if state is None:
            return []
        return [posixpath.join(self.root, s.name, f"part-{partition:05d}.parquet")
                for s in state.segments if as_of is None or s.generation <= as_of]

    def reader(self, schema: pa.Schema) -> PartitionReader:
        """A picklable reader of one partition's files (for worker tasks)."""
        return PartitionReader(self.fs, schema)

    # -- appending ---------------------------------------------------------------------------
    def append(self, rows: dd.DataFrame, *, base: IndexState, batch: str | None) -> IndexState:
        """Write ``rows`` (already one partition per index partition) as the segment of
        generation ``base.generation + 1``, then move the pointer to it.

        Raises
        ------
        IndexChangedError
            If another append moved the index past ``base`` meanwhile.
        """
        generation = base.generation + 1
        name = f"gen-{generation:05d}-{uuid.uuid4().hex[:8]}"
        segment: DocumentDataset = DocumentDataset(rows)
        written = segment.to_parquet(posixpath.join(self.path.rstrip("/"), name), mode="error",
                                     storage_options=self.storage_options)
        now = self.state()
        if (now.generation if now is not None else 0) != base.generation:
            atomic.remove_entry(self.fs, posixpath.join(self.root, name))
            raise IndexChangedError(
                f"the dedup index at {self.path} moved from generation {base.generation} to "
                f"{now.generation if now else 0} while this batch was queried: another "
                "append ran at the same time. Query the batch again and append that")
        state = IndexState(
            kind=base.kind, parameters=base.parameters, partitions=base.partitions,
            generation=generation,
            segments=[*base.segments, Segment(name, generation, written.rows)],
            batches={**base.batches, **({batch: generation} if batch else {})},
            rows=base.rows + written.rows)
        self._write_state(state)
        self._remove_unreferenced(state)
        logger.info("dedup index %s: generation %d, %d keys added (%d in all)", self.path,
                    generation, written.rows, state.rows)
        return state

    def _remove_unreferenced(self, state: IndexState) -> None:
        """Delete segments no pointer names, of generations up to the current one: the
        leftovers of appends that crashed before moving the pointer, or lost to another."""
        named = {s.name for s in state.segments}
        for entry in self.fs.ls(self.root, detail=False):
            base = posixpath.basename(entry.rstrip("/"))
            match = _SEGMENT.match(base)
            if match and base not in named and int(match.group(1)) <= state.generation:
                logger.info("dedup index %s: removing %s, left by an append that did not "
                            "finish", self.path, base)
                atomic.remove_entry(self.fs, entry)

    # -- routing -----------------------------------------------------------------------------
    @staticmethod
    def route(keys: dd.DataFrame, routes: int) -> dd.DataFrame:
        """Send each row of ``keys`` (with a :data:`PARTITION_FIELD` column, the key modulo
        ``routes``) to its partition: one shuffle of the batch's keys, never of the index."""
        return route_to_partitions(keys, PARTITION_FIELD, routes)

    @staticmethod
    def regroup(rows: dd.DataFrame, partitions: int, keys: tuple[str, ...]) -> dd.DataFrame:
        """Rows routed to a multiple of ``partitions`` as one partition per index
        partition: partition ``p`` gathers routes ``p``, ``p + partitions``, ..., sorted
        by ``keys`` (each route is already)."""
        if rows.npartitions == partitions:
            return rows
        parts = rows.to_delayed()
        gathered = [delayed_task(_sorted_concat, "index")(parts[p::partitions], list(keys))
                    for p in range(partitions)]
        return dd.from_delayed(gathered, meta=rows._meta, verify_meta=False)


def _sorted_concat(frames, keys: list[str]):
    import pandas as pd

    return pd.concat(frames, ignore_index=True).sort_values(keys, ignore_index=True)


class PartitionReader:
    """Reads one index partition's file of each segment (each sorted by its keys, as an
    append writes it), as Arrow tables."""

    def __init__(self, fs, schema: pa.Schema):
        self.fs, self.schema = fs, schema

    def __call__(self, files: list[str]) -> list[pa.Table]:
        tables = []
        for file in files:
            with self.fs.open(file, "rb") as handle:
                table = pq.read_table(handle, columns=self.schema.names, use_threads=False)
            tables.append(table.replace_schema_metadata(None).cast(self.schema))
        return tables
