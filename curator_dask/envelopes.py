"""A dataset's partitions as lazy envelopes: where they come from, and the steps since.

A :class:`~curator_dask.DocumentDataset` is a Dask dataframe (``ds.df``) for everything
Dask offers, but a dataframe's partitions can carry only a frame: the drop counts and
counters of each partition (:mod:`curator_dask.partition`) need a collection of their
own. :class:`Envelopes` is that collection: one ``dask.delayed``
:class:`~curator_dask.partition.Partition` per partition, from which ``ds.df`` takes
the frames (``dd.from_delayed``) and the dataset's writes and ``dropped_counts()`` take
the counts. Both hang from the same tasks, so a write computes each partition once and
counts it exactly.

An :class:`Envelopes` is an **origin** and the **steps** applied since:

- the origin is a planned input (:class:`~curator_dask.io.source.PartitionSource`,
  read one task a partition), a dataframe of the user's (its partitions carry no
  counts), or envelopes already made (persisted, or kept by an executor);
- a step is a callable ``step(partition, index) -> Partition`` (a stage, a function of
  the frame); the steps run one after another in one task per partition.

A step that takes another collection, partition by partition (a dedup removal's list of
ids), cannot run inside the origin's task: the envelopes so far become the origin
(:meth:`Envelopes.with_layer`) and the step runs as a task of its own. While the origin
is a planned input and every step a plain callable, the whole chain can be streamed
from the input (:meth:`Envelopes.stream_source`): that is how an executor streams from
the output of a whole-dataset stage without writing it first.

Counts from before an origin that is not a planned input (a ``repartition`` regroups
the envelopes) are kept as ``carried`` counts and summed with the rest.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import dask
import dask.dataframe as dd

from curator_dask.errors import InvalidArgumentError
from curator_dask.io.source import PartitionSource
from curator_dask.partition import Partition, PlannedRead, Step, run_steps
from curator_dask.task_names import task_label

__all__ = ["Envelopes", "FunctionStep", "counts_of", "frame_of"]

class _Slot:
    """Stands where a :class:`FunctionStep`'s argument is given partition by partition
    (told by its type: a pickled copy is another object)."""


_SLOT = _Slot()


@dataclass(frozen=True)
class FunctionStep:
    """``func(frame, *args, **kwargs)`` as a step: what it records is counted on the
    partition. A function that takes ``partition_info`` gets ``{"number": index}``, as
    Dask's ``map_partitions`` gives it."""

    func: Callable
    args: tuple = ()
    kwargs: tuple = ()  # (name, value) pairs: the step stays hashable and picklable

    @property
    def name(self) -> str:
        return getattr(self.func, "__name__", type(self.func).__name__)

    def __call__(self, part: Partition, index: int, /, *given) -> Partition:
        """Run on ``part``; ``given``: the values of the partition-by-partition
        arguments, in order."""
        values = iter(given)
        args = [next(values) if isinstance(arg, _Slot) else arg for arg in self.args]
        kwargs = dict(self.kwargs)
        if _takes_partition_info(self.func):
            kwargs["partition_info"] = {"number": index}
        return part.apply(self.func, *args, **kwargs)


def _takes_partition_info(func: Callable) -> bool:
    try:
        return "partition_info" in inspect.signature(func).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def _wrap_and_run(frame, steps: Sequence[Step], index: int) -> Partition:
    return run_steps(Partition(frame), steps, index)


def _layer(step: FunctionStep, part: Partition, index: int, *given) -> Partition:
    return step(part, index, *given)


def frame_of(part: Partition):
    """The frame of a partition."""
    return part.frame


def counts_of(part: Partition) -> dict[str, int]:
    """Drops and counters of a partition, in one mapping."""
    return part.counts


