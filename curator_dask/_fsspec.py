"""The part of fsspec's private API that curator-dask relies on, behind one function.

As for distributed (:mod:`curator_dask._distributed`), each use is one small function
here, so that an fsspec release that changes it breaks one function, and
``tests/test_fsspec_compat.py`` (on the local and in-memory filesystems and a URL with a
protocol) names what changed. Everything else in the package uses fsspec's public API.

Checked on fsspec 2026.9.0.
"""

from __future__ import annotations

__all__ = ["strip_protocol"]


def strip_protocol(fs, path: str) -> str:
    """``path`` as ``fs`` names it in its own calls (``ls``, ``glob``, ``info``): without
    the protocol, normalised the way that filesystem does it.

    Local paths become absolute, without ``file://`` and a trailing slash;
    ``memory://a/b`` is ``/a/b``; an HTTP filesystem keeps the whole URL. Relies on
    ``AbstractFileSystem._strip_protocol``, the classmethod every fsspec filesystem
    overrides to say this, and which fsspec has no public name for. Checked on fsspec
    2026.9.0.

    Examples
    --------
    >>> from fsspec.implementations.memory import MemoryFileSystem
    >>> strip_protocol(MemoryFileSystem(), "memory://corpus/raw/")
    '/corpus/raw'
    """
    return fs._strip_protocol(path)
