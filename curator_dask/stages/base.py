"""The stage API: one partition in, one partition out, with its resources beside it.

A :class:`ProcessingStage` is the unit users write and executors schedule. The same
object works interactively (``stage(ds)`` builds a lazy ``map_partitions``) and in a
:class:`~curator_dask.pipeline.Pipeline`.

Worker-side lifecycle: a stage object travels to workers by pickle, once per task. The
first task of a stage in a worker process calls ``setup()`` on its copy under a lock and
keeps that copy (with its loaded model) in a per-process registry; every later task of
the same stage in that process uses the registered copy. ``setup_on_node()`` runs once per
host, guarded by a file lock, before the first ``setup()`` there; the lock and its marker
live in a directory per stage (:func:`node_setup_dir`) that teardown removes.
"""

from __future__ import annotations

import copy
import fcntl
import functools
import inspect
import logging
import os
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from curator_dask.bounds import PositiveInt
from curator_dask.compat import nemo_keywords
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError
from curator_dask.io import atomic
from curator_dask.partition import Partition
from curator_dask.resources import Resources
from curator_dask.stages.columns import (
    check_output_columns,
    nemo_declared_columns,
    require_columns,
)
from curator_dask.task_names import key_word, task_scope

if TYPE_CHECKING:
    from curator_dask.dataset import DocumentDataset

__all__ = [
    "ProcessingStage",
    "Sequential",
    "Stage",
    "StageStep",
    "WholeDatasetStage",
    "key_prefix",
    "processing_stage",
    "run_stage",
    "teardown_stage",
    "unique_name",
]

logger = logging.getLogger(__name__)


class Stage:
    """What every kind of stage states, so that pipelines and executors treat them alike.

    Readers, partition stages (:class:`ProcessingStage`), whole-dataset stages
    (:class:`WholeDatasetStage`), writers and the executors' own internal steps all have

    - ``kind``: ``"read"``, ``"process"``, ``"barrier"`` or ``"write"``;
    - ``name``: the stage's one name (the class name unless a class or instance sets
      one), shown in metrics and drop counts and made into task keys (:func:`key_prefix`);
      within a pipeline two stages of one name are told apart by :func:`unique_name`;
    - ``resources``: what one task holds (:class:`~curator_dask.resources.Resources`), or
      None for a whole-dataset stage, which runs its own graph;
    - declared columns: ``input_columns`` (read), ``output_columns`` (added or replaced,
      with dtypes) and ``removed_columns``; see :mod:`curator_dask.stages.columns`;
    - ``cpu_fallback``: run on one CPU when no worker offers the GPU it asks for;
    - ``working_set``: the memory one of its tasks holds at its peak per byte of input
      partition, as a kind of work of :data:`~curator_dask.io.planner.WORKING_SETS`
      (``"filters"``, ``"minhash"``, ``"embeddings"``, ...) or a number; None for the
      heuristic filters' figure. Executors size partitions and the in-flight window so
      that the largest of a pipeline's stages fits the workers' memory.
    """

    kind: ClassVar[str] = "process"
    resources: Resources | None = Resources()
    cpu_fallback: bool = False
    working_set: ClassVar[str | float | None] = None
    input_columns: Sequence[str] = ()
    output_columns: Mapping[str, Any] = {}
    removed_columns: Sequence[str] = ()

    @property
    def name(self) -> str:
        """The name set on the stage or its class (None or empty: the class name)."""
        return self.__dict__.get("name") or type(self).__name__

    @name.setter
    def name(self, value: str | None) -> None:
        self.__dict__["name"] = value


