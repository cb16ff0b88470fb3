"""HTML to text: Trafilatura, Resiliparse or jusText behind one stage.

Each page is decoded (:func:`~curator_dask.stages.extract.charset.decode_html`), then
handed to the extractor. Extraction is a library call per page, so this stage loops over
the documents of a partition; decoding costs microseconds per page beside the
milliseconds of extraction.

The extractors run with their published defaults:

- ``"trafilatura"``: ``trafilatura.extract(html)`` with the library's defaults (main
  text, comments and tables kept, plain text out).
- ``"resiliparse"``: ``extract_plain_text(html, main_content=True)``: Resiliparse's
  main-content mode (without it, every visible string of the page, navigation included,
  is kept); its other options at their defaults.
- ``"justext"``: ``justext.justext(html, get_stoplist("English"))`` with the library's
  thresholds (``length_low=70``, ``length_high=200``, ``stopwords_low=0.30``,
  ``stopwords_high=0.32``, ``max_link_density=0.2``, ``max_heading_distance=200``); the
  text is the paragraphs it does not class as boilerplate, joined by blank lines.
  ``options={"language": "German"}`` picks another stoplist.

``options`` passes any other keyword argument on to the extractor, e.g.
``{"favor_precision": True, "include_comments": False, "deduplicate": True}`` for
datatrove's Trafilatura settings.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import pandas as pd
import pyarrow as pa

from curator_dask.backends import is_cudf, rows_where
from curator_dask.dropped import record_dropped
from curator_dask.errors import InvalidArgumentError, MissingDependencyError
from curator_dask.resources import Resources
from curator_dask.stages.base import ProcessingStage
from curator_dask.stages.columns import ColumnNotFoundError
from curator_dask.stages.extract.charset import decode_html
from curator_dask.stages.extract.extractors import (
    ALGORITHMS,
    ExtractionSandbox,
    ExtractionTimeout,
    ExtractorStartError,
    extract_html,
)

__all__ = ["ALGORITHMS", "HtmlExtractor", "extract_html"]

logger = logging.getLogger(__name__)

class HtmlExtractor(ProcessingStage):
    """Extract the main text of HTML pages into a ``text`` column.

    Reads the raw payloads of :meth:`~curator_dask.DocumentDataset.read_warc` (bytes) or
    already decoded HTML (str). Pages are decoded with the charset of the ``charset``
    column (the HTTP header's), else the page's ``<meta>`` charset, else UTF-8, else
    charset-normalizer's guess; the ``charset`` column is set to the codec used.

    Pages that yield no text are dropped and counted under ``html_extract.empty``; pages
    that take longer than ``timeout`` under ``html_extract.timeout``; pages the extractor
    fails on under ``html_extract.error``.

    Parameters
    ----------
    algorithm : {"trafilatura", "resiliparse", "justext"}
        The extractor, with its published defaults (see the module's documentation).
    timeout : float or None, default 5.0
        Seconds one page may take. Pages are extracted in a child process per worker
        thread, killed and restarted when a page runs over; ``None`` extracts in the
        worker itself, without a deadline (a little faster, but a pathological page can
        hold the worker indefinitely).
    options : dict, optional
        Keyword arguments passed to the extractor (``language`` picks jusText's
        stoplist).
    html_field : str, default "html"
    text_field : str, default "text"
    charset_field : str, default "charset"
        The declared charset (may be missing or null); written with the charset used.
    keep_html : bool, default False
        Keep the HTML column (it is several times the size of the text).

    Examples
    --------
    >>> import pandas as pd
    >>> from curator_dask import DocumentDataset
    >>> page = ("<html><body><nav>Home | News | Contact</nav><article><p>"
    ...         + "The council met on Monday to discuss the new bridge. " * 8
    ...         + "</p></article></body></html>")
    >>> ds = DocumentDataset.from_pandas(pd.DataFrame({"html": [page, "<html></html>"]}))
    >>> out = HtmlExtractor("resiliparse", timeout=None)(ds)
    >>> out.df.compute()["text"].str.startswith("The council met").tolist()
    [True]
    >>> out.dropped_counts()
    {'html_extract.empty': 1}
    """

    resources = Resources(cpus=1)

    def __init__(self, algorithm: str = "trafilatura", *, timeout: float | None = 5.0,
                 options: dict | None = None, html_field: str = "html",
                 text_field: str = "text", charset_field: str = "charset",
                 keep_html: bool = False):
        if algorithm not in ALGORITHMS:
            raise InvalidArgumentError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
        if timeout is not None and not timeout > 0:
            raise InvalidArgumentError(f"timeout must be a positive number of seconds or None, "
                                       f"got {timeout!r}")
        self.algorithm = algorithm
        self.timeout = timeout
        self.options = dict(options or {})
        self.html_field, self.text_field = html_field, text_field
        self.charset_field = charset_field
        self.keep_html = keep_html
        self.name = "html_extract"
        self.output_columns = {text_field: "str", charset_field: "str"}
        self.removed_columns = () if keep_html else (html_field,)
        self._local = threading.local()
        self._sandboxes: list[tuple[threading.Thread, ExtractionSandbox]] = []
        self._lock = threading.Lock()

    def __getstate__(self):
        state = dict(self.__dict__)
        for private in ("_local", "_sandboxes", "_lock"):
            state.pop(private, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local = threading.local()
        self._sandboxes = []
        self._lock = threading.Lock()

    def setup(self) -> None:
        try:
            __import__(self.algorithm)
        except ImportError as err:
            raise MissingDependencyError(
                f"HtmlExtractor(algorithm={self.algorithm!r}) needs the {self.algorithm} "
                "package on every worker: pip install 'curator-dask[html]'") from err
        if self.timeout is None:
            # A test page, so that options the extractor rejects fail the run here
            # instead of every page (the child process does the same when it starts).
            try:
                extract_html(self.algorithm, "<html><body><p>test</p></body></html>",
                             self.options)
            except Exception as err:
                raise InvalidArgumentError(
                    f"HtmlExtractor(algorithm={self.algorithm!r}): the extractor failed on "
                    f"a test page with options {self.options}: {type(err).__name__}: {err}"
                ) from err

    def teardown(self) -> None:
        with self._lock:
            sandboxes, self._sandboxes = self._sandboxes, []
        for _, sandbox in sandboxes:
            sandbox.close()

    def meta(self, input_meta):
        if self.html_field not in input_meta.columns:
            raise ColumnNotFoundError(
                f"stage {self.name!r} reads HTML from the column {self.html_field!r}, "
                f"which the dataset does not have; its columns are "
                f"{list(input_meta.columns)}. Read WARC files with read_warc, or pass "
                "html_field= to name the HTML column.")
        return super().meta(input_meta)

    def _sandbox(self) -> ExtractionSandbox:
        """This thread's child process (one per thread: a child answers one page at a time)."""
        sandbox = getattr(self._local, "sandbox", None)
        if sandbox is None:
            sandbox = ExtractionSandbox(self.algorithm, self.options, self.timeout)
            self._local.sandbox = sandbox
            with self._lock:
                # Children of threads that have ended (a scheduler's pool replaced) go.
                alive = [(t, s) for t, s in self._sandboxes if t.is_alive()]
                for thread, old in self._sandboxes:
                    if not thread.is_alive():
                        old.close()
                self._sandboxes = [*alive, (threading.current_thread(), sandbox)]
        return sandbox

    def _extract(self, html: str) -> tuple[str | None, str | None]:
        """(text, None) or (None, the reason the page is dropped)."""
        try:
            if self.timeout is None:
                text = extract_html(self.algorithm, html, self.options)
            else:
                text = self._sandbox().extract(html)
        except ExtractorStartError:
            raise  # a misconfiguration fails the run rather than every page
        except ExtractionTimeout:
            logger.warning("%s: a page took over %g s; counted under %s.timeout",
                           self.algorithm, self.timeout, self.name)
            return None, "timeout"
        except Exception as err:  # ExtractionFailed, or the extractor's own when inline
            # One bad page must not fail the run: it is counted and logged.
            logger.warning("%s failed on a page (%s); counted under %s.error",
                           self.algorithm, err, self.name)
            return None, "error"
        if text is None or not text.strip():
            return None, "empty"
        return text, None

    def process(self, df):
        if is_cudf(df):
            import cudf

            return cudf.from_pandas(self.process(df.to_pandas()))
        payloads = pa.array(df[self.html_field].array).to_pylist() \
            if isinstance(df[self.html_field].dtype, pd.ArrowDtype) \
            else df[self.html_field].tolist()
        if self.charset_field in df.columns:
            declared = [c if isinstance(c, str) else None for c in df[self.charset_field]]
        else:
            declared = [None] * len(df)
        texts: list[str | None] = []
        charsets: list[str | None] = []
        reasons: list[str | None] = []
        for payload, charset in zip(payloads, declared, strict=True):
            used = charset
            if isinstance(payload, (bytes, bytearray)):
                payload, used = decode_html(bytes(payload), charset)
            if not isinstance(payload, str) or not payload.strip():
                text, reason = None, "empty"
            else:
                text, reason = self._extract(payload)
            texts.append(text)
            charsets.append(used)
            reasons.append(reason)
        keep = np.array([r is None for r in reasons], dtype=bool)
        out = df.assign(**{
            self.text_field: pd.Series(texts, index=df.index, dtype="str"),
            self.charset_field: pd.Series(charsets, index=df.index, dtype="str"),
        })
        if not self.keep_html:
            out = out.drop(columns=[self.html_field])
        out = rows_where(out, keep)
        for reason, count in zip(*np.unique([r for r in reasons if r is not None],
                                            return_counts=True), strict=True):
            record_dropped(out, f"{self.name}.{reason}", int(count))
        return out
