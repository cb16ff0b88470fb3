"""NeMo Curator spellings that curator-dask accepts, and the errors for those it does not.

Code written for NeMo Curator 0.x (``DocumentDataset.read_json``, ``ExactDuplicates(
cache_dir=...)``, ``FuzzyDuplicates(config=FuzzyDuplicatesConfig(...))``,
``identify_duplicates``) and the ``Pipeline(name, stages=[...])`` of NeMo Curator 1.x runs
here. Where curator-dask names a thing differently, the NeMo Curator name still works and
warns (``DeprecationWarning``) with the curator-dask name; a NeMo Curator parameter that
has no counterpart here is a ``TypeError`` that says what to write instead. The table in
the migration guide (``docs/migrating.md``) lists every such call; the test suite runs
each of its rows.

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
import logging
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["FuzzyDuplicatesConfig", "nemo_keywords", "renamed"]

logger = logging.getLogger(__name__)


def renamed(nemo: str, ours: str, *, stacklevel: int = 3) -> None:
    """Warn that ``nemo`` is NeMo Curator's spelling of curator-dask's ``ours``."""
    warnings.warn(f"{nemo} is NeMo Curator's spelling; in curator-dask it is {ours}",
                  DeprecationWarning, stacklevel=stacklevel)


def nemo_keywords(*, renamed_keywords: Mapping[str, str | tuple[str, Callable]] | None = None,
                  unsupported: Mapping[str, str] | None = None,
                  unneeded: Mapping[str, str] | None = None) -> Callable:
    """Decorate a constructor (or method) to take NeMo Curator's keyword arguments.

    Parameters
    ----------
    renamed_keywords : mapping
        NeMo Curator's name -> curator-dask's: passed on under our name, with a
        ``DeprecationWarning``. A ``(name, convert)`` pair also converts the value
        (``autocast=False`` -> ``dtype="float32"``).
    unsupported : mapping
        NeMo Curator's name -> what to write instead: a ``TypeError`` saying so.
    unneeded : mapping
        NeMo Curator's name -> why curator-dask needs no such setting: the value is
        ignored, with a ``DeprecationWarning`` saying why.

    The decorated function keeps its signature (``inspect.signature`` follows
    ``__wrapped__``), so the CLI and the documentation show curator-dask's parameters.
    """
    renamed_keywords = dict(renamed_keywords or {})
    unsupported = dict(unsupported or {})
    unneeded = dict(unneeded or {})

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            owner = type(self).__name__ if func.__name__ == "__init__" else \
                f"{type(self).__name__}.{func.__name__}"
            for name, fix in unsupported.items():
                if name in kwargs:
                    raise TypeError(f"{owner}: {name}= is NeMo Curator's and has no "
                                    f"counterpart in curator-dask; {fix}")
            for nemo, ours in renamed_keywords.items():
                ours, convert = ours if isinstance(ours, tuple) else (ours, None)
                if nemo in kwargs:
                    if ours in kwargs:
                        raise TypeError(f"{owner}: give {ours}= only ({nemo}= is NeMo "
                                        "Curator's name for it)")
                    value = kwargs.pop(nemo)
                    value = convert(value) if convert is not None else value
                    renamed(f"{owner}({nemo}=...)", f"{owner}({ours}={value!r})")
                    kwargs[ours] = value
            for nemo, why in unneeded.items():
                if nemo in kwargs:
                    kwargs.pop(nemo)
                    warnings.warn(f"{owner}: {nemo}= is NeMo Curator's and is ignored: {why}",
                                  DeprecationWarning, stacklevel=2)
            return func(self, *args, **kwargs)

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
            raise TypeError("FuzzyDuplicatesConfig: profile_dir= is NeMo Curator's and has no "
                            "counterpart in curator-dask; profile with "
                            "distributed.performance_report(filename=...)")
        renamed("FuzzyDuplicates(config=FuzzyDuplicatesConfig(...))",
                "FuzzyDuplicates(seed=..., char_ngrams=..., num_bands=..., "
                "minhashes_per_band=..., bands_per_iteration=..., ...)")
        unused = [name for name in _FUZZY_UNUSED if getattr(self, name) is not None]
        if unused:
            warnings.warn(f"FuzzyDuplicatesConfig: {', '.join(unused)} tune NeMo Curator's "
                          "false-positive check and are not used here: curator-dask scores "
                          "each candidate pair directly", UserWarning, stacklevel=3)
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
