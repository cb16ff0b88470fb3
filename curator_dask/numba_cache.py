"""Compiled kernels without a compile on the critical path: one on-disk cache per user.

The filters, MinHash, connected components and decontamination run numba kernels. A
kernel compiles the first time a process calls it (seconds each), so without a cache
every worker of every run would compile them again: on a two-worker demo the word
splitter alone took 9 s of 48. Every kernel is compiled with ``cache=True`` into one
directory that all processes of a machine share, so a kernel compiles once per machine
and version, and later processes load it in milliseconds:

- ``NUMBA_CACHE_DIR`` if the user has set it (numba's own setting, honoured as is);
- otherwise ``curator-dask/numba/<sources>`` in the user's cache directory
  (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
  ``%LOCALAPPDATA%`` on Windows), where ``<sources>`` is a digest of the package's
  source files (:func:`source_digest`).

numba checks that a cached kernel is current only against the file that defines it, so a
kernel that calls (and inlines) a function from another module would be loaded stale
after that other module changed. One cache directory per state of the sources keeps
every kernel in step with all the code it was compiled from; a ``NUMBA_CACHE_DIR`` the
user sets is used as is, and then it is theirs to clear after changing the sources.

Either works from a read-only installation, where numba's default (a ``__pycache__``
beside the source) cannot be written. The choice is exported as ``NUMBA_CACHE_DIR``
before numba compiles anything, so worker processes started from this one (a
``LocalCluster``) share it.

:func:`curator_dask.precompile.precompile` compiles (or loads) the kernels ahead of need;
``curator-dask demo`` runs it in a background thread while its cluster starts, so not even
a first run on a fresh machine compiles on a worker.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "configure", "default_cache_dir", "njit", "source_digest"]

logger = logging.getLogger(__name__)

#: numba's environment variable for its cache directory.
CACHE_ENV = "NUMBA_CACHE_DIR"


def source_digest(root: Path | None = None) -> str:
    """A digest of every ``.py`` file under ``root`` (default: this package), by path
    and content: it changes with any change to the sources (an edit, an upgrade), and is
    the same for the same sources on every machine (a cache on a shared home directory
    serves every node with that version). Reading the package's sources takes a few
    milliseconds, once per process."""
    root = Path(__file__).resolve().parent if root is None else Path(root)
    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """``curator-dask/numba/<sources>`` in this user's cache directory (see the module
    docstring)."""
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
    return base / "numba" / source_digest()


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
