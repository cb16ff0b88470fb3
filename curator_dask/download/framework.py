"""Download and extract documents from any source: URLs -> files -> records -> documents.

The four parts NeMo Curator users write for a new source, with its names:

- :class:`URLGenerator` lists what to download (``generate_urls()``);
- :class:`DocumentDownloader` fetches one URL to a file in ``download_dir``
  (``_download_to_path(url, path)``), written under a temporary name and renamed when
  complete; a file already there is not downloaded again, and nothing else is touched;
- :class:`DocumentIterator` yields the raw records of one downloaded file
  (``iterate(path)``);
- :class:`DocumentExtractor` turns a record into a document (``extract(record)``, None to
  skip it).

:class:`DocumentDownloadExtractStage` puts them together as a reader stage, the first
stage of a :class:`~curator_dask.Pipeline`: one partition per URL, so each worker
downloads and parses its own files and the executors stream, resume and count them as
they do files read from disk.

NeMo Curator 0.x's shapes work too: an iterator that yields ``(metadata, content)`` pairs
and an extractor that returns ``(metadata, text)``.

Examples
--------
>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> class Lines(DocumentIterator):
...     def iterate(self, file_path):
...         with open(file_path) as f:
...             for line in f:
...                 yield {"text": line.strip()}
...     def output_columns(self):
...         return ["text"]
>>> class Local(DocumentDownloader):
...     def _download_to_path(self, url, path):
...         with open(path, "w") as f:
...             f.write("one\\ntwo\\n")
...         return True, None
>>> class Urls(URLGenerator):
...     def generate_urls(self):
...         return ["https://example.org/a.txt"]
>>> stage = DocumentDownloadExtractStage(Urls(), Local(os.path.join(root, "raw")), Lines())
>>> stage.dataset().df.compute()[["text", "file_name"]].values.tolist()
[['one', 'a.txt'], ['two', 'a.txt']]
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlparse

import pandas as pd
from fsspec.implementations.local import LocalFileSystem

from curator_dask.errors import CuratorError
from curator_dask.io import atomic
from curator_dask.io.overlap import input_paths
from curator_dask.io.source import PartitionSource
from curator_dask.stages.io_stages import ReaderStage

__all__ = [
    "DocumentDownloadExtractStage",
    "DocumentDownloader",
    "DocumentExtractor",
    "DocumentIterator",
    "DownloadError",
    "DownloadFailedError",
    "URLGenerator",
]

logger = logging.getLogger(__name__)

#: Every column a download-and-extract stage makes holds text.
_TEXT_DTYPE = pd.StringDtype("pyarrow")


class DownloadError(CuratorError, RuntimeError):
    """A URL could not be downloaded; the message names it and the downloader's reason."""


class DownloadFailedError(DownloadError, OSError):
    """A transfer that failed, or ended short, after its retries."""


class URLGenerator:
    """What to download: subclasses implement :meth:`generate_urls`."""

    def generate_urls(self) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} must implement generate_urls()")


class DocumentDownloader:
    """Fetch one URL to a file in ``download_dir``.

    Subclasses implement :meth:`_download_to_path` (write ``url`` to ``path``; return
    ``(True, None)``, or ``(False, reason)``) and may override
    :meth:`_get_output_filename`. A NeMo Curator 0.x subclass that overrides
    :meth:`download` itself works as it is.

    Parameters
    ----------
    download_dir : str, optional
        Where files go (made if missing).
    verbose : bool, default False
        Log each download at INFO instead of DEBUG.
    """

    def __init__(self, download_dir: str | None = None, verbose: bool = False):
        self._download_dir = download_dir
        self._verbose = verbose
        if download_dir is not None:
            atomic.make_local_dirs(download_dir)

    def _get_output_filename(self, url: str) -> str:
        """The file name a URL is saved under (default: the last part of its path)."""
        name = posixpath.basename(urlparse(url).path)
        if not name:
            raise DownloadError(f"{url}: no file name in the URL; override "
                                f"{type(self).__name__}._get_output_filename")
        return name

    def _download_to_path(self, url: str, path: str) -> tuple[bool, str | None]:
        raise NotImplementedError(f"{type(self).__name__} must implement "
                                  "_download_to_path(url, path)")

    def download(self, url: str) -> str:
        """The local path of ``url``'s file: downloaded now, or found complete from an
        earlier download (a file is renamed into place only once complete)."""
        if self._download_dir is None:
            raise DownloadError(f"{type(self).__name__}: pass download_dir= to download {url}")
        path = os.path.join(self._download_dir, self._get_output_filename(url))
        if os.path.exists(path):
            logger.debug("%s: already downloaded to %s", url, path)
            return path
        log = logger.info if self._verbose else logger.debug
        log("downloading %s to %s", url, path)
        fs = LocalFileSystem()
        partial = atomic.temporary_name(path)
        try:
            ok, reason = self._download_to_path(url, partial)
            if not ok:
                raise DownloadError(f"{url}: download failed: {reason}")
            atomic.move(fs, partial, path)
        finally:
            atomic.remove(fs, partial, missing_ok=True)
        return path


