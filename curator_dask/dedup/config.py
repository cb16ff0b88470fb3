"""One parameter set per dedup algorithm, shared by every entry point that runs it.

Exact, fuzzy and semantic dedup each run three ways: the algorithm on a dataset in
memory (:class:`~curator_dask.dedup.ExactDuplicates`,
:class:`~curator_dask.dedup.FuzzyDuplicates`, :class:`~curator_dask.dedup.SemanticDuplicates`),
the resumable workflow on files (``ExactDeduplicationWorkflow``,
``FuzzyDeduplicationWorkflow``, ``SemanticDeduplicationWorkflow``, ``curator-dask dedup``)
and the pipeline barrier (:class:`~curator_dask.dedup.stages.ExactDedup`,
:class:`~curator_dask.dedup.stages.FuzzyDedup`, :class:`~curator_dask.dedup.stages.SemanticDedup`).
The parameters are declared once, as the fields of a config (:class:`ExactDedupConfig`,
:class:`FuzzyDedupConfig`, :class:`SemanticDedupConfig`), and checked once, when it is
made. Each entry point takes ``config=`` beside only what differs between them (paths,
what to do with the output, a stage's name); :func:`takes_config` lets it take each field
as a keyword too, as before, and shows the fields in its signature (``help()``, ``curator-dask
dedup ... --help``, the type checks of pipeline files). Build a config once and hand it to
all three.

Examples
--------
>>> from curator_dask.dedup import ExactDedupConfig, ExactDuplicates
>>> from curator_dask.dedup.stages import ExactDedup
>>> config = ExactDedupConfig(hash_method="md5", on_null="skip")
>>> ExactDuplicates(config=config).config == ExactDedup(config=config).dedup.config == config
True
>>> ExactDuplicates(on_null="skip").config == config
True
>>> ExactDedupConfig(on_null="ignore")
Traceback (most recent call last):
...
curator_dask.errors.InvalidArgumentError: on_null must be one of ('error', 'skip'), got 'ignore'
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Literal, get_args

from curator_dask.dedup.removal import DEFAULT_BROADCAST_THRESHOLD, STRATEGIES, RemovalStrategy
from curator_dask.errors import ArgumentTypeError, InvalidArgumentError

__all__ = [
    "HASH_METHODS",
    "ON_NULL",
    "SIM_METRICS",
    "WHICH_TO_KEEP",
    "Configured",
    "ExactDedupConfig",
    "FuzzyDedupConfig",
    "HashMethod",
    "OnNull",
    "SemanticDedupConfig",
    "SimMetric",
    "WhichToKeep",
    "field_names",
    "resolve_config",
    "takes_config",
]

HashMethod = Literal["md5", "xxh3_128"]
HASH_METHODS = get_args(HashMethod)
OnNull = Literal["error", "skip"]
ON_NULL = get_args(OnNull)
WhichToKeep = Literal["hard", "easy", "random"]
WHICH_TO_KEEP = get_args(WhichToKeep)
SimMetric = Literal["cosine", "l2"]
SIM_METRICS = get_args(SimMetric)


def _check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise InvalidArgumentError(f"{name} must be one of {choices}, got {value!r}")


def _check_count(name: str, value, *, minimum: int = 1, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise InvalidArgumentError(f"{name} must be {what}, got {value!r}")


@dataclass(frozen=True)
class ExactDedupConfig:
    """The parameters of exact deduplication (see
    :class:`~curator_dask.dedup.ExactDuplicates` for each)."""

    id_field: str = "id"
    text_field: str = "text"
    hash_method: HashMethod = "md5"
    on_null: OnNull = "error"
    removal_strategy: RemovalStrategy = "auto"
    broadcast_threshold: int = DEFAULT_BROADCAST_THRESHOLD
    hash_partitions: int | None = None

    def __post_init__(self):
        _check_choice("hash_method", self.hash_method, HASH_METHODS)
        _check_choice("on_null", self.on_null, ON_NULL)
        _check_choice("removal_strategy", self.removal_strategy, STRATEGIES)
        _check_count("broadcast_threshold", self.broadcast_threshold, minimum=0)
        _check_count("hash_partitions", self.hash_partitions, optional=True)

    def decisive(self) -> dict:
        """The parameters that decide which documents are kept (not how fast): what
        caches and resumed outputs are fingerprinted with."""
        return {"id_field": self.id_field, "text_field": self.text_field,
                "hash_method": self.hash_method, "on_null": self.on_null}


@dataclass(frozen=True)
class FuzzyDedupConfig:
    """The parameters of fuzzy deduplication (see
    :class:`~curator_dask.dedup.FuzzyDuplicates` for each). NeMo Curator calls its
    counterpart ``FuzzyDuplicatesConfig`` (with ``num_buckets`` for ``num_bands`` and
    ``hashes_per_bucket`` for ``minhashes_per_band``)."""

    seed: int = 42
    char_ngrams: int = 24
    num_bands: int = 20
    minhashes_per_band: int = 13
    bands_per_iteration: int | None = None
    use_64_bit_hash: bool = False
    false_positive_check: bool = False
    jaccard_threshold: float = 0.8
    id_field: str = "id"
    text_field: str = "text"
    max_local_edges: int | None = None
    removal_strategy: RemovalStrategy = "auto"
    broadcast_threshold: int = DEFAULT_BROADCAST_THRESHOLD
    #: Where MinHash computes on pandas partitions: ``"cpu"``, ``"auto"``, ``"cuda"`` or
    #: ``"cuda:N"`` (see :class:`~curator_dask.dedup.fuzzy.MinHash`); not part of any
    #: cache's fingerprint, as every device computes the same signatures.
    device: str = "cpu"

    def __post_init__(self):
        # MinHash and LSH check their own parameters when FuzzyDuplicates makes them.
        if not 0.0 <= self.jaccard_threshold <= 1.0:
            raise InvalidArgumentError(
                f"jaccard_threshold must be in [0, 1], got {self.jaccard_threshold!r}")
        _check_choice("removal_strategy", self.removal_strategy, STRATEGIES)
        _check_count("broadcast_threshold", self.broadcast_threshold, minimum=0)
        _check_count("max_local_edges", self.max_local_edges, minimum=0, optional=True)


@dataclass(frozen=True)
class SemanticDedupConfig:
    """The parameters of semantic deduplication (see
    :class:`~curator_dask.dedup.SemanticDuplicates` for each; names and defaults follow
    NeMo Curator's ``SemDedupConfig``). ``eps_thresholds`` is kept sorted from the largest
    down, each value once.

    Examples
    --------
    >>> SemanticDedupConfig(eps_thresholds=[0.001, 0.01, 0.01]).eps_thresholds
    (0.01, 0.001)
    >>> SemanticDedupConfig(eps_thresholds=[0.1], eps_to_extract=0.01)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curator_dask.errors.InvalidArgumentError: eps_to_extract=0.01 must be one of ... (0.1,)
    """

    n_clusters: int = 1000
    max_iter: int = 100
    tol: float = 1e-4
    random_state: int = 1234
    which_to_keep: WhichToKeep = "hard"
    sim_metric: SimMetric = "cosine"
    eps_thresholds: Sequence[float] = (0.01, 0.001)
    eps_to_extract: float = 0.01
    pairwise_batch_size: int = 1024
    embedding_column: str = "embeddings"
    embedding_model_name_or_path: str | None = None
    embedding_batch_size: int = 128
    embedding_max_chars: int | None = 6000
    id_field: str = "id"
    text_field: str = "text"
    #: ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (checked where the kernels are
    #: chosen, :func:`~curator_dask.dedup.semantic.kernels.check_device`, which also takes
    #: an ``ArrayOps``).
    device: str = "auto"
    removal_strategy: RemovalStrategy = "auto"
    broadcast_threshold: int = DEFAULT_BROADCAST_THRESHOLD

    def __post_init__(self):
        for name in ("n_clusters", "max_iter", "pairwise_batch_size", "embedding_batch_size"):
            _check_count(name, getattr(self, name))
        _check_choice("which_to_keep", self.which_to_keep, WHICH_TO_KEEP)
        _check_choice("sim_metric", self.sim_metric, SIM_METRICS)
        _check_choice("removal_strategy", self.removal_strategy, STRATEGIES)
        _check_count("broadcast_threshold", self.broadcast_threshold, minimum=0)
        eps = self.eps_thresholds
        eps = [eps] if isinstance(eps, int | float) else eps
        eps = tuple(sorted({float(e) for e in eps}, reverse=True))
        if not eps or not all(0 <= e < 2 for e in eps):
            raise InvalidArgumentError(f"eps_thresholds must be values in [0, 2), got {eps}")
        if float(self.eps_to_extract) not in eps:
            raise InvalidArgumentError(f"eps_to_extract={self.eps_to_extract} must be one of "
                                       f"eps_thresholds {eps}")
        # Frozen: the normalised values are set the way dataclasses set fields.
        object.__setattr__(self, "eps_thresholds", eps)
        object.__setattr__(self, "eps_to_extract", float(self.eps_to_extract))
        object.__setattr__(self, "tol", float(self.tol))
        object.__setattr__(self, "random_state", int(self.random_state))


def field_names(config_cls) -> tuple[str, ...]:
    """The fields of a config class, in order.

    >>> field_names(ExactDedupConfig)[:3]
    ('id_field', 'text_field', 'hash_method')
    """
    return tuple(f.name for f in fields(config_cls))


def _same(value, default) -> bool:
    """Whether a keyword equals its default (a list given for a tuple default counts)."""
    if isinstance(value, list | tuple) and isinstance(default, list | tuple):
        return tuple(value) == tuple(default)
    return value == default


def resolve_config(cls, config, given: Mapping[str, object], *, who: str):
    """The config an entry point runs with: ``config`` (a ``cls`` or a mapping of its
    fields), or ``cls(**given)`` from the entry point's keyword parameters.

    Giving both a config and keyword parameters that differ from their defaults is
    an error naming them (one would silently override the other).
    """
    if config is None:
        return cls(**given)
    if isinstance(config, Mapping):
        unknown = sorted(set(config) - {f.name for f in fields(cls)})
        if unknown:
            raise InvalidArgumentError(f"{who}: unknown {cls.__name__} fields {unknown}")
        config = cls(**config)
    if not isinstance(config, cls):
        raise ArgumentTypeError(f"{who}: config must be a {cls.__name__} (or a mapping of its "
                                f"fields), got {type(config).__name__}")
    defaults = {f.name: f.default for f in fields(cls)}
    changed = [f"{k}={given[k]!r}" for k in sorted(given)
               if k in defaults and not _same(given[k], defaults[k])]
    if changed:
        raise InvalidArgumentError(
            f"{who}: give the parameters either in config= or as keywords, not both "
            f"(config given, and {', '.join(changed)} too); put them in the config"
        )
    return config


def takes_config(config_cls: type, *, positional: Sequence[str] = ()) -> Callable:
    """Decorate an entry point's ``__init__(self, ..., config)`` to take the algorithm's
    parameters as ``config=`` or as keywords, and always receive one ``config_cls``.

    The constructor declares only what is its own (paths, output, a stage's name) and
    ``config``. The signature it shows (:func:`inspect.signature`, ``help()``, the CLI's
    options, the type checks of pipeline files) adds every field of ``config_cls`` as a
    keyword, with its type and default, so nothing is restated. ``positional`` names the
    parameters, fields or its own, that may also be given by position, in that order.
    A config and keywords that differ from their defaults together are an error
    (:func:`resolve_config`).

    Examples
    --------
    >>> @dataclass(frozen=True)
    ... class Knobs:
    ...     width: int = 5
    >>> class Tool:
    ...     @takes_config(Knobs)
    ...     def __init__(self, path: str, *, config: Knobs | None = None):
    ...         self.path, self.config = path, config
    >>> list(inspect.signature(Tool).parameters)
    ['path', 'width', 'config']
    >>> Tool("a", width=7).config, Tool("a", config=Knobs(3)).config
    (Knobs(width=7), Knobs(width=3))
    """
    hints = typing.get_type_hints(config_cls)
    field_parameters = {
        f.name: inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                  default=f.default if f.default is not MISSING else
                                  inspect.Parameter.empty, annotation=hints[f.name])
        for f in fields(config_cls)}

    def decorate(init: Callable) -> Callable:
        own = list(inspect.signature(init).parameters.values())
        own_names = {p.name for p in own}
        if "config" not in own_names:
            raise ArgumentTypeError(f"{init.__qualname__} needs a config parameter")
        unknown = [name for name in positional
                   if name not in field_parameters and name not in own_names]
        if unknown:
            raise ArgumentTypeError(f"{init.__qualname__}: no parameter {unknown}")
        by_name = {p.name: p for p in own} | field_parameters
        leading = [by_name[name].replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
                   for name in positional]
        rest_own = [p for p in own[1:] if p.name not in positional and p.name != "config"]
        public = inspect.Signature(
            [own[0], *leading,
             *[p for p in rest_own if p.kind is not inspect.Parameter.KEYWORD_ONLY],
             *[p for p in rest_own if p.kind is inspect.Parameter.KEYWORD_ONLY],
             *[p for name, p in field_parameters.items() if name not in positional],
             by_name["config"].replace(kind=inspect.Parameter.KEYWORD_ONLY)])

        @functools.wraps(init)
        def wrapper(self, *args, **kwargs):
            try:
                bound = public.bind(self, *args, **kwargs)
            except TypeError as err:
                raise ArgumentTypeError(f"{type(self).__name__}: {err}") from None
            arguments = dict(bound.arguments)
            arguments.pop(own[0].name)
            given = {name: arguments.pop(name) for name in list(arguments)
                     if name in field_parameters}
            arguments["config"] = resolve_config(config_cls, arguments.get("config"), given,
                                                 who=type(self).__name__)
            return init(self, **arguments)

        wrapper.__signature__ = public
        return wrapper

    return decorate


class Configured:
    """What an entry point of an algorithm keeps of its parameters: ``self.config``,
    whose fields read as its attributes too (``dedup.seed`` is ``dedup.config.seed``).
    The config is the one place they live; nothing copies them."""

    config: object

    def __getattr__(self, name: str):
        # Called only for attributes not found otherwise; read the instance's own dict so
        # that a half-built or unpickling object never recurses here.
        config = self.__dict__.get("config")
        if config is not None and name in {f.name for f in fields(config)}:
            return getattr(config, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
