"""The path of one partition through a pipeline, as the package's own functions see it.

:func:`partition_path` runs a small pipeline (a JSONL reader, one stage made with
``@processing_stage``, a Parquet writer) on the :class:`~curator_dask.LocalExecutor`,
which runs the same task bodies as the cluster executors, and looks at the call stack at
the three moments that make the partition's path: when the reader turns the file's
bytes into the partition's frame, when the stage's ``process`` is entered, and when the
writer opens the part to write it. The package's functions on those stacks, from the
task body down, are the *hops* (each counted once); the modules they live in are the
*files* a reader follows the partition through. Every call from one hop to the next is
checked against the layers of the package (:data:`LAYERS`): a call from a lower layer
into a higher one that the caller's module imports (not a function it was handed: a
reader, a stage's ``process``) crosses back up.

``python -m curator_dask.testing.path`` prints the hops in the order the partition meets
them (``docs/architecture.md`` quotes it).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import fsspec

__all__ = ["LAYERS", "Hop", "PartitionPath", "layer_of", "partition_path"]

#: The package's layers, lowest first: a module may call into its own layer or a lower one.
LAYERS = (
    ("curator_dask.errors", "curator_dask.partition", "curator_dask.dropped",
     "curator_dask.bounds", "curator_dask.backends", "curator_dask._"),
    ("curator_dask.io",),
    ("curator_dask.envelopes", "curator_dask.dataset", "curator_dask.text"),
    ("curator_dask.stages", "curator_dask.resources", "curator_dask.compat"),
    ("curator_dask.dedup",),
    ("curator_dask.executors", "curator_dask.pipeline", "curator_dask.observe"),
)


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module`` (None outside the package's layers).

    >>> layer_of("curator_dask.io.writers"), layer_of("curator_dask.executors.runtime")
    (1, 5)
    """
    best, found = -1, None
    for level, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(
                prefix if prefix.endswith("_") else prefix + ".")
            if matches and len(prefix) > best:
                best, found = len(prefix), level
    return found


@dataclass(frozen=True)
class Hop:
    """A function of the package on the partition's path."""

    module: str
    function: str

    def __str__(self) -> str:
        return f"{self.module}.{self.function}"


@dataclass
class PartitionPath:
    """The hops of one partition, in the order it met them, and the calls between them
    that cross back up a layer."""

    hops: list[Hop] = field(default_factory=list)
    upward: list[tuple[Hop, Hop]] = field(default_factory=list)

    @property
    def files(self) -> list[str]:
        """The modules of the hops, in the order the partition reaches them."""
        return list(dict.fromkeys(hop.module for hop in self.hops))


_TASKS = {"read_task", "stage_task", "write_task"}
#: The calls that mark a moment of the path, as (module, function, a function of the
#: package that must be on the stack): the frame made from the file's data, the part
#: opened for writing.
_MOMENTS = {("curator_dask.io.arrow_types", "to_frame", "read_jsonl_partition"),
            ("curator_dask.io.atomic", "atomic_open", "_write_frame")}


def _function_name(frame) -> str:
    code = frame.f_code
    return getattr(code, "co_qualname", code.co_name)


def _module(frame) -> str:
    return frame.f_globals.get("__name__", "")


def _package_stack(frame) -> list:
    """The package's frames from the task body down to ``frame`` (outermost first)."""
    stack = []
    while frame is not None:
        module = _module(frame)
        if module.startswith("curator_dask") and not module.startswith("curator_dask.testing"):
            stack.append(frame)
            if module == "curator_dask.executors.runtime" and _function_name(frame) in _TASKS:
                return stack[::-1]
        frame = frame.f_back
    return []


def _depends(caller, module: str) -> bool:
    """Whether ``caller``'s module imports ``module`` or names from it: a call into a
    function it was handed (a reader, a stage's ``process``) is not a dependency."""
    for value in caller.f_globals.values():
        if type(value).__name__ == "module" and getattr(value, "__name__", None) == module:
            return True
        if getattr(value, "__module__", None) == module:
            return True
    return False


def partition_path(stage=None) -> PartitionPath:
    """Run one partition through reader, ``stage`` (default: a function that upper-cases
    the text) and writer, and return the hops it took on the worker's side."""
    from curator_dask import LocalExecutor, Pipeline, processing_stage
    from curator_dask.io import atomic
    from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

    if stage is None:
        @processing_stage(name="upper")
        def stage(df):
            return df.assign(text=df["text"].str.upper())

    path = PartitionPath()
    process = getattr(stage, "func", None) or type(stage).process
    process_code = process.__code__

    def record(stack: list) -> None:
        previous = None
        for frame in stack:
            hop = Hop(_module(frame), _function_name(frame))
            if hop not in path.hops:
                path.hops.append(hop)
            if previous is not None and _depends(previous, hop.module):
                caller = Hop(_module(previous), _function_name(previous))
                below, above = layer_of(caller.module), layer_of(hop.module)
                if (below is not None and above is not None and above > below
                        and (caller, hop) not in path.upward):
                    path.upward.append((caller, hop))
            previous = frame

    moments = {(module, function): within for module, function, within in _MOMENTS}

    def profile(frame, event, arg):
        if event != "call":
            return
        if frame.f_code is process_code:  # the stage's own code is not the package's
            record(_package_stack(frame.f_back))
            return
        within = moments.get((_module(frame), _function_name(frame)))
        if within is not None:
            stack = _package_stack(frame)
            if any(entry.f_code.co_name == within for entry in stack):
                record(stack)

    root = atomic.make_temp_dir("curator-path-")  # files are written by the atomic module
    try:
        fs = fsspec.filesystem("file")
        source = str(Path(root, "in"))
        atomic.make_dirs(fs, source)
        atomic.write_bytes(fs, str(Path(source, "a.jsonl")), "".join(
            json.dumps({"text": f"document {i}"}) + "\n" for i in range(5)).encode())
        pipeline = (Pipeline("path").add_stage(JsonlReader(source))
                    .add_stage(stage).add_stage(ParquetWriter(str(Path(root, "out")))))
        sys.setprofile(profile)
        try:
            pipeline.run(LocalExecutor(progress=False))
        finally:
            sys.setprofile(None)
    finally:
        atomic.remove_tree(root)
    return path


def main() -> None:
    path = partition_path()
    for number, hop in enumerate(path.hops, start=1):
        print(f"{number:>3}  {hop}")
    print(f"{len(path.hops)} hops over {len(path.files)} files; "
          f"{len(path.upward)} calls back up a layer")
    for caller, callee in path.upward:
        print(f"     up: {caller} -> {callee}")


if __name__ == "__main__":
    main()