class DocumentIterator:
    """The raw records of one downloaded file: subclasses implement :meth:`iterate`
    (yielding dicts) and :meth:`output_columns` (the keys of those dicts)."""

    def iterate(self, file_path: str) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} must implement iterate(file_path)")

    def output_columns(self) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} must implement output_columns()")


class DocumentExtractor:
    """A document from a raw record: subclasses implement :meth:`extract` (a dict, or
    None to skip the record) and :meth:`output_columns`."""

    def extract(self, record):
        raise NotImplementedError(f"{type(self).__name__} must implement extract(record)")

    def input_columns(self) -> list[str]:
        return []

    def output_columns(self) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} must implement output_columns()")


@dataclass(frozen=True)
class URLPartition:
    """One partition of a download-and-extract plan: a URL."""

    index: int
    url: str


@dataclass(frozen=True)
class _ReadURL:
    """Download, iterate and extract one URL (a task; pickled to the worker)."""

    downloader: DocumentDownloader
    iterator: DocumentIterator
    extractor: DocumentExtractor | None
    columns: tuple[str, ...]
    filename_column: str | None
    record_limit: int | None

    def __call__(self, spec: URLPartition) -> pd.DataFrame:
        path = self.downloader.download(spec.url)
        rows = []
        for record in self.iterator.iterate(path):
            document = self._document(record)
            if document is None:
                continue
            rows.append(document)
            if self.record_limit is not None and len(rows) >= self.record_limit:
                break
        frame = pd.DataFrame.from_records(rows, columns=list(self.columns)) if rows else \
            pd.DataFrame({c: pd.Series([], dtype=object) for c in self.columns})
        if self.filename_column is not None:
            frame[self.filename_column] = os.path.basename(path)
        return frame.astype(_TEXT_DTYPE)

    def _document(self, record) -> dict | None:
        if isinstance(record, tuple):  # NeMo Curator 0.x: (metadata, content)
            metadata, content = record
            if self.extractor is None:
                return {"text": content, **metadata}
            extracted = self.extractor.extract(content)
            if extracted is None or extracted[1] is None:
                return None
            more, text = extracted
            return {"text": text, **more, **metadata}
        return record if self.extractor is None else self.extractor.extract(record)


class DocumentDownloadExtractStage(ReaderStage):
    """A reader stage that downloads, iterates and extracts: one partition per URL.

    Parameters
    ----------
    url_generator : URLGenerator
    downloader : DocumentDownloader
    iterator : DocumentIterator
    extractor : DocumentExtractor, optional
        Without one, the iterator's records are the documents.
    url_limit : int, optional
        Use only the first URLs.
    record_limit : int, optional
        Keep only the first documents of each file.
    add_filename_column : bool or str, default True
        Add the downloaded file's name in a column (``file_name``, or the given name).
    """

    name = "download_extract"

    def __init__(self, url_generator: URLGenerator, downloader: DocumentDownloader,
                 iterator: DocumentIterator, extractor: DocumentExtractor | None = None, *,
                 url_limit: int | None = None, record_limit: int | None = None,
                 add_filename_column: bool | str = True):
        super().__init__(getattr(downloader, "_download_dir", None) or "")
        self.url_generator = url_generator
        self.downloader = downloader
        self.iterator = iterator
        self.extractor = extractor
        self.url_limit = url_limit
        self.record_limit = record_limit
        self.filename_column = ("file_name" if add_filename_column is True
                                else add_filename_column or None)

    def urls(self) -> list[str]:
        urls = list(self.url_generator.generate_urls())
        return urls[:self.url_limit] if self.url_limit is not None else urls

    def columns(self) -> tuple[str, ...]:
        source = self.extractor if self.extractor is not None else self.iterator
        return tuple(source.output_columns())

    def check_inputs(self) -> None:
        """Raise if the URL generator gives no URL (downloads nothing)."""
        if not self.urls():
            raise DownloadError(f"{type(self.url_generator).__name__}.generate_urls() gave "
                                "no URL")

    def plan(self, **options) -> PartitionSource:
        """One partition per URL, read by downloading, iterating and extracting it (the
        reader's options are its own attributes)."""
        plan = [URLPartition(i, url) for i, url in enumerate(self.urls())]
        read = _ReadURL(self.downloader, self.iterator, self.extractor, self.columns(),
                        self.filename_column, self.record_limit)
        names = [*read.columns, *([read.filename_column] if read.filename_column else [])]
        meta = pd.DataFrame({c: pd.Series([], dtype=_TEXT_DTYPE) for c in names})
        sources = input_paths(self.path) if self.path else None  # outputs stay out of it
        return PartitionSource(read, plan, meta=meta, sources=sources, label=self.name)

    def fingerprint(self) -> dict:
        from curator_dask.stages.fingerprint import qualified_name

        return {"stage": qualified_name(type(self)),
                "params": {"urls": self.urls(), "record_limit": self.record_limit,
                           "filename_column": self.filename_column,
                           "parts": [qualified_name(type(p)) for p in (
                               self.downloader, self.iterator, self.extractor)]}}

    def __repr__(self) -> str:
        return (f"<DocumentDownloadExtractStage {type(self.url_generator).__name__} "
                f"({self.resources})>")
