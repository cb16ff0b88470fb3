"""Common Crawl: list a snapshot's WARC files, read them in place or download them first.

Each crawl publishes ``warc.paths.gz``: one path a line, relative to the public
endpoint (``crawl-data/CC-MAIN-2024-10/segments/.../warc/CC-MAIN-...-00000.warc.gz``).
:func:`warc_paths` turns such a listing (a local file or a URL) into URLs;
:func:`read_common_crawl` reads them as a :class:`~curator_dask.DocumentDataset`, in
place over HTTP (each worker fetches the byte ranges of its partitions, nothing is
stored) or from a local copy made by :func:`download_warc`, which resumes files a
previous run left partly downloaded with HTTP range requests.

Reading over ``https://`` needs fsspec's HTTP filesystem (aiohttp, in the ``warc``
extra).

Examples
--------
>>> urls = warc_paths("warc.paths.gz", limit=10)  # doctest: +SKIP
>>> ds = read_common_crawl("warc.paths.gz", limit=10)  # doctest: +SKIP
>>> local = download_warc(urls, "/data/cc")  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import posixpath
import time
import urllib.parse
from collections.abc import Sequence

import fsspec
from dask.utils import parse_bytes
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from curator_dask.dataset import DocumentDataset
from curator_dask.download.framework import DownloadFailedError
from curator_dask.errors import InvalidArgumentError
from curator_dask.io import atomic
from curator_dask.io.errors import OutputExistsError
from curator_dask.io.guard import guarded

__all__ = [
    "DEFAULT_BASE_URL",
    "PARTIAL_SUFFIX",
    "download_warc",
    "read_common_crawl",
    "warc_paths",
]

logger = logging.getLogger(__name__)

#: Common Crawl's public HTTP endpoint.
DEFAULT_BASE_URL = "https://data.commoncrawl.org/"
#: Suffix of a file being downloaded; a rerun resumes it.
PARTIAL_SUFFIX = ".curator-part"


def warc_paths(paths_file: str, *, base_url: str = DEFAULT_BASE_URL, limit: int | None = None,
               storage_options: dict | None = None) -> list[str]:
    """The WARC URLs a crawl's ``warc.paths.gz`` lists, in its order.

    Parameters
    ----------
    paths_file : str
        The listing: a local path or any fsspec URL; ``.gz`` is decompressed.
    base_url : str
        Prefix of relative entries (Common Crawl's endpoint by default; ``s3://commoncrawl/``
        reads the same files from S3). Entries that are already URLs are kept.
    limit : int, optional
        Only the first ``limit`` files.
    storage_options : dict, optional
        fsspec options for reading the listing.

    Examples
    --------
    >>> import fsspec
    >>> with fsspec.open("memory://cc/warc.paths", "w") as f:
    ...     _ = f.write("crawl-data/CC-MAIN-2024-10/a.warc.gz\\n"
    ...                 "crawl-data/CC-MAIN-2024-10/b.warc.gz\\n")
    >>> warc_paths("memory://cc/warc.paths", limit=1)
    ['https://data.commoncrawl.org/crawl-data/CC-MAIN-2024-10/a.warc.gz']
    """
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise InvalidArgumentError(f"limit must be a positive integer, got {limit!r}")
    out = []
    with fsspec.open(paths_file, "rt", encoding="utf-8", compression="infer",
                     **(storage_options or {})) as handle:
        for line in handle:
            entry = line.strip()
            if not entry:
                continue
            out.append(entry if "://" in entry
                       else base_url.rstrip("/") + "/" + entry.lstrip("/"))
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise InvalidArgumentError(f"{paths_file} lists no WARC files")
    return out


def _local_name(url: str) -> str:
    """The path under the download directory: the URL's path, so names never collide."""
    path = urllib.parse.urlsplit(url).path if "://" in url else url
    parts = [p for p in posixpath.normpath(path).split("/") if p not in ("", ".", "..")]
    if not parts:
        raise InvalidArgumentError(f"cannot name a local file after {url!r}")
    return os.path.join(*parts)


