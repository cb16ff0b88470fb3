"""The three extractors, and a child process that runs one with a deadline per page.

This module imports nothing but the standard library (and the extractor, when one is
called): the child process runs it as a script (``python -P extractors.py``), so a
fresh child starts in the time it takes to import the extractor, not curator-dask.

A thread cannot be stopped in Python, and a pathological page can keep an HTML parser
busy for minutes, so a timeout needs a process it can kill. Each worker thread that runs
an extraction stage keeps one child Python process (started with :mod:`subprocess`:
Dask's worker processes are daemons, which :mod:`multiprocessing` does not let have
children). The child imports the extractor once, then answers one page at a time over
its stdin/stdout pipes. The parent waits for each answer with ``select`` until the
deadline; past it, the child is killed (``SIGKILL``), the page counts as timed out, and
the next page starts a fresh child. A child that dies on a page (a crash, the kernel's
out-of-memory killer) is an error for that page and is replaced the same way. A child
whose parent dies reads end-of-file on its stdin and exits.

The child's startup (importing the extractor, one warm-up page) is waited for
separately, up to ``startup_timeout`` seconds, and never counts against a page.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import time

from curator_dask.errors import CuratorError

__all__ = [
    "ALGORITHMS",
    "ExtractionFailed",
    "ExtractionSandbox",
    "ExtractionTimeout",
    "ExtractorStartError",
    "extract_html",
]

logger = logging.getLogger(__name__)

_HEADER = struct.Struct(">Q")

ALGORITHMS = ("trafilatura", "resiliparse", "justext")


def _trafilatura(html: str, options: dict) -> str | None:
    import trafilatura

    return trafilatura.extract(html, **options)


def _resiliparse(html: str, options: dict) -> str | None:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, **{"main_content": True, **options})


def _justext(html: str, options: dict) -> str | None:
    import justext
    from lxml.etree import ParserError

    options = dict(options)
    stoplist = justext.get_stoplist(options.pop("language", "English"))
    try:
        paragraphs = justext.justext(html, stoplist, **options)
    except ParserError as err:
        if "empty" in str(err):  # lxml's "Document is empty": a page without elements
            return ""
        raise
    return "\n\n".join(p.text for p in paragraphs if not p.is_boilerplate)


_EXTRACTORS = {"trafilatura": _trafilatura, "resiliparse": _resiliparse, "justext": _justext}


def extract_html(algorithm: str, html: str, options: dict | None = None) -> str | None:
    """The text ``algorithm`` extracts from one decoded page (None or "" for none).

    Examples
    --------
    >>> page = "<html><body><nav>Home | News</nav><p>" + "The cat sat on the mat. " * 20
    >>> extract_html("resiliparse", page + "</p></body></html>")[:23]
    'The cat sat on the mat.'
    """
    return _EXTRACTORS[algorithm](html, options or {})


class ExtractionTimeout(CuratorError, TimeoutError):
    """A page took longer than the timeout; its child process was killed."""


class ExtractionFailed(CuratorError, RuntimeError):
    """The extractor raised on a page, or its child process died."""


class ExtractorStartError(CuratorError, RuntimeError):
    """The child process could not start the extractor (not installed, bad options)."""


def _write_frame(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, remaining = [], n
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise ExtractionTimeout
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int, deadline: float | None):
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return pickle.loads(_read_exact(fd, size, deadline))


class ExtractionSandbox:
    """One child process running ``extract_html(algorithm, html, options)``.

    Parameters
    ----------
    algorithm : str
        A name from :data:`ALGORITHMS`.
    options : dict
        Keyword arguments of the extractor.
    timeout : float
        Seconds one page may take.
    startup_timeout : float
        Seconds the child may take to import the extractor.
    """

    def __init__(self, algorithm: str, options: dict, timeout: float,
                 startup_timeout: float = 120.0):
        self.algorithm, self.options = algorithm, dict(options)
        self.timeout, self.startup_timeout = timeout, startup_timeout
        self._process: subprocess.Popen | None = None
        #: Children started so far (the first, and one after each kill).
        self.starts = 0

    def _start(self) -> None:
        # -P: the script's own directory stays off sys.path (its html.py would shadow
        # the standard library's html module).
        self._process = subprocess.Popen(
            [sys.executable, "-P", os.path.abspath(__file__)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        self.starts += 1
        _write_frame(self._process.stdin.fileno(), (self.algorithm, self.options))
        try:
            status, detail = _read_frame(self._process.stdout.fileno(),
                                         time.monotonic() + self.startup_timeout)
        except (ExtractionTimeout, EOFError) as err:
            self.close()
            raise ExtractorStartError(
                f"the {self.algorithm} extractor's child process did not start within "
                f"{self.startup_timeout:g} s ({type(err).__name__}); is {self.algorithm} "
                "installed on the workers? pip install 'curator-dask[html]'"
            ) from None
        if status != "ready":
            self.close()
            raise ExtractorStartError(
                f"the {self.algorithm} extractor failed on a test page with options "
                f"{self.options}: {detail}")

    def extract(self, html: str) -> str | None:
        """The extracted text of one page; raises :class:`ExtractionTimeout` or
        :class:`ExtractionFailed`."""
        if self._process is None or self._process.poll() is not None:
            self.close()
            self._start()
        try:
            _write_frame(self._process.stdin.fileno(), html)
            status, result = _read_frame(self._process.stdout.fileno(),
                                         time.monotonic() + self.timeout)
        except ExtractionTimeout:
            self.close()
            raise
        except (EOFError, BrokenPipeError) as err:
            code = self._process.poll() if self._process is not None else None
            self.close()
            raise ExtractionFailed(f"the extractor process died (exit code {code})") from err
        if status == "error":
            raise ExtractionFailed(result)
        return result

    def close(self) -> None:
        """Kill the child, if any."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()

    def __del__(self):
        # At interpreter shutdown the module's globals (contextlib included) may already
        # be gone, so no name from them is used here.
        try:  # noqa: SIM105 - contextlib itself may be gone by then
            self.close()
        except Exception:
            pass


def serve() -> None:
    """The child's loop: read a page, extract, answer, until stdin closes."""
    reply_fd = os.dup(1)
    # Anything the extractor prints goes to stderr, never into the answer pipe.
    os.dup2(2, 1)
    request_fd = 0
    try:
        algorithm, options = _read_frame(request_fd, None)
        extract_html(algorithm, "<html><body><p>warm up</p></body></html>", options)
    except EOFError:
        return
    except Exception as err:  # reported to the parent, which raises it
        _write_frame(reply_fd, ("error", f"{type(err).__name__}: {err}"))
        return
    _write_frame(reply_fd, ("ready", None))
    while True:
        try:
            html = _read_frame(request_fd, None)
        except EOFError:
            return
        try:
            answer = ("ok", extract_html(algorithm, html, options))
        except Exception as err:
            answer = ("error", f"{type(err).__name__}: {err}")
        _write_frame(reply_fd, answer)


if __name__ == "__main__":
    serve()
