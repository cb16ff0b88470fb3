"""A real HTTP file server on 127.0.0.1 for tests: byte ranges, a request log, cut-offs.

Python's ``http.server`` ignores ``Range`` headers; this one answers them with ``206``
as web servers and object stores do, logs what each request asked for and how many body
bytes it sent, and can cut a response off after a number of bytes (once per path) to
stand for a dropped connection in the middle of a download.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    status: int
    sent: int = 0


@dataclass
class FileServer:
    root: str
    server: ThreadingHTTPServer | None = None
    log: list[Request] = field(default_factory=list)
    #: path -> bytes of that path sent in all, after which a response is cut off (once)
    cut_after: dict[str, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def sent(self, path: str) -> int:
        """Body bytes sent for ``path`` by GET requests so far."""
        return sum(r.sent for r in self.log if r.method == "GET" and r.path == path)


def _handler(state: FileServer):
    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=state.root, **kwargs)

        def log_message(self, *args):  # keep test output clean
            pass

        def _serve(self, body: bool):
            path = self.path.split("?")[0]
            local = os.path.join(state.root, path.lstrip("/"))
            if not os.path.isfile(local):
                self.send_error(404)
                state.log.append(Request(self.command, path, None, 404))
                return
            size = os.path.getsize(local)
            start, end, status = 0, size - 1, 200
            wanted = self.headers.get("Range")
            match = _RANGE.fullmatch(wanted or "")
            if match:
                start = int(match.group(1))
                end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
                status = 206
                if start >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.end_headers()
                    state.log.append(Request(self.command, path, wanted, 416))
                    return
            length = end - start + 1
            self.send_response(status)
            content_type = "application/gzip" if path.endswith(".gz") else "application/warc"
            self.send_header("Content-Type", content_type)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(length))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            request = Request(self.command, path, wanted, status)
            state.log.append(request)
            if not body:
                return
            limit = state.cut_after.get(path)
            if limit is not None:
                limit = max(limit - state.sent(path), 0)
                if limit >= length:
                    limit = None
                else:
                    del state.cut_after[path]
            with open(local, "rb") as source:
                source.seek(start)
                remaining = length if limit is None else limit
                while remaining:
                    chunk = source.read(min(remaining, 1 << 16))
                    self.wfile.write(chunk)
                    request.sent += len(chunk)
                    remaining -= len(chunk)
            if limit is not None:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)

        def do_GET(self):
            self._serve(body=True)

        def do_HEAD(self):
            self._serve(body=False)

    return Handler


class serve_directory:
    """``with serve_directory(path) as server:`` a FileServer on a free port of 127.0.0.1."""

    def __init__(self, root):
        self.state = FileServer(str(root))

    def __enter__(self) -> FileServer:
        self.state.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.state.server.daemon_threads = True
        self._thread = threading.Thread(target=self.state.server.serve_forever, daemon=True)
        self._thread.start()
        return self.state

    def __exit__(self, *exc):
        self.state.server.shutdown()
        self.state.server.server_close()
        self._thread.join()
