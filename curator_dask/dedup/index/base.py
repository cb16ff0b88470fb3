"""What the exact and fuzzy dedup indexes share: opening, parameters, queries, appends.

A query is lazy where it can be and persists what it must: the batch's keys, routed to
the index partitions (one shuffle of the batch's keys), and each key marked as new, a
duplicate within the batch or a duplicate of the index. :class:`IndexQuery` holds that,
the counts, and the dataset without the duplicates; :meth:`IndexQuery.append` adds the
batch's new keys to the index as its next generation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import dask
import dask.dataframe as dd
import numpy as np

from curator_dask.dataset import DocumentDataset
from curator_dask.dedup.config import resolve_config
from curator_dask.dedup.index.store import (
    GENERATION_FIELD,
    IndexParameterError,
    IndexState,
    IndexStore,
)
from curator_dask.errors import ArgumentTypeError
from curator_dask.io.overlap import check_output_path
from curator_dask.task_names import delayed_task, task_name

__all__ = ["DedupIndex", "IndexQuery", "count_actions", "counted_reasons"]

logger = logging.getLogger(__name__)


@dataclass
class IndexQuery:
    """A batch queried against a dedup index.

    Attributes
    ----------
    kept : DocumentDataset
        The batch without its duplicates (lazy), each removed document counted under its
        reason in :meth:`~curator_dask.DocumentDataset.dropped_counts`.
    documents : int
        Documents of the batch that were compared (null texts left out).
    removed : dict of str to int
        Documents removed, by reason: duplicates of the index
        (``exact_duplicate_of_index`` / ``fuzzy_duplicate_of_index``) and duplicates
        within the batch (``exact_duplicate`` / ``fuzzy_duplicate``).
    new_keys : int
        Keys :meth:`append` would add to the index.
    base_generation : int
        The generation of the index the batch was compared with.
    appended_as : int or None
        Set once the batch is in the index: the generation it became. A batch queried
        again after its append (a rerun: read from the same files, or named by the same
        ``batch_id``, with the same keys) is compared with the generation before its
        own, and has it set from the start.
    """

    kept: DocumentDataset
    documents: int
    removed: dict[str, int]
    new_keys: int
    base_generation: int
    appended_as: int | None = None
    _index: Any = field(default=None, repr=False)
    _state: IndexState | None = field(default=None, repr=False)
    _rows: dd.DataFrame | None = field(default=None, repr=False)
    _batch: str | None = field(default=None, repr=False)

    def append(self) -> int:
        """Add the batch's new keys to the index as a new generation; returns it.

        Once per query: a second call (or an append of a batch the index already holds)
        changes nothing and returns the generation the batch became.
        """
        if self.appended_as is None:
            self.appended_as = self._index._append(self)
        return self.appended_as


class DedupIndex:
    """Base of :class:`~curator_dask.dedup.ExactDedupIndex` and
    :class:`~curator_dask.dedup.FuzzyDedupIndex`: an index directory, the parameters its
    keys are made with, and the number of partitions it is split into."""

    kind: ClassVar[str]
    config_class: ClassVar[type]
    #: The columns a segment is sorted by (its keys).
    key_columns: ClassVar[tuple[str, ...]]

    def __init__(self, path: str, *, config=None, partitions: int | None = None,
                 storage_options: dict | None = None):
        if partitions is not None and (not isinstance(partitions, int)
                                       or isinstance(partitions, bool) or partitions < 1):
            raise IndexParameterError(f"partitions must be a positive integer, got "
                                      f"{partitions!r}")
        self.path = path
        self.storage_options = storage_options
        self.store = IndexStore(path, self.kind, storage_options)
        state = self.store.state()
        who = type(self).__name__
        if config is None:
            config = self._config_from(state.parameters) if state else self.config_class()
        elif isinstance(config, Mapping):
            # Fields not given: the index's own parameters where it records them.
            recorded = state.parameters if state is not None else {}
            config = resolve_config(self.config_class, {**recorded, **config}, {}, who=who)
        elif isinstance(config, self.config_class):
            config = resolve_config(self.config_class, config, {}, who=who)
        else:
            raise ArgumentTypeError(f"{who}: config must be a {self.config_class.__name__} (or a "
                                    f"mapping of its fields), got {type(config).__name__}")
        self.config = config
        self._check_config()
        if state is not None:
            self.store.check_parameters(state.parameters, self.parameters())
            if partitions is not None and partitions != state.partitions:
                raise IndexParameterError(
                    f"the dedup index at {path} has {state.partitions} partitions, not "
                    f"{partitions}: leave partitions= out to use its own")
        self._partitions = partitions

    # -- what subclasses provide --------------------------------------------------------------
    def parameters(self) -> dict:
        """The parameters the keys depend on, as the index records them."""
        raise NotImplementedError

    def _config_from(self, parameters: dict):
        return self.config_class(**parameters)

    def _check_config(self) -> None:
        """Refuse a config the index cannot serve."""

    # -- state ---------------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        """The index's current generation (0 before anything is appended)."""
        state = self.store.state()
        return state.generation if state is not None else 0

    @property
    def keys(self) -> int:
        """Keys stored in the index, over every generation."""
        state = self.store.state()
        return state.rows if state is not None else 0

    def __repr__(self) -> str:
        state = self.store.state()
        if state is None:
            return f"{type(self).__name__}({self.path!r}, empty)"
        return (f"{type(self).__name__}({self.path!r}, generation {state.generation}, "
                f"{state.rows:,} keys in {state.partitions} partitions)")

    def _plan(self, ds: DocumentDataset) -> tuple[IndexState, int]:
        """The index now (or an empty one), and the number of partitions the batch's keys
        are sent to: a multiple of the index's partitions (partition ``q`` of the batch
        meets partition ``q % partitions`` of the index), at least the batch's own count,
        so no task holds more keys than a partition of the batch has. The index path is
        checked against the batch's inputs before anything is read."""
        if not isinstance(ds, DocumentDataset):
            raise ArgumentTypeError(f"{type(self).__name__} takes a DocumentDataset, got "
                                    f"{type(ds).__name__}")
        if ds.sources is not None:
            check_output_path(self.path, [ds.sources], what="dedup index",
                              storage_options=self.storage_options)
        state = self.store.state()
        if state is None:
            state = IndexState(kind=self.kind, parameters=self.parameters(),
                               partitions=self._partitions or self._default_partitions(ds))
        return state, state.partitions * -(-max(1, ds.npartitions) // state.partitions)

    def _default_partitions(self, ds: DocumentDataset) -> int:
        """Partitions of a new index built from ``ds``."""
        raise NotImplementedError

    @staticmethod
    def _batch_name(ds: DocumentDataset, batch_id: str | None) -> str | None:
        """Where a batch was read from: ``batch_id``, by default the files, sizes and
        partitioning of ``ds``; None for a batch read from nowhere and not named."""
        if batch_id is None:
            source = ds.stream_source()[0]  # the planned input, whatever steps since
            batch_id = source.content_token() if source is not None else None
        return batch_id or None

    @classmethod
    def _batch_key(cls, ds: DocumentDataset, batch_id: str | None, digest: str) -> str | None:
        """What names a batch in the index: where it was read from
        (:meth:`_batch_name`) and a digest of its keys; None for a batch read from
        nowhere and not named."""
        name = cls._batch_name(ds, batch_id)
        return f"{name}:{digest}" if name else None

    @staticmethod
    def _may_be_appended(state: IndexState, name: str | None, as_of: int | None) -> bool:
        """Whether a batch read from ``name`` may be in the index already (a batch from
        the same place was appended), so that its keys' digest decides which generation
        it is compared with; False when ``as_of`` decides."""
        return as_of is None and name is not None and any(
            key.startswith(f"{name}:") for key in state.batches)

    def _base(self, state: IndexState, batch: str | None,
              as_of: int | None) -> tuple[int, int | None]:
        """``(generation to compare with, generation the batch already became)``."""
        if as_of is not None:
            if not isinstance(as_of, int) or isinstance(as_of, bool) or not (
                    0 <= as_of <= state.generation):
                raise IndexParameterError(f"as_of must be a generation from 0 to "
                                          f"{state.generation}, got {as_of!r}")
            return as_of, None
        appended = state.batches.get(batch) if batch is not None else None
        if appended is not None:
            logger.warning(
                "dedup index %s: this batch (the same files and keys) was appended as "
                "generation %d already; comparing it with generation %d, as before, and not "
                "appending it again", self.path, appended, appended - 1)
            return appended - 1, appended
        return state.generation, None

    def _append(self, query: IndexQuery) -> int:
        if query.base_generation != query._state.generation:
            raise IndexParameterError(
                f"this batch was compared with generation {query.base_generation} of the "
                f"dedup index at {self.path}, not with its latest ({query._state.generation}): "
                "only a query of the latest generation can be appended (leave as_of out)")
        return self._append_rows(query._state, query._rows, query._batch)

    def _append_rows(self, state: IndexState, rows: dd.DataFrame, batch: str | None) -> int:
        """Write ``rows`` (a multiple of the index's partitions, each sorted by its keys)
        as the generation after ``state``'s; returns it."""
        rows = self.store.regroup(rows, state.partitions, self.key_columns)
        generation = state.generation + 1
        rows = rows.map_partitions(_with_generation, generation,
                                   token=task_name("append", scope="dedup_index"),
                                   meta=_with_generation(rows._meta, generation))
        return self.store.append(rows, base=state, batch=batch).generation


def _with_generation(df, generation: int):
    return df.assign(**{GENERATION_FIELD: np.full(len(df), generation, dtype=np.int32)})


def reason_counts(actions: dd.Series, reasons: dict[int, str]) -> tuple[int, dict[str, int], int]:
    """``(documents, removed by reason, new)`` from a persisted column of actions (0 = new,
    other codes as ``reasons`` names them): one small task a partition, summed."""
    width = max(reasons) + 1
    parts = [delayed_task(count_actions, "query")(part, width) for part in actions.to_delayed()]
    return counted_reasons(dask.compute(*parts), reasons)


def count_actions(actions, width: int) -> np.ndarray:
    """How many of ``actions`` (a Series of action codes) have each code below ``width``."""
    return np.bincount(np.asarray(actions.to_numpy(), dtype=np.int64), minlength=width)


def counted_reasons(parts, reasons: dict[int, str]) -> tuple[int, dict[str, int], int]:
    """``(documents, removed by reason, new)`` from :func:`count_actions` of each part."""
    counts = np.sum(np.stack(list(parts)), axis=0)
    removed = {reasons[code]: int(counts[code]) for code in sorted(reasons)}
    return int(counts.sum()), removed, int(counts[0])


def member_of(values: np.ndarray, sorted_values: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in ``sorted_values`` (sorted ascending), by binary search.

    Examples
    --------
    >>> member_of(np.array([3, 1, 9]), np.array([1, 2, 3])).tolist()
    [True, True, False]
    """
    if len(sorted_values) == 0:
        return np.zeros(len(values), dtype=bool)
    position = np.searchsorted(sorted_values, values)
    np.minimum(position, len(sorted_values) - 1, out=position)
    return sorted_values[position] == values


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``values`` sorted, each once (what a segment stores)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values


def removal_strategy(config, count: int) -> str:
    """The removal's join for ``count`` documents to remove: the config's, or for
    ``"auto"`` the choice ``remove_ids`` would make (the count is known: no second count)."""
    if config.removal_strategy != "auto":
        return config.removal_strategy
    return "broadcast" if count <= config.broadcast_threshold else "shuffle"
