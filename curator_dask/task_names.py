"""Dask task names that say the stage and the phase: ``<stage>/<phase>-<hash>``.

The Dask dashboard groups tasks by the prefix of their keys (``dask.utils.key_split``):
the task stream colours, the progress panel and the task groups all read it. Every task
curator-dask builds is named here, so those panels read as the pipeline
(``near_dups/minhash``, ``near_dups/lsh``, ``exact_dedup/shuffle``) rather than as the
functions that happen to run (``bucket_edges``, ``getitem``).

The first word is the **scope**: the name of the pipeline stage running (a user may
name two fuzzy dedup stages differently), or, outside a pipeline, of the workflow called
(``fuzzy_dedup``, ``exact_dedup``, ``semantic_dedup``). The second is the **phase**,
given where the tasks are built. A scope is entered around the code that builds the
graph (:func:`task_scope`, or :func:`scoped` on a workflow's methods); the outermost
scope wins, so a workflow run by a stage names its tasks after the stage.

>>> task_name("minhash")
'curator/minhash'
>>> with task_scope("near dups"):
...     with task_scope("fuzzy_dedup"):  # the stage's name wins
...         task_name("lsh")
'near_dups/lsh'
>>> import dask.utils
>>> dask.utils.key_split(task_name("lsh", scope="fuzzy_dedup") + "-8c1e4d0f5b")
'fuzzy_dedup/lsh'
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
import uuid
from collections.abc import Callable, Iterator

import dask
import dask.utils

from curator_dask._keys import stage_of_key
from curator_dask.faults import faults_explained, planned_partition_bytes

__all__ = ["current_scope", "delayed_task", "key_word", "scoped", "stage_of_key", "stage_task_name",
           "task_label", "task_name", "task_scope"]

#: The scope when none is entered.
DEFAULT_SCOPE = "curator"

_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "curator_dask_task_scope", default=None)


def key_word(name: str, default: str = "step") -> str:
    """``name`` as one word of a task key: letters, digits and ``_``, starting with a
    letter, so that ``dask.utils.key_split`` gives it back whole.

    >>> key_word("word count/v2"), key_word("2nd-pass"), key_word("")
    ('word_count_v2', 's_2nd_pass', 'step')
    """
    word = re.sub(r"\W", "_", name)
    if not word:
        return default
    return word if word[0].isalpha() else f"s_{word}"


def current_scope() -> str | None:
    """The name of the scope entered (:func:`task_scope`), or None outside any."""
    return _SCOPE.get()


@contextlib.contextmanager
def task_scope(name: str) -> Iterator[str]:
    """Name the tasks built inside after ``name``; inside another scope, the outer name
    stays (a stage's name over the workflow it runs). Yields the scope in force."""
    outer = _SCOPE.get()
    if outer is not None:
        yield outer
        return
    token = _SCOPE.set(key_word(name))
    try:
        yield _SCOPE.get()
    finally:
        _SCOPE.reset(token)


def scoped(name: str) -> Callable[[Callable], Callable]:
    """Decorate a workflow's method so that the tasks it builds are named after
    ``name`` (unless a stage's scope is in force already).

    Called from outside any scope (from a user's code, not from a stage or another
    workflow method), the method is where a run enters the library: a task whose worker
    died on every try leaves it as :func:`~curator_dask.faults.faults_explained` names it
    (for memory: the limit, the size of the partitions of the dataset it was given, and
    the setting to change), not as distributed's bare ``KilledWorker``."""
    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if _SCOPE.get() is not None:  # the caller that entered the scope names faults
                return func(*args, **kwargs)
            with faults_explained(lambda: _largest_partition(args, kwargs)), task_scope(name):
                return func(*args, **kwargs)
        return wrapper
    return decorate


def _largest_partition(args: tuple, kwargs: dict) -> int | None:
    """The input bytes of the largest planned partition of the datasets among a call's
    arguments, or in a list or tuple of them (None when none has a plan)."""
    values = [*args, *kwargs.values()]
    values += [v for value in values if isinstance(value, (list, tuple)) for v in value]
    sizes = [planned_partition_bytes(getattr(value, "plan", None)) or 0 for value in values]
    return max(sizes, default=0) or None


def task_name(phase: str, scope: str | None = None) -> str:
    """The prefix of a task key, ``<scope>/<phase>``: the scope in force, else ``scope``,
    else ``curator``. Give it as ``token=`` to ``map_partitions``, or with a suffix of
    one's own (``f"{task_name('hash')}-{token}-{i}"``) as ``dask_key_name``."""
    return stage_task_name(_SCOPE.get() or scope or DEFAULT_SCOPE, phase)


def task_label(name: str) -> str:
    """What the tasks of a step called ``name`` are called where the code that builds
    them serves any caller (a dataset's step, a write): ``<scope>/<name>`` inside a
    task scope, else ``name`` alone.

    >>> task_label("write")
    'write'
    >>> with task_scope("exact_dedup"):
    ...     task_label("write")
    'exact_dedup/write'
    """
    return task_name(name) if _SCOPE.get() is not None else key_word(name)


def stage_task_name(stage: str, phase: str) -> str:
    """The prefix of the tasks of ``stage``'s ``phase``, whatever scope is in force (an
    executor names each stage of the pipeline it runs).

    >>> stage_task_name("word count", "process")
    'word_count/process'
    """
    return f"{key_word(stage)}/{key_word(phase)}"


def delayed_task(func: Callable, phase: str, *, scope: str | None = None,
                 pure: bool = False) -> Callable:
    """``dask.delayed(func)`` whose calls are tasks named ``task_name(phase)``, each
    with a key of its own.

    >>> import dask.utils
    >>> with task_scope("exact_dedup"):
    ...     total = delayed_task(sum, "count")([1, 2])
    >>> dask.utils.key_split(total.key), total.compute()
    ('exact_dedup/count', 3)
    """
    name = task_name(phase, scope)

    def call(*args, **kwargs):
        return dask.delayed(func, pure=pure)(*args, dask_key_name=f"{name}-{uuid.uuid4().hex}",
                                             **kwargs)
    return call