class ProcessingStage(Stage):
    """Base class of partition-wise stages.

    Subclasses implement :meth:`process` and declare the columns they add, replace or
    remove, so Dask learns the output schema without running the stage on an empty frame
    (which for a model stage would mean loading the model on the client).

    Attributes
    ----------
    name : str
        Shown in metrics, the dashboard and task keys. Defaults to the class name.
    resources : Resources
        What one task holds while it runs; see :class:`~curator_dask.resources.Resources`.
    batch_size : int
        How many partitions an executor hands to one ``process()`` call (concatenated).
        Interactive use (``stage(ds)``) always processes one partition per call.
    input_columns : Sequence[str]
        Columns :meth:`process` reads; a dataset without one is refused before anything
        runs, naming the stage and the column.
    output_columns : Mapping[str, dtype]
        Columns this stage adds or replaces, with their dtypes. Enforced: an output
        partition with a column that is not declared (or without a declared one) fails,
        naming the stage and what to declare.
    removed_columns : Sequence[str]
        Columns this stage removes.
    needs_partition_index : bool
        When true, ``process`` is called as ``process(df, partition_index=i)`` with the
        index of the input partition (stable for a given input; used by ``AddId``).
    fingerprint_ignores : tuple of str
        Attributes that change how fast the stage runs but not what it computes (a
        device, an inference batch size); left out of :meth:`fingerprint`.
    """

    resources: Resources = Resources()
    batch_size: int = 1
    needs_partition_index: bool = False
    fingerprint_ignores: tuple[str, ...] = ()

    # -- lifecycle hooks, overridden by stages that hold state -------------------------
    def setup_on_node(self) -> None:
        """Run once per host before any ``setup()`` there (download, unpack, warm a cache)."""

    def setup(self) -> None:
        """Run once per worker process before the first partition (load a model)."""

    def process(self, df):
        """Transform one partition. Must not mutate ``df`` in place."""
        raise NotImplementedError(f"{type(self).__name__} must implement process(df)")

    def teardown(self) -> None:
        """Run once per worker process at the end (release the model)."""

    # -- description --------------------------------------------------------------------
    @property
    def stage_id(self) -> str:
        """Identity shared by every pickled copy of this stage object.

        Assigned on first use on the client, so all tasks built from one stage object map
        to one worker-side instance; copies made with :meth:`with_` get a new identity.
        """
        if "_stage_id" not in self.__dict__:
            self.__dict__["_stage_id"] = uuid.uuid4().hex
        return self.__dict__["_stage_id"]

    def __dask_tokenize__(self):
        return (type(self).__qualname__, self.stage_id)

    def fingerprint(self) -> dict:
        """What this stage computes, as JSON: a resume refuses output whose pipeline had
        another fingerprint.

        The default is the class's qualified name and the public instance attributes
        (nested objects by their own attributes), less ``name``, ``resources``,
        ``batch_size``, ``storage_options`` and :attr:`fingerprint_ignores`: the same
        under every executor. Override it when a stage depends on more than its
        attributes (a file it reads, a function it calls).

        Examples
        --------
        >>> from curator_dask.stages.filters import ScoreFilter, WordCountFilter
        >>> stage = ScoreFilter(WordCountFilter(min_words=20))
        >>> stage.fingerprint()["params"]["filter_obj"]["min_words"]
        20
        >>> stage.fingerprint() == stage.with_(name="other", batch_size=4).fingerprint()
        True
        """
        from curator_dask.stages.fingerprint import object_fingerprint

        return object_fingerprint(self, ignore=self.fingerprint_ignores)

    def inputs(self) -> tuple[list[str], list[str]]:
        """NeMo Curator 1.x spelling of the declaration: ``(["data"], input_columns)``.

        A stage may override it as in NeMo Curator (``return ["data"], ["text"]``): its
        columns are then checked like ``input_columns``.
        """
        return ["data"], list(self.input_columns)

    def outputs(self) -> tuple[list[str], list[str]]:
        """NeMo Curator 1.x spelling: ``(["data"], columns added or replaced)``.

        Overridden, each column it names must be read (``inputs()``) or declared with its
        dtype in ``output_columns``; a stage naming another is refused with how to declare it.
        """
        return ["data"], list(self.output_columns)

    inputs._curator_default = outputs._curator_default = True

    def check_input_columns(self, columns) -> None:
        """Raise :class:`~curator_dask.stages.columns.ColumnNotFoundError` unless
        ``columns`` has every column the stage reads or removes (declared, or from NeMo
        Curator style ``inputs()``). :meth:`meta` calls it; so must an override of
        :meth:`meta` that does not call ``super().meta``."""
        owner = f"stage {self.name!r}"
        wanted = nemo_declared_columns(self, self.input_columns, self.output_columns)
        require_columns(owner, columns, wanted, fix=self.missing_columns_fix(wanted))
        require_columns(owner, columns, self.removed_columns, verb="removes")

    def missing_columns_fix(self, columns: Sequence[str]) -> str:
        """What to do when the input lacks some of ``columns``: by default, the
        constructor arguments that name them."""
        arguments = [key for key, value in vars(self).items()
                     if isinstance(value, str) and value in columns
                     and key not in ("name", "_stage_id")]
        if arguments:
            return f"Pass {'= or '.join(arguments)}= to name the right one."
        return "Put a stage that makes it before this one."

    def meta(self, input_meta):
        """The empty output frame for an input with schema ``input_meta``.

        Checks the declared input columns first (:meth:`check_input_columns`). The
        default then drops :attr:`removed_columns` and sets :attr:`output_columns`;
        override it when the output schema depends on the input in another way.
        """
        self.check_input_columns(input_meta.columns)
        out = input_meta.drop(columns=list(self.removed_columns))
        for column, dtype in self.output_columns.items():
            out[column] = pd.Series([], dtype=dtype, index=out.index)
        return out

    def with_(self, *, name: str | None = None, resources: Resources | None = None,
              batch_size: PositiveInt | None = None) -> ProcessingStage:
        """A copy with a new name, resources or batch size; the original is unchanged.

        Examples
        --------
        >>> from curator_dask import Resources
        >>> @processing_stage(name="strip")
        ... def strip(df):
        ...     return df.assign(text=df["text"].str.strip())
        >>> gpu_strip = strip.with_(name="strip-gpu", resources=Resources(gpus=0.25))
        >>> (strip.name, str(strip.resources)), (gpu_strip.name, str(gpu_strip.resources))
        (('strip', 'CPU=1'), ('strip-gpu', 'GPU=0.25'))
        """
        new = copy.copy(self)
        new.__dict__.pop("_stage_id", None)
        if name is not None:
            new.name = name
        if resources is not None:
            if not isinstance(resources, Resources):
                raise ArgumentTypeError(
                    f"resources must be a Resources, got {type(resources).__name__}")
            new.resources = resources
        if batch_size is not None:
            new.batch_size = _check_batch_size(batch_size)
        return new

    @nemo_keywords()
    def __call__(self, ds: DocumentDataset) -> DocumentDataset:
        """Apply the stage lazily to every partition of ``ds``."""
        from curator_dask.dataset import DocumentDataset

        if not isinstance(ds, DocumentDataset):
            raise ArgumentTypeError(
                f"stage {self.name!r} takes a DocumentDataset, got {type(ds).__name__}; "
                "wrap a Dask dataframe with DocumentDataset(df)"
            )
        return ds.with_step(StageStep(self), self.meta(ds.df._meta))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ({self.resources})>"


