"""A global shuffle of a dataset on the cluster: a seeded random key per document, key
ranges to partitions, each partition sorted by key.

Every document gets a 64-bit key from its id (``id_field``, a bijective mix of the id
and the seed, so distinct ids give distinct keys) or, without an id, from its text (a
seeded SipHash). Output partition ``p`` of ``n`` takes the keys in the ``p``-th of ``n``
equal ranges; Dask's shuffle moves each document there (peer to peer through disk on a
distributed cluster, so a worker holds about one partition at a time, never the dataset),
and each partition is sorted by key. Read in order, the partitions give every document
once, in the order of its key: a uniformly random order fixed by the seed.

- The order depends on the seed and the documents alone, not on the cluster or the input
  partitions: the same data and seed give the same order on any cluster.
- Keys from the text are equal for equal texts: such documents come next to each other,
  in no set order among themselves. Give the dataset ids (``AddId``) for an order fixed
  to the last document, or deduplicate first.
- ``npartitions`` sets how many output partitions (default: as many as the input); the
  keys being uniform, they hold about the same number of documents each.
"""

from __future__ import annotations

import logging

import numpy as np

from curator_dask.bounds import PositiveInt
from curator_dask.compat import nemo_keywords
from curator_dask.dataset import DocumentDataset
from curator_dask.errors import CuratorError
from curator_dask.stages.base import WholeDatasetStage
from curator_dask.training.blend import blend_keys

__all__ = ["Shuffle", "ShuffleError", "shuffle_dataset", "shuffle_keys"]

logger = logging.getLogger(__name__)

_KEY = "_curator_shuffle_key"


class ShuffleError(CuratorError, ValueError):
    """A shuffle asked with a seed or a number of partitions it cannot use."""


def _check(seed, npartitions) -> None:
    """Refuse, before anything runs, what would fail on a worker."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ShuffleError(f"shuffle: seed must be an integer, got {seed!r}; the order is "
                           "fixed by the seed, so give one (NeMo Curator's seed=None, a new "
                           "order every run, has no counterpart)")
    if npartitions is not None and (isinstance(npartitions, bool)
                                    or not isinstance(npartitions, int) or npartitions < 1):
        raise ShuffleError(f"shuffle: npartitions must be a positive integer, got "
                           f"{npartitions!r}")
_MASK64 = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def _mix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a bijection of uint64 that spreads every input bit."""
    z = values.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def shuffle_keys(df, seed: int, id_field: str | None, text_field: str) -> np.ndarray:
    """Each document's shuffle key (int64, 0 to 2**63 - 1).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"id": [0, 1, 2], "text": ["a", "b", "c"]})
    >>> keys = shuffle_keys(df, seed=1, id_field="id", text_field="text")
    >>> len(set(keys.tolist())), bool((keys >= 0).all())
    (3, True)
    """
    if id_field is not None and id_field in df.columns:
        ids = df[id_field].to_numpy(dtype=np.int64).view(np.uint64)
        with np.errstate(over="ignore"):
            salted = ids + _mix64(np.array([seed], dtype=np.uint64))[0]
        keys = _mix64(salted)
    else:
        keys = blend_keys(df[text_field], seed, source=0)
    return (keys >> np.uint64(1)).astype(np.int64)


def _with_keys(df, seed: int, id_field: str | None, text_field: str):
    return df.assign(**{_KEY: shuffle_keys(df, seed, id_field, text_field)})


def shuffle_dataset(ds: DocumentDataset, seed: int = 0, *, id_field: str | None = "id",
                    text_field: str = "text", npartitions: int | None = None) -> DocumentDataset:
    """``ds`` in a random order fixed by ``seed``, shuffled on the cluster (see
    :mod:`curator_dask.training.shuffle`); lazy.

    Examples
    --------
    >>> import pandas as pd
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"id": range(6), "text": list("abcdef")}),
    ...                                  npartitions=2)
    >>> once = shuffle_dataset(ds, seed=3).df.compute()["id"].tolist()
    >>> again = shuffle_dataset(ds, seed=3).df.compute()["id"].tolist()
    >>> sorted(once) == list(range(6)), once == again
    (True, True)
    """
    _check(seed, npartitions)
    n = npartitions or ds.npartitions
    if id_field is not None and id_field not in ds.df.columns:
        logger.info("shuffle: no %r column, keying documents by their text", id_field)
        id_field = None
    meta = ds.df._meta.assign(**{_KEY: np.array([], dtype=np.int64)})
    keyed = ds.df.map_partitions(_with_keys, seed, id_field, text_field, meta=meta,
                                 enforce_metadata=False)
    # Equal key ranges: the keys are uniform, so no pass over the data is needed to find
    # the divisions, and a partition's range does not depend on the data's layout.
    step = (2**63 - 1) // n
    divisions = [i * step for i in range(n)] + [2**63 - 1]
    shuffled = keyed.set_index(_KEY, divisions=divisions, sorted=False)
    return DocumentDataset(shuffled.reset_index(drop=True), sources=ds.sources)


class Shuffle(WholeDatasetStage):
    """Shuffle the whole dataset in a random order fixed by ``seed`` (a pipeline barrier).

    Parameters
    ----------
    seed : int, default 0
    id_field : str, default "id"
        The documents' ids, from which the keys are made (distinct ids: distinct keys);
        without such a column the keys are made from the text.
    text_field : str, default "text"
    npartitions : int, optional
        Output partitions (default: as many as the input).

    Examples
    --------
    >>> Shuffle(seed=42)
    <Shuffle 'shuffle' (whole dataset)>
    """

    name = "shuffle"

    @nemo_keywords()
    def __init__(self, seed: int = 0, *, id_field: str | None = "id", text_field: str = "text",
                 npartitions: PositiveInt | None = None):
        _check(seed, npartitions)
        self.seed, self.id_field, self.text_field = seed, id_field, text_field
        self.npartitions = npartitions

    def run(self, ds: DocumentDataset, cache_path: str) -> DocumentDataset:
        return shuffle_dataset(ds, self.seed, id_field=self.id_field,
                               text_field=self.text_field, npartitions=self.npartitions)
