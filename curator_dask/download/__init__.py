"""Sources of raw data: Common Crawl's WARC listings (read in place or downloaded), and a
download-and-extract framework for any other source (:mod:`.framework`)."""

from curator_dask.download.framework import (
    DocumentDownloader,
    DocumentDownloadExtractStage,
    DocumentExtractor,
    DocumentIterator,
    DownloadError,
    URLGenerator,
)

__all__ = ["DocumentDownloadExtractStage", "DocumentDownloader", "DocumentExtractor",
           "DocumentIterator", "DownloadError", "URLGenerator"]