def _check_batch_size(batch_size: int) -> int:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive integer, got {batch_size!r}")
    return batch_size


def unique_name(name: str, taken) -> str:
    """``name``, or the first of ``name_2``, ``name_3``, ... not in ``taken``: how a
    pipeline tells apart two stages of one name (in drop counts, metrics and keys).

    >>> unique_name("word_count", []), unique_name("word_count", ["word_count"])
    ('word_count', 'word_count_2')
    >>> unique_name("word_count", {"word_count", "word_count_2"})
    'word_count_3'
    """
    taken = set(taken)
    if name not in taken:
        return name
    n = 2
    while f"{name}_{n}" in taken:
        n += 1
    return f"{name}_{n}"


def key_prefix(name: str) -> str:
    """``name`` as the prefix of Dask task keys (``<prefix>-<token>``): a plain word, so
    that ``dask.utils.key_split`` (dashboards, spans, metrics) gives the name back.

    >>> key_prefix("word count/v2")
    'word_count_v2'
    """
    return key_word(name, default="stage")


# -- worker-side runtime ---------------------------------------------------------------

_live_stages: dict[str, ProcessingStage] = {}
_live_lock = threading.Lock()


NODE_SETUP_PREFIX = "curator-dask-node-setup-"


def node_setup_dir(stage_id: str) -> str:
    """The directory where this host keeps a stage's node-setup lock and done-marker.

    One per stage (by :attr:`ProcessingStage.stage_id`) in the temporary directory of the
    worker processes; :func:`teardown_stage` removes it, so a run leaves none behind.
    """
    return os.path.join(tempfile.gettempdir(), NODE_SETUP_PREFIX + stage_id)