@dataclass(frozen=True)
class Envelopes:
    """The lazy partitions of a dataset: an origin, the steps since, carried counts.

    Attributes
    ----------
    origin : PartitionSource, dask DataFrame or list of Delayed
        Where the partitions come from.
    steps : tuple of steps
        Applied to each partition of the origin, in one task.
    carried : tuple
        Counts (joined mappings, or Delayed ones) from before the origin.
    """

    origin: Any
    steps: tuple = ()
    carried: tuple = ()
    token: str = ""
    #: What the partitions' tasks are called (fixed when the envelopes are made, under
    #: the task scope in force then): the last step, else the reader.
    label: str = "partition"

    @classmethod
    def of(cls, origin, carried: tuple = (), label: str | None = None) -> Envelopes:
        if label is None:
            label = (task_label(origin.label) if isinstance(origin, PartitionSource)
                     else task_label("partition"))
        return cls(origin, (), tuple(carried), uuid.uuid4().hex, label)

    @property
    def npartitions(self) -> int:
        origin = self.origin
        if isinstance(origin, PartitionSource):
            return max(len(origin.plan), 1)
        if isinstance(origin, dd.DataFrame):
            return origin.npartitions
        return len(origin)

    def with_step(self, step: Step, label: str | None = None) -> Envelopes:
        """These partitions with ``step`` run after the others, in the same task, called
        ``label`` (by default after the step)."""
        return Envelopes(self.origin, (*self.steps, step), self.carried, uuid.uuid4().hex,
                         label or task_label(step.name))

    def with_layer(self, func: Callable, args: Sequence, kwargs: dict,
                   label: str | None = None) -> Envelopes:
        """These partitions through ``func(frame, *args, **kwargs)`` as a task of its own,
        called ``label`` (by default after ``func``), where ``args`` hold Dask
        collections: a dataframe of one partition (or a ``Delayed``) goes whole to every
        partition, a dataframe of as many partitions as these goes partition by
        partition."""
        n = self.npartitions
        values: list[list | None] = []
        for arg in args:
            if isinstance(arg, (dd.DataFrame, dd.Series)):
                pieces = arg.to_delayed()
                if len(pieces) not in (1, n):
                    raise InvalidArgumentError(
                        f"map_partitions: an argument has {len(pieces)} "
                        f"partitions; give one, or as many as the dataset ({n})")
                values.append(pieces * n if len(pieces) == 1 else pieces)
            elif dask.is_dask_collection(arg):
                values.append([arg] * n)
            else:
                values.append(None)
        step = FunctionStep(
            func,
            tuple(_SLOT if v is not None else a for a, v in zip(args, values, strict=True)),
            tuple(kwargs.items()),
        )
        label = label or task_label(step.name)
        name = f"{label}-{uuid.uuid4().hex}"
        layer = [dask.delayed(_layer, pure=False)(step, part, i,
                                                  *(v[i] for v in values if v is not None),
                                                  dask_key_name=(name, i))
                 for i, part in enumerate(self.delayed())]
        return Envelopes.of(layer, self.carried, label)

    def delayed(self) -> list:
        """One ``Delayed`` :class:`~curator_dask.partition.Partition` per partition."""
        origin, steps = self.origin, self.steps
        name = f"{self.label}-{self.token}"
        if isinstance(origin, PartitionSource):
            if not origin.plan:
                return [dask.delayed(Partition(origin.meta))]
            read = PlannedRead(origin.reader, (*origin.steps, *steps))
            return [dask.delayed(read, pure=False)(spec, dask_key_name=(name, i))
                    for i, spec in enumerate(origin.plan)]
        if isinstance(origin, dd.DataFrame):
            if not steps:  # wrapped for whoever asks now (a removal's layer): its name
                name = f"{task_label('partition')}-{self.token}"
            return [dask.delayed(_wrap_and_run, pure=False)(frame, steps, i,
                                                            dask_key_name=(name, i))
                    for i, frame in enumerate(origin.to_delayed())]
        if not steps:
            return list(origin)
        return [dask.delayed(run_steps, pure=False)(part, steps, i, dask_key_name=(name, i))
                for i, part in enumerate(origin)]

    def frames(self, meta) -> dd.DataFrame:
        """The partitions' frames as a Dask dataframe with ``meta``."""
        if isinstance(self.origin, dd.DataFrame) and not self.steps:
            return self.origin
        name = f"{self.label}-{self.token}-frame"
        frames = [dask.delayed(frame_of, pure=False)(part, dask_key_name=(name, i))
                  for i, part in enumerate(self.delayed())]
        # The partitions are typed already: convert-string would turn object columns
        # (embedding vectors, lists) into their repr strings.
        with dask.config.set({"dataframe.convert-string": False}):
            return dd.from_delayed(frames, meta=meta, verify_meta=False, prefix=self.label,
                                   divisions=[None] * (len(frames) + 1))

    def counts(self) -> list:
        """Every partition's counts (Delayed), and the carried ones."""
        name = f"{self.label}-{self.token}-counts"
        return [*(dask.delayed(counts_of, pure=False)(part, dask_key_name=(name, i))
                  for i, part in enumerate(self.delayed())), *self.carried]

    def stream_source(self, meta) -> tuple[PartitionSource | None, str]:
        """The planned input these partitions can be streamed from (reading a planned
        partition and running the steps in the same task), or None and why not."""
        if not isinstance(self.origin, PartitionSource):
            return None, ("its partitions are not read from a planned input alone (a "
                          "step took another collection, or it was persisted or regrouped)")
        if self.carried:
            return None, "it carries counts that no partition holds"
        return replace(self.origin, steps=(*self.origin.steps, *self.steps), meta=meta), ""
