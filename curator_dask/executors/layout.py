"""A pipeline cut for execution: reader, segments of partition stages, barriers, writer.

:class:`Layout` is what every executor runs (:mod:`curator_dask.executors.base`); it
gives each stage its one name in the run and the fingerprint a resume checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from curator_dask.errors import InvalidArgumentError
from curator_dask.stages.base import (
    ProcessingStage,
    Stage,
    WholeDatasetStage,
    unique_name,
)
from curator_dask.stages.io_stages import ReaderStage, WriterStage

__all__ = ["InternalStage", "Layout"]


@dataclass
class Layout:
    """A pipeline cut for execution: reader, segments of partition stages, barriers, writer.

    ``segments[i]`` runs before ``barriers[i]``; the last segment has no barrier after it.
    """

    name: str
    reader: ReaderStage
    segments: list[list[ProcessingStage]]
    barriers: list[WholeDatasetStage]
    writer: WriterStage | None
    names: dict[int, str] = field(default_factory=dict)  # id(stage) -> unique display name

    @classmethod
    def of(cls, name: str, stages: Sequence[Stage]) -> Layout:
        if not stages or not isinstance(stages[0], ReaderStage):
            raise InvalidArgumentError(
                f"pipeline {name!r} must start with a reader stage (JsonlReader or "
                "ParquetReader); add one with add_stage() first"
            )
        writer = stages[-1] if isinstance(stages[-1], WriterStage) else None
        middle = stages[1:-1] if writer is not None else stages[1:]
        segments: list[list[ProcessingStage]] = [[]]
        barriers: list[WholeDatasetStage] = []
        for stage in middle:
            if isinstance(stage, WholeDatasetStage):
                barriers.append(stage)
                segments.append([])
            else:
                segments[-1].append(stage)
        layout = cls(name, stages[0], segments, barriers, writer)
        for stage in stages:
            layout.names[id(stage)] = unique_name(stage.name, layout.names.values())
        return layout

    def name_of(self, stage: Stage) -> str:
        """The stage's unique name in the pipeline; a stage the executor adds (an
        :class:`InternalStage`) goes by its own."""
        return self.names.get(id(stage), stage.name)

    def entry(self, stage: Stage) -> dict:
        """``{"name", "kind", "fingerprint"}`` of one stage, as a resume manifest keeps it."""
        return {"name": self.name_of(stage), "kind": stage.kind,
                "fingerprint": stage.fingerprint()}

    def fingerprint(self, upto: Stage | None = None) -> list[dict]:
        """What the pipeline computes: every stage's :meth:`entry`, in order.

        The same under every executor (names, resources and batch sizes are not part of
        a stage's fingerprint). With ``upto`` (a stage of the layout), only the stages
        before it: what a barrier's input depends on.
        """
        stages = self.stages
        if upto is not None:
            stages = stages[:next(i for i, s in enumerate(stages) if s is upto)]
        return [self.entry(stage) for stage in stages]

    @property
    def stages(self) -> list[Stage]:
        out: list[Stage] = [self.reader]
        for i, segment in enumerate(self.segments):
            out.extend(segment)
            if i < len(self.barriers):
                out.append(self.barriers[i])
        if self.writer is not None:
            out.append(self.writer)
        return out

    @property
    def processing_stages(self) -> list[ProcessingStage]:
        return [s for segment in self.segments for s in segment]

    def order(self, resources: dict[int, dict] | None = None) -> list[tuple[str, str, str]]:
        """(name, kind, resources) of every stage, for metrics."""
        out = []
        for stage in self.stages:
            res = (resources or {}).get(id(stage))
            if res == {}:  # check_placement: workers without resources, any will do
                shown = "unrestricted"
            else:
                shown = (", ".join(f"{k}={v:g}" for k, v in res.items()) if res
                         else str(stage.resources or ""))
            out.append((self.name_of(stage), stage.kind, shown))
        return out


class InternalStage(Stage):
    """A step the executor adds around a barrier: writing its input to the cache
    (kind ``"write"``, named ``<barrier>_input``) or reading its output back (kind
    ``"read"``, named ``<barrier>_output``), on one CPU. Its tasks are named after the
    barrier: ``<barrier>/input``, ``<barrier>/output``."""

    def __init__(self, barrier: str, kind: str):
        self.barrier, self.kind = barrier, kind
        self.phase = "input" if kind == "write" else "output"
        self.name = f"{barrier}_{self.phase}"
