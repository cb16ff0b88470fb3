"""NeMo Curator spellings that curator-dask accepts, and the errors for those it does not.

Code written for NeMo Curator 0.x (``DocumentDataset.read_json``, ``ExactDuplicates(
cache_dir=...)``, ``FuzzyDuplicates(config=FuzzyDuplicatesConfig(...))``,
``identify_duplicates``) and the ``Pipeline(name, stages=[...])`` of NeMo Curator 1.x runs
here. Where curator-dask names a thing differently, the NeMo Curator name still works and
warns (:class:`NeMoCuratorWarning`, shown by default, at the line that used it) with the
curator-dask name; a NeMo Curator parameter that has no counterpart here is a
:class:`NeMoKeywordError` (a ``TypeError``) that says what to write instead. Which
keyword goes where is one table, :mod:`curator_dask.migrate.mapping`, which
``curator-dask migrate`` rewrites scripts with. The migration guide
(``docs/migrating.md``) lists such calls; the test suite runs each of its rows.

Examples
--------
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     config = FuzzyDuplicatesConfig(cache_dir="cache", num_buckets=10, hashes_per_bucket=4)
>>> config.options()["num_bands"], config.options()["minhashes_per_band"]
(10, 4)
>>> "FuzzyDuplicates(" in str(caught[0].message)
True
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from curator_dask.errors import CuratorError, InvalidArgumentError
from curator_dask.migrate.mapping import Ignored, Refused, keyword_rules

__all__ = ["FuzzyDuplicatesConfig", "NeMoCuratorWarning", "NeMoKeywordError", "nemo_keywords",
           "renamed", "warn_nemo"]

logger = logging.getLogger(__name__)


class NeMoCuratorWarning(CuratorError, FutureWarning):
    """NeMo Curator's spelling was used: the code runs, and the message gives curator-dask's.

    A :class:`FutureWarning`, so Python shows it by default wherever the call is (a
    ``DeprecationWarning`` is hidden outside ``__main__``); it points at the line that
    used the NeMo Curator spelling. Silence it with
    ``warnings.filterwarnings("ignore", category=NeMoCuratorWarning)``; turned into an
    error (``-W error``) it is a :class:`~curator_dask.errors.CuratorError` like the
    project's others.
    """


class NeMoKeywordError(CuratorError, TypeError):
    """A NeMo Curator keyword without a counterpart here; the message says what to write."""


def _outside_the_package() -> int:
    """The ``stacklevel`` that points :func:`warnings.warn`, called by the function that
    calls this one, at the first frame outside curator-dask: through decorators,
    constructors calling ``super().__init__`` and generated dataclass methods (their
    globals are the module's), to the caller's own line."""
    frame = sys._getframe(1)  # the function that calls warnings.warn
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] \
            == "curator_dask":
        frame = frame.f_back
        level += 1
    return level


def warn_nemo(message: str) -> None:
    """Warn (:class:`NeMoCuratorWarning`) at the caller's line, outside curator-dask."""
    warnings.warn(message, NeMoCuratorWarning, stacklevel=_outside_the_package())


def renamed(nemo: str, ours: str) -> None:
    """Warn that ``nemo`` is NeMo Curator's spelling of curator-dask's ``ours``, at the
    line of the caller's code that used it."""
    warnings.warn(f"{nemo} is NeMo Curator's spelling; in curator-dask it is {ours}",
                  NeMoCuratorWarning, stacklevel=_outside_the_package())


def _owner(func: Callable, args: tuple) -> str:
    """How a message names the decorated callable: ``JsonlReader``,
    ``ExactDuplicates.remove``, ``get_client``."""
    if "." not in func.__qualname__ or not args:
        return func.__name__
    this = args[0] if isinstance(args[0], type) else type(args[0])
    return this.__name__ if func.__name__ == "__init__" else f"{this.__name__}.{func.__name__}"


def _translate(owner: str, rules: Mapping, kwargs: dict, positional: set[str]) -> dict:
    """``kwargs`` with NeMo Curator's keywords renamed or dropped (warning), or an error;
    ``positional`` names the parameters the call gave positionally."""
    for nemo in [name for name in kwargs if name in rules]:
        rule = rules[nemo]
        if isinstance(rule, Refused):
            raise NeMoKeywordError(f"{owner}: {nemo}= is NeMo Curator's and has no "
                                   f"counterpart in curator-dask; {rule.fix}")
        if isinstance(rule, Ignored):
            if rule.refuse_if is not None and rule.refuse_if(kwargs[nemo]):
                raise NeMoKeywordError(f"{owner}: {nemo}={kwargs[nemo]!r} is NeMo Curator's "
                                       f"and has no counterpart in curator-dask; {rule.refusal}")
            warn_nemo(f"{owner}({nemo}=...) is NeMo Curator's and has no effect in "
                      f"curator-dask: {rule.reason}")
            del kwargs[nemo]
            continue
        if rule.ours in kwargs or rule.ours in positional:
            raise NeMoKeywordError(f"{owner}: give {rule.ours}= only ({nemo}= is NeMo "
                                   "Curator's name for it)")
        value = kwargs.pop(nemo)
        if rule.convert is not None:
            value = rule.convert(value)
            renamed(f"{owner}({nemo}=...)", f"{owner}({rule.ours}={value!r})")
        else:
            renamed(f"{owner}({nemo}=...)", f"{owner}({rule.ours}=...)")
        kwargs[rule.ours] = value
    return kwargs


def nemo_keywords(*, nemo_config: type | None = None) -> Callable:
    """Decorate a function, constructor or method to take NeMo Curator's keyword arguments.

    Its rules come from :data:`curator_dask.migrate.mapping.KEYWORDS` under the
    function's dotted path (``curator_dask.stages.io_stages.JsonlReader.__init__``), the
    table ``curator-dask migrate`` rewrites scripts with; a NeMo keyword is passed on
    under curator-dask's name (:class:`~curator_dask.migrate.rules.Renamed`), dropped
    (:class:`~curator_dask.migrate.rules.Ignored`), both with a
    :class:`NeMoCuratorWarning` at the caller's line, or refused with a
    :class:`NeMoKeywordError` saying what to write
    (:class:`~curator_dask.migrate.rules.Refused`).

    The table is the only place a keyword rule lives, so the codemod rewrites a script
    the way the callable reads it; a ``Renamed`` rule's ``convert`` also converts the
    value (``autocast=False`` -> ``dtype="float32"``).

    Parameters
    ----------
    nemo_config : type, optional
        NeMo Curator's configuration class (one with an ``options()`` method giving
        curator-dask's keywords), taken as ``config=`` or as the first positional
        argument after ``self``: its options are passed on as keywords, under those
        given beside it.

    The decorated function keeps its signature (``inspect.signature`` follows
    ``__wrapped__``), so the CLI and the documentation show curator-dask's parameters.
    """
    def decorate(func: Callable) -> Callable:
        rules = dict(keyword_rules(f"{func.__module__}.{func.__qualname__}"))
        if not rules and nemo_config is None:
            raise InvalidArgumentError(f"{func.__module__}.{func.__qualname__} has no NeMo Curator "
                             "keywords in curator_dask.migrate.mapping.KEYWORDS")
        positional = [p.name for p in inspect.signature(func).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if nemo_config is not None:
                if len(args) > 1 and isinstance(args[1], nemo_config):  # Cls(config)
                    kwargs["config"], args = args[1], args[:1] + args[2:]
                if isinstance(kwargs.get("config"), nemo_config):
                    kwargs = {**kwargs.pop("config").options(), **kwargs}
            if not rules.keys().isdisjoint(kwargs):
                kwargs = _translate(_owner(func, args), rules, kwargs,
                                    set(positional[:len(args)]))
            return func(*args, **kwargs)

        return wrapper

    return decorate


#: NeMo Curator's names of FuzzyDuplicates' parameters -> curator-dask's.
_FUZZY_NAMES = {"num_buckets": "num_bands", "hashes_per_bucket": "minhashes_per_band",
                "buckets_per_shuffle": "bands_per_iteration"}
#: Knobs of NeMo Curator's false-positive check (anchor documents per bucket, shuffle
#: sizes); curator-dask's check scores each candidate pair directly and needs none.
_FUZZY_UNUSED = ("num_anchors", "bucket_mapping_blocksize", "parts_per_worker",
                 "bucket_parts_per_worker")


@dataclass
class FuzzyDuplicatesConfig:
    """NeMo Curator 0.x's configuration of ``FuzzyDuplicates``, under its names.

    ``FuzzyDuplicates(config=FuzzyDuplicatesConfig(...))`` runs as NeMo Curator code
    wrote it, with a ``DeprecationWarning`` giving curator-dask's spelling:
    ``FuzzyDuplicates(seed=, char_ngrams=, num_bands=, minhashes_per_band=,
    bands_per_iteration=, ...)``. :meth:`options` maps the fields (``num_buckets`` ->
    ``num_bands``, ``hashes_per_bucket`` -> ``minhashes_per_band``,
    ``buckets_per_shuffle`` -> ``bands_per_iteration``); fields left at None take
    curator-dask's defaults.

    ``cache_dir`` is accepted and not used: ``FuzzyDuplicates`` keeps its intermediate
    results in cluster memory (``FuzzyDeduplicationWorkflow(cache_path=...)`` keeps them
    on disk). ``profile_dir`` is an error (use ``distributed.performance_report``); the
    tuning knobs of NeMo Curator's false-positive check (``num_anchors``, ...) have no
    use here and are ignored with a warning.
    """

    cache_dir: str | None = None
    profile_dir: str | None = None
    id_field: str = "id"
    text_field: str = "text"
    perform_removal: bool = False
    seed: int = 42
    char_ngrams: int = 24
    num_buckets: int = 20
    hashes_per_bucket: int = 13
    use_64_bit_hash: bool = False
    buckets_per_shuffle: int | None = None
    false_positive_check: bool = False
    num_anchors: int | None = None
    jaccard_threshold: float | None = None
    bucket_mapping_blocksize: int | None = None
    parts_per_worker: int | None = None
    bucket_parts_per_worker: int | None = None

    def __post_init__(self):
        if self.profile_dir is not None:
            raise NeMoKeywordError("FuzzyDuplicatesConfig: profile_dir= is NeMo Curator's and "
                                   "has no counterpart in curator-dask; profile with "
                                   "distributed.performance_report(filename=...)")
        renamed("FuzzyDuplicates(config=FuzzyDuplicatesConfig(...))",
                "FuzzyDuplicates(seed=..., char_ngrams=..., num_bands=..., "
                "minhashes_per_band=..., bands_per_iteration=..., ...)")
        unused = [name for name in _FUZZY_UNUSED if getattr(self, name) is not None]
        if unused:
            warn_nemo(f"FuzzyDuplicatesConfig: {', '.join(unused)} tune NeMo Curator's "
                      "false-positive check and are not used here: curator-dask scores "
                      "each candidate pair directly")
        self.num_hashes = self.num_buckets * self.hashes_per_bucket

    def options(self) -> dict:
        """The keyword arguments of curator-dask's ``FuzzyDuplicates``."""
        out = {"seed": self.seed, "char_ngrams": self.char_ngrams,
               "use_64_bit_hash": self.use_64_bit_hash,
               "false_positive_check": self.false_positive_check,
               "id_field": self.id_field, "text_field": self.text_field,
               "perform_removal": self.perform_removal}
        for nemo, ours in _FUZZY_NAMES.items():
            if getattr(self, nemo) is not None:
                out[ours] = getattr(self, nemo)
        if self.jaccard_threshold is not None:
            out["jaccard_threshold"] = self.jaccard_threshold
        return out
