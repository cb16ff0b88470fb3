"""From web pages to documents: HTML extraction as a stage.

Usage::

    from curator_dask import DocumentDataset
    from curator_dask.stages.extract import HtmlExtractor
    ds = HtmlExtractor("trafilatura")(DocumentDataset.read_warc("crawl/"))

Layout: :mod:`.html` (the ``HtmlExtractor`` stage and the three extractors),
:mod:`.charset` (decoding payloads), :mod:`.extractors` (the three extractors, and the
child process that enforces the per-page timeout).
"""

from curator_dask.stages.extract.extractors import ALGORITHMS, extract_html
from curator_dask.stages.extract.html import HtmlExtractor

__all__ = ["ALGORITHMS", "HtmlExtractor", "extract_html"]
