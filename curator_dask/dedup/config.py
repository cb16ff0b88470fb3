"""One parameter set per dedup algorithm, shared by every entry point that runs it.

Exact and fuzzy dedup each run three ways: the algorithm on a dataset in memory
(:class:`~curator_dask.dedup.ExactDuplicates`, :class:`~curator_dask.dedup.FuzzyDuplicates`),
the resumable workflow on files (``ExactDeduplicationWorkflow``,
``FuzzyDeduplicationWorkflow``, ``curator-dask dedup``) and the pipeline barrier
(:class:`~curator_dask.dedup.stages.ExactDedup`, :class:`~curator_dask.dedup.stages.FuzzyDedup`).
Each takes its parameters as keywords, as before, or as one config object
(``config=``), which is checked once here: build it once and hand it to all three.

Examples
--------
>>> from curator_dask.dedup import ExactDedupConfig, ExactDuplicates
>>> from curator_dask.dedup.stages import ExactDedup
>>> config = ExactDedupConfig(hash_method="md5", on_null="skip")
>>> ExactDuplicates(config=config).config == ExactDedup(config=config).dedup.config == config
True
>>> ExactDedupConfig(on_null="ignore")
Traceback (most recent call last):
...
ValueError: on_null must be one of ('error', 'skip'), got 'ignore'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Literal, get_args

from curator_dask.dedup.removal import DEFAULT_BROADCAST_THRESHOLD, STRATEGIES, RemovalStrategy

__all__ = ["ExactDedupConfig", "FuzzyDedupConfig", "resolve_config", "HASH_METHODS",
           "ON_NULL", "HashMethod", "OnNull", "DEFAULT_MAX_LOCAL_EDGES"]

HashMethod = Literal["md5", "xxh3_128"]
HASH_METHODS = get_args(HashMethod)
OnNull = Literal["error", "skip"]
ON_NULL = get_args(OnNull)
#: Up to this many edges, connected components are computed on one worker with
#: union-find (:func:`~curator_dask.dedup.fuzzy.connected_components`).
DEFAULT_MAX_LOCAL_EDGES = 50_000_000


def _check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def _check_count(name: str, value, *, minimum: int = 1, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {what}, got {value!r}")


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
    bands_per_iteration: int = 5
    use_64_bit_hash: bool = False
    false_positive_check: bool = False
    jaccard_threshold: float = 0.8
    id_field: str = "id"
    text_field: str = "text"
    max_local_edges: int = DEFAULT_MAX_LOCAL_EDGES
    removal_strategy: RemovalStrategy = "auto"
    broadcast_threshold: int = DEFAULT_BROADCAST_THRESHOLD

    def __post_init__(self):
        # MinHash and LSH check their own parameters when FuzzyDuplicates makes them.
        if not 0.0 <= self.jaccard_threshold <= 1.0:
            raise ValueError(f"jaccard_threshold must be in [0, 1], got {self.jaccard_threshold!r}")
        _check_choice("removal_strategy", self.removal_strategy, STRATEGIES)
        _check_count("broadcast_threshold", self.broadcast_threshold, minimum=0)


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
            raise ValueError(f"{who}: unknown {cls.__name__} fields {unknown}")
        config = cls(**config)
    if not isinstance(config, cls):
        raise TypeError(f"{who}: config must be a {cls.__name__} (or a mapping of its "
                        f"fields), got {type(config).__name__}")
    defaults = asdict(cls())
    changed = sorted(k for k, v in given.items() if k in defaults and v != defaults[k])
    if changed:
        raise ValueError(
            f"{who}: give the parameters either in config= or as keywords, not both "
            f"(config given, and {', '.join(changed)} too); put them in the config"
        )
    return config
