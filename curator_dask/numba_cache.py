"""Compiled kernels without a compile on the critical path: one on-disk cache per user.

The filters, MinHash, connected components and decontamination run numba kernels. A
kernel compiles the first time a process calls it (seconds each), so without a cache
every worker of every run would compile them again: on a two-worker demo the word
splitter alone took 9 s of 48. Every kernel is compiled with ``cache=True`` into one
directory that all processes of a machine share, so a kernel compiles once per machine
and version, and later processes load it in milliseconds:

- ``NUMBA_CACHE_DIR`` if the user has set it (numba's own setting, honoured as is);
- otherwise ``curator-dask/numba`` in the user's cache directory
  (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
  ``%LOCALAPPDATA%`` on Windows).

Either works from a read-only installation, where numba's default (a ``__pycache__``
beside the source) cannot be written. The choice is exported as ``NUMBA_CACHE_DIR``
before numba compiles anything, so worker processes started from this one (a
``LocalCluster``) share it.

:func:`precompile` compiles (or loads) the kernels ahead of need; ``curator-dask demo``
runs it in a background thread while its cluster starts, so not even a first run on a
fresh machine compiles on a worker.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "default_cache_dir", "configure", "njit", "precompile",
           "precompile_in_background"]

logger = logging.getLogger(__name__)

#: numba's environment variable for its cache directory.
CACHE_ENV = "NUMBA_CACHE_DIR"


def default_cache_dir() -> Path:
    """``curator-dask/numba`` in this user's cache directory (see the module docstring)."""
    try:
        import platformdirs
    except ImportError:
        platformdirs = None
    if platformdirs is not None:
        base = Path(platformdirs.user_cache_dir("curator-dask", appauthor=False))
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches" / "curator-dask"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
        base = base / "curator-dask"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "curator-dask"
    return base / "numba"


def cache_dir() -> Path:
    """The directory compiled kernels go to: ``NUMBA_CACHE_DIR`` or :func:`default_cache_dir`."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else default_cache_dir()


def configure() -> Path:
    """Point numba's cache at :func:`cache_dir`, unless the user chose one; returns it.

    Sets ``NUMBA_CACHE_DIR`` in this process's environment (inherited by the worker
    processes it starts) and numba's runtime setting, which numba reads when a kernel
    is defined.
    """
    directory = cache_dir()
    if not os.environ.get(CACHE_ENV):
        os.environ[CACHE_ENV] = str(directory)
    import numba

    numba.config.CACHE_DIR = os.environ[CACHE_ENV]
    return directory


configure()


def njit(*args, **kwargs):
    """``numba.njit`` with ``cache=True`` into :func:`cache_dir` (the only way kernels in
    this package are compiled)."""
    import numba

    kwargs.setdefault("cache", True)
    return numba.njit(*args, **kwargs)


def precompile() -> float:
    """Compile, or load from the cache, the kernels a curation job uses; returns seconds.

    Runs each kernel once on a tiny input of the types the stages pass, so the
    signatures cached are the ones the stages will ask for.
    """
    import time

    import pandas as pd

    start = time.perf_counter()
    from curator_dask.stages.filters import heuristic, repetition

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
        except Exception:  # noqa: BLE001 - warming up is best effort, never an error
            logger.debug("precompile: %s", type(document_filter).__name__, exc_info=True)
    try:
        from curator_dask.dedup.fuzzy.minhash import MinHash

        MinHash(char_ngrams=5, num_hashes=4).signatures(texts)
        MinHash(char_ngrams=24, num_hashes=4, use_64_bit_hash=True).signatures(texts)
    except Exception:  # noqa: BLE001
        logger.debug("precompile: minhash", exc_info=True)
    seconds = time.perf_counter() - start
    logger.info("kernels compiled or loaded from %s in %.1f s", cache_dir(), seconds)
    return seconds


def precompile_in_background() -> threading.Thread:
    """:func:`precompile` in a daemon thread (started); join it to wait."""
    thread = threading.Thread(target=precompile, name="curator-dask-precompile", daemon=True)
    thread.start()
    return thread