def _setup_on_node_once(stage: ProcessingStage) -> None:
    """Call ``setup_on_node`` once per host: the first process to take the lock does it."""
    directory = node_setup_dir(stage.stage_id)
    for attempt in range(2):
        atomic.make_local_dirs(directory)
        try:
            lock_file = atomic.open_lock(os.path.join(directory, "lock"))
            break
        except FileNotFoundError:  # a teardown removed it in between: make it again
            if attempt:
                raise
    with lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            done = os.path.join(directory, "done")
            if not os.path.exists(done):
                stage.setup_on_node()
                atomic.touch(done)
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def live_stage(stage: ProcessingStage) -> ProcessingStage:
    """This process's set-up copy of ``stage``, set up on first use."""
    live = _live_stages.get(stage.stage_id)
    if live is not None:
        return live
    with _live_lock:
        live = _live_stages.get(stage.stage_id)
        if live is None:
            _setup_on_node_once(stage)
            logger.debug("setting up stage %r in process %d", stage.name, os.getpid())
            stage.setup()
            _live_stages[stage.stage_id] = live = stage
    return live


def run_stage(part: Partition, stage: ProcessingStage, index: int = 0) -> Partition:
    """Task body: run ``stage`` on one partition with this process's live copy.

    ``index`` is the input partition's number (what a stage with
    ``needs_partition_index`` gets). What the stage records
    (:func:`~curator_dask.dropped.record_dropped`) is counted on the partition
    (:meth:`~curator_dask.partition.Partition.apply`). The output's columns are checked
    against what the stage declares (its :meth:`meta` for this input): a stage that
    returns undeclared columns, or lacks declared ones, fails here with what to declare,
    instead of a schema that silently lies to Dask.
    """
    live = live_stage(stage)
    if stage.needs_partition_index:
        out = part.apply(live.process, partition_index=index)
    else:
        out = part.apply(live.process)
    if hasattr(out.frame, "columns"):
        check_output_columns(stage.name, _expected_columns(live, part.frame), out.frame)
    return out


class StageStep:
    """A stage as a step of a dataset's partitions (what ``stage(ds)`` adds): one
    partition through :func:`run_stage`."""

    def __init__(self, stage: ProcessingStage):
        self.stage = stage
        self.name = stage.name
        # Fixed here, on the client, before the stage is pickled into tasks: every copy
        # then maps to one worker-side instance (set up once per process).
        self.stage_id = stage.stage_id

    def __call__(self, part: Partition, index: int, /) -> Partition:
        return run_stage(part, self.stage, index)


_expected: dict[tuple, list] = {}


def _expected_columns(stage: ProcessingStage, df) -> list:
    """The columns ``stage`` declares for an input with ``df``'s columns (once per process
    and input schema: a meta is built from an empty frame, not from the data)."""
    key = (stage.stage_id, tuple(df.columns))
    expected = _expected.get(key)
    if expected is None:
        expected = _expected[key] = list(stage.meta(df.iloc[:0]).columns)
    return expected


def teardown_stage(stage_id: str) -> bool:
    """Tear down and forget this process's copy of a stage; True if there was one.

    Also removes the host's node-setup directory of the stage: executors call this on
    every worker once no task of the run is left, so any process of the host may.
    """
    with _live_lock:
        live = _live_stages.pop(stage_id, None)
        for key in [k for k in _expected if k[0] == stage_id]:
            _expected.pop(key, None)
    atomic.remove_tree(node_setup_dir(stage_id))
    if live is None:
        return False
    live.teardown()
    return True


# -- function stages and composition -----------------------------------------------------

class FunctionStage(ProcessingStage):
    """A stage made from a plain function of one partition (see :func:`processing_stage`)."""

    def __init__(self, func: Callable, *, name: str | None = None,
                 resources: Resources | None = None, batch_size: int = 1,
                 output_columns: Mapping[str, Any] | None = None,
                 removed_columns: Sequence[str] = ()):
        params = inspect.signature(func).parameters
        if not params:
            raise ArgumentTypeError(
                f"{func.__name__} must take the partition as its first argument")
        self.func = func
        self.name = name or func.__name__
        self.resources = resources if resources is not None else Resources()
        self.batch_size = _check_batch_size(batch_size)
        self.output_columns = dict(output_columns or {})
        self.removed_columns = tuple(removed_columns)
        functools.update_wrapper(self, func, updated=())

    def process(self, df):
        return self.func(df)

    def fingerprint(self) -> dict:
        """The function's qualified name and a hash of its code (constants, defaults and
        closed-over values included), and the declared columns: editing the function
        changes it, moving it to another module does not."""
        from curator_dask.stages.fingerprint import function_fingerprint, jsonable

        return {"stage": f"function {self.func.__qualname__}",
                "params": {**function_fingerprint(self.func),
                           "output_columns": jsonable(self.output_columns),
                           "removed_columns": jsonable(self.removed_columns)}}