def download_warc(urls: Sequence[str], directory: str | os.PathLike, *,
                  chunk_size: int | str = "8MiB", retries: int = 3,
                  storage_options: dict | None = None) -> list[str]:
    """Download files to ``directory`` (local), resuming partial downloads.

    Each URL is saved under its own path (``directory/crawl-data/.../x.warc.gz``). A file
    is first written as ``<name>.curator-part``; an interrupted download leaves that
    file, and the next attempt, in this call (up to ``retries`` more) or in a later
    one, asks only for the bytes it lacks (an HTTP ``Range`` request, or a seek on any
    other fsspec filesystem). The complete file is renamed into place once its size
    equals the remote size. A file already in place with the remote size is skipped;
    one with another size is an error: it is not this function's to overwrite.

    Returns
    -------
    list of str
        The local paths, in the order of ``urls``.
    """
    chunk = parse_bytes(chunk_size)
    if not isinstance(retries, int) or retries < 0:
        raise InvalidArgumentError(f"retries must be a non-negative integer, got {retries!r}")
    out = []
    # One download into a directory at a time (two would write the same partial files),
    # and never into what the run in progress reads or writes elsewhere.
    with guarded(os.fspath(directory), "download directory"):
        for url in urls:
            target = os.path.join(os.fspath(directory), _local_name(url))
            _download_one(url, target, chunk, retries, storage_options or {})
            out.append(target)
    return out


def _download_one(url: str, target: str, chunk: int, retries: int, options: dict) -> None:
    fs, remote = url_to_fs(url, **options)
    size = fs.size(remote)
    if os.path.exists(target):
        if size is None or os.path.getsize(target) == size:
            logger.info("%s: already downloaded", target)
            return
        raise OutputExistsError(
            f"{target} exists with {os.path.getsize(target)} bytes, but {url} has {size}. "
            "Move it away (or choose another directory) to download the file again.")
    atomic.make_local_dirs(os.path.dirname(target) or ".")
    partial = target + PARTIAL_SUFFIX
    for attempt in range(retries + 1):
        have = os.path.getsize(partial) if os.path.exists(partial) else 0
        if size is not None and have > size:  # not a prefix of this file: start over
            have = 0
        try:
            _fetch(fs, remote, partial, have, size, chunk)
            break
        except Exception as err:  # the filesystem's own errors (aiohttp's, botocore's)
            got = os.path.getsize(partial) if os.path.exists(partial) else 0
            if attempt == retries:
                raise DownloadFailedError(
                    f"downloading {url} failed after {attempt + 1} attempt(s) ({err}); "
                    f"{got} of {size} bytes are in {partial}, and a rerun resumes from "
                    "there") from err
            logger.warning("%s: attempt %d failed at byte %d (%s); resuming", url,
                           attempt + 1, got, err)
            time.sleep(min(2 ** attempt, 30))
    atomic.move(LocalFileSystem(), partial, target)


def _fetch(fs, remote: str, partial: str, have: int, size: int | None, chunk: int) -> None:
    # No read-ahead cache: each read is one range request for exactly that chunk, and what
    # arrived is on disk before the next one is asked for.
    with (atomic.open_partial(partial, have) as out,
          fs.open(remote, "rb", block_size=chunk, cache_type="none") as source):
        source.seek(have)
        while size is None or have < size:
            data = source.read(chunk if size is None else min(chunk, size - have))
            if not data:
                break
            out.write(data)
            out.flush()
            have += len(data)
    if size is not None and have != size:
        raise DownloadFailedError(f"the transfer ended at byte {have} of {size}")


def read_common_crawl(paths_file: str, *, limit: int | None = None,
                      base_url: str = DEFAULT_BASE_URL, download_dir: str | None = None,
                      storage_options: dict | None = None, **read_warc_options
                      ) -> DocumentDataset:
    """The HTML responses of a crawl's WARC files (those its ``warc.paths.gz`` lists).

    Parameters
    ----------
    paths_file, limit, base_url
        As :func:`warc_paths`.
    download_dir : str, optional
        Download the files here first (resuming partial ones) and read the local copies;
        by default they are read in place, each partition fetching its byte range.
    storage_options : dict, optional
        fsspec options for the listing and the WARC files.
    **read_warc_options
        Passed to :meth:`~curator_dask.DocumentDataset.read_warc` (``blocksize``,
        ``content_types``, ``add_filename``, ...).
    """
    urls = warc_paths(paths_file, base_url=base_url, limit=limit,
                      storage_options=storage_options)
    if download_dir is not None:
        local = download_warc(urls, download_dir, storage_options=storage_options)
        return DocumentDataset.read_warc(local, **read_warc_options)
    return DocumentDataset.read_warc(urls, storage_options=storage_options, **read_warc_options)
