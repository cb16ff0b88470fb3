"""One partition as it travels from the reader to the writer: the frame, and what
happened to it on the way.

Every hop of a partition's path takes a :class:`Partition` and returns one: a reader
makes it (:class:`PlannedRead`), the stage runtime runs a stage on it, a batch is
several of them concatenated (:meth:`Partition.concat`), a writer writes it and returns
its stats, and ``DocumentDataset`` maps its steps over them. What happened travels in
the envelope, never on the frame:

- ``dropped``: documents that left, by reason (a filter's name, ``reader.bad_json_line``);
- ``counters``: events that dropped no document but are counted beside the drops
  (entities redacted, documents split, a classifier's labels);
- ``records``: one :class:`TaskRecord` per task that worked on the partition, which the
  run sums into its metrics.

Code that runs inside a hop (a stage's ``process``, a reader) counts with
:func:`~curator_dask.dropped.record_dropped` and its siblings; :meth:`Partition.apply`
opens the tally they count into around the call, so a count always lands on the
partition being worked on, whatever the backend (pandas or cuDF) of its frame.

Examples
--------
>>> import pandas as pd
>>> from curator_dask.dropped import record_dropped
>>> def drop_empty(df):
...     keep = df["text"].str.len() > 0
...     return record_dropped(df[keep], "empty", int((~keep).sum()))
>>> part = Partition(pd.DataFrame({"text": ["a", "", "b"]}))
>>> out = part.apply(drop_empty)
>>> len(out), out.dropped
(2, {'empty': 1})
>>> Partition.concat([out, out]).dropped
{'empty': 2}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from dask.dataframe.dispatch import concat as concat_frames
from dask.sizeof import sizeof

from curator_dask.dropped import counting, join_counts

__all__ = ["Partition", "PlannedRead", "Step", "TaskRecord", "run_steps"]


@dataclass
class TaskRecord:
    """One task's work: the stage, the input partitions it covered, rows, bytes, time.

    ``index`` is the first input partition (None for a whole-dataset stage, which works
    on all of them); ``start``/``stop`` are epoch seconds; ``worker`` is the worker's
    address (``local:<host>:<pid>`` in-process, ``client`` for a whole-dataset stage).
    :attr:`~curator_dask.observe.run_result.RunResult.records` holds them as dicts
    (:meth:`as_dict`).
    """

    stage: str
    partitions: int
    rows_in: int
    rows_out: int
    bytes: int
    seconds: float
    start: float
    stop: float
    worker: str
    index: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _added(counts: Mapping[str, int], more: Mapping[str, int]) -> dict[str, int]:
    if not more:
        return dict(counts)
    total = Counter(counts)
    total.update(more)
    return {key: count for key, count in total.items() if count}


@dataclass
class Partition:
    """One partition's frame with its drop counts, counters and task records.

    Attributes
    ----------
    frame : DataFrame
        The documents: a pandas or cuDF frame (or a ``pyarrow.Table`` where work stays
        in Arrow from the reader to the writer).
    dropped : dict of str to int
        Documents removed upstream of this frame, by reason.
    counters : dict of str to int
        Events counted upstream that removed no document, by name.
    records : list of TaskRecord
        The tasks that worked on the partition so far (executors only).
    """

    frame: Any
    dropped: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    records: list[TaskRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.frame)

    def __sizeof__(self) -> int:
        """The bytes the frame holds (and the small rest): what distributed counts for a
        task's result, to decide where its dependents run (moving a partition costs its
        size) and what to spill. Without it a partition of 60 MB counted 56 bytes, so the
        scheduler moved partitions to balance workers and never spilled them."""
        return (object.__sizeof__(self) + sizeof(self.frame) + sizeof(self.dropped)
                + sizeof(self.counters) + sizeof(self.records))

    @property
    def counts(self) -> dict[str, int]:
        """Drop counts and counters in one mapping, counters marked (as part stats and
        completion records keep them; see :func:`~curator_dask.dropped.split_counts`)."""
        return join_counts(self.dropped, self.counters)

    def apply(self, func: Callable, *args, **kwargs) -> Partition:
        """``func(frame, *args, **kwargs)`` as a new partition: the counts it recorded
        (:func:`~curator_dask.dropped.record_dropped`, ...) added to these, the records
        kept."""
        with counting() as tally:
            frame = func(self.frame, *args, **kwargs)
        return Partition(frame, _added(self.dropped, tally.dropped),
                         _added(self.counters, tally.counters), list(self.records))

    def with_frame(self, frame) -> Partition:
        """The same counts and records around another frame."""
        return Partition(frame, dict(self.dropped), dict(self.counters), list(self.records))

    def with_records(self, records: Iterable[TaskRecord]) -> Partition:
        """The same partition with ``records`` added to its records."""
        return Partition(self.frame, self.dropped, self.counters, [*self.records, *records])

    @classmethod
    def concat(cls, parts: Sequence[Partition]) -> Partition:
        """Partitions as one (a batch): frames concatenated in order, counts summed,
        records joined."""
        if len(parts) == 1:
            return parts[0]
        dropped: Counter = Counter()
        counters: Counter = Counter()
        records: list[TaskRecord] = []
        for part in parts:
            dropped.update(part.dropped)
            counters.update(part.counters)
            records.extend(part.records)
        frame = concat_frames([part.frame for part in parts], ignore_index=False)
        return cls(frame, dict(dropped), dict(counters), records)


class Step(Protocol):
    """A step of a partition's path: a stage, or a function of the frame.

    ``step(partition, index)`` returns the partition after the step (``index``: the
    partition's number in its dataset, which ``AddId`` numbers documents by); ``name``
    names its tasks.
    """

    name: str

    def __call__(self, part: Partition, index: int, /) -> Partition: ...


def run_steps(part: Partition, steps: Sequence[Step], index: int) -> Partition:
    """``part`` through ``steps``, in order."""
    for step in steps:
        part = step(part, index)
    return part


@dataclass(frozen=True)
class PlannedRead:
    """The task that reads one planned partition and runs the steps applied since, in
    one call: what an executor submits, or a dataset computes, per planned partition.

    ``reader(spec)`` reads a partition's frame; the rows it skips, counted with
    :func:`~curator_dask.dropped.record_dropped`, go to the new partition's counts.
    ``spec.index`` is the partition's number.
    """

    reader: Callable
    steps: tuple = ()

    def __call__(self, spec) -> Partition:
        with counting() as tally:
            frame = self.reader(spec)
        part = Partition(frame, dict(tally.dropped), dict(tally.counters))
        return run_steps(part, self.steps, spec.index)