def processing_stage(func: Callable | None = None, *, name: str | None = None,
                     resources: Resources | None = None, batch_size: int = 1,
                     output_columns: Mapping[str, Any] | None = None,
                     removed_columns: Sequence[str] = ()):
    """Turn a function of one partition into a :class:`ProcessingStage`.

    Parameters
    ----------
    name : str, optional
        Stage name; defaults to the function's name.
    resources : Resources, optional
        Defaults to one CPU.
    batch_size : int, default 1
    output_columns : mapping of column name to dtype, optional
        Columns the function adds or replaces. Needed for Dask's meta: the function is
        never run on an empty frame to find out.
    removed_columns : sequence of str, optional
        Columns the function drops.

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> @processing_stage(name="length", output_columns={"length": "int64"})
    ... def add_length(df):
    ...     return df.assign(length=df["text"].str.len().astype("int64"))
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a", "bcd"]}))
    >>> add_length(ds).df.compute()["length"].tolist()
    [1, 3]
    """

    def wrap(f: Callable) -> FunctionStage:
        return FunctionStage(f, name=name, resources=resources, batch_size=batch_size,
                             output_columns=output_columns, removed_columns=removed_columns)

    return wrap(func) if func is not None else wrap


class Sequential:
    """Apply stages in order; ``Sequential([a, b])(ds)`` is ``b(a(ds))``.

    Pipelines flatten a ``Sequential`` into its stages, so each keeps its own resources.
    """

    def __init__(self, stages: Sequence[ProcessingStage | Sequential]):
        stages = list(stages)
        for stage in stages:
            if not callable(stage):
                raise ArgumentTypeError(f"Sequential takes stages, got {type(stage).__name__}")
        self.stages = stages

    def flatten(self) -> list[ProcessingStage]:
        out: list[ProcessingStage] = []
        for stage in self.stages:
            out.extend(stage.flatten() if isinstance(stage, Sequential) else [stage])
        return out

    @nemo_keywords()
    def __call__(self, ds: DocumentDataset) -> DocumentDataset:
        for stage in self.stages:
            ds = stage(ds)
        return ds

    def __repr__(self) -> str:
        return f"Sequential({[s for s in self.stages]!r})"


class WholeDatasetStage(Stage):
    """A stage that needs the whole dataset at once (deduplication): a pipeline barrier.

    Partition stages stream; a whole-dataset stage cannot, because its output for one
    document depends on every other document. Executors run the partition stages before
    it to the end, hand it the complete dataset, and go on from what it returns:
    the streaming executor writes its input to ``cache_path`` first (memory stays
    bounded) and streams on from its output.

    Subclasses implement :meth:`run`. Work that should survive a restart, and any large
    intermediate data, belongs under ``cache_path``, which is on storage every worker
    can reach and is kept between runs of the same pipeline (so ``resume=True`` can
    reuse it).

    Attributes
    ----------
    name : str
        Shown in metrics and logs. Defaults to the class name.
    output_columns, removed_columns
        As for :class:`ProcessingStage`: the schema change, so executors know the
        output's columns without running the stage.
    """

    kind = "barrier"
    resources = None  # it runs its own graph (shuffles place their own tasks)

    def fingerprint(self) -> dict:
        """What this stage computes, as JSON; see :meth:`ProcessingStage.fingerprint`.

        The default leaves out ``name``, ``storage_options``, private attributes and
        ``last_run`` (what the latest run found).
        """
        from curator_dask.stages.fingerprint import object_fingerprint

        return object_fingerprint(self, ignore=("last_run",))

    def run(self, ds: DocumentDataset, cache_path: str) -> DocumentDataset:
        """Transform the whole dataset; intermediate data goes under ``cache_path``."""
        raise NotImplementedError(f"{type(self).__name__} must implement run(ds, cache_path)")

    @nemo_keywords()
    def __call__(self, ds: DocumentDataset) -> DocumentDataset:
        """Interactive use: run with a fresh temporary cache directory. The output
        carries the counts of what came before and what :meth:`run` records on the
        client (:meth:`DocumentDataset.through`). Its tasks are named after the stage
        (``<name>/<phase>``, :mod:`curator_dask.task_names`)."""
        cache = atomic.make_temp_dir(f"curator-{key_prefix(self.name)}-")
        with task_scope(self.name):
            return ds.through(lambda documents: self.run(documents, cache))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} (whole dataset)>"
