"""Compile, or load from the kernel cache, the numba kernels a curation job uses, ahead of need.

The kernels compile into one cache a machine shares (:mod:`curator_dask.numba_cache`);
this module runs the stages that use them once, on a tiny input of the types the stages
pass, so the signatures cached are the ones a run will ask for. It sits above the stages
and dedup it warms up, which know nothing of it. ``curator-dask demo`` runs
:func:`precompile_in_background` while its cluster starts; an image build can run
``python -m curator_dask.precompile`` (the project's ``make demo`` and ``make test`` do,
right after installing, so a fresh install's first run loads every kernel it uses).
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pandas as pd

from curator_dask.dedup.fuzzy.components import union_find_components
from curator_dask.dedup.fuzzy.minhash import MinHash
from curator_dask.numba_cache import cache_dir
from curator_dask.stages.filters import heuristic, repetition

__all__ = ["precompile", "precompile_in_background"]

logger = logging.getLogger(__name__)


def precompile() -> float:
    """Compile, or load from the cache, the kernels a curation job uses; returns seconds.

    Runs each kernel once on a tiny input of the types the stages pass, so the
    signatures cached are the ones the stages will ask for.
    """
    start = time.perf_counter()
    texts = pd.Series(["one two three one two\nhttp://a.b 12 ...", ""], dtype="str")
    filters = [repetition.RepeatingTopNGramsFilter(n=2),
               repetition.RepeatingDuplicateNGramsFilter(n=5)]
    for name in dir(heuristic):
        cls = getattr(heuristic, name)
        if (isinstance(cls, type) and cls.__module__ == heuristic.__name__
                and hasattr(cls, "score") and not name.startswith("_")):
            try:
                filters.append(cls())
            except TypeError:  # needs arguments: not a default filter
                continue
    for document_filter in filters:
        try:
            document_filter.score(texts)
        except Exception:  # warming up is best effort, never an error
            logger.debug("precompile: %s", type(document_filter).__name__, exc_info=True)
    try:
        MinHash(char_ngrams=5, num_hashes=4).signatures(texts)
        MinHash(char_ngrams=24, num_hashes=4, use_64_bit_hash=True).signatures(texts)
    except Exception:
        logger.debug("precompile: minhash", exc_info=True)
    try:  # fuzzy dedup's connected components on one worker
        ends = [np.array([1, 2], np.int64), np.array([2, 3], np.int64)]
        for array in ends:  # as a run passes them: read-only views of Arrow buffers
            array.flags.writeable = False
        union_find_components(*ends)
    except Exception:
        logger.debug("precompile: components", exc_info=True)
    seconds = time.perf_counter() - start
    logger.info("kernels compiled or loaded from %s in %.1f s", cache_dir(), seconds)
    return seconds


def precompile_in_background() -> threading.Thread:
    """:func:`precompile` in a daemon thread (started); join it to wait."""
    thread = threading.Thread(target=precompile, name="curator-dask-precompile", daemon=True)
    thread.start()
    return thread


def main() -> None:
    """``python -m curator_dask.precompile``: fill the kernel cache (an install step)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    precompile()


if __name__ == "__main__":
    main()
