"""The bytes of JSONL slices: whole files decompressed with breaks noticed, byte ranges cut
at line boundaries, line numbers, and the sample schema inference reads.

Python's and Arrow's decompressors are used (not fsspec's), because they say when a
stream ends early: a truncated gzip, bz2, xz or zstd file is reported, or its lines
before the break kept, never read as if it were whole.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from contextlib import contextmanager

import pyarrow as pa
import zstandard
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import read_block

from curator_dask.errors import InvalidArgumentError
from curator_dask.io.errors import TruncatedFileError
from curator_dask.io.files import InputFile, open_input
from curator_dask.io.partitions import FileSlice

__all__ = [
    "CHUNK",
    "SAMPLE_BYTES",
    "STREAM_BLOCK",
    "STREAM_ERRORS",
    "decompress",
    "first_line_number",
    "is_broken_stream",
    "mapped_range",
    "open_stream",
    "read_slice",
    "read_slice_bytes",
    "sample_bytes",
]

#: Schema inference reads the first complete line of each sampled file, however long,
#: and up to this many bytes after it.
SAMPLE_BYTES = 256 << 10
STREAM_BLOCK = 16 << 20
# Reads from a decompressing stream: Python's incremental decompressors return every
# byte decoded before a break, whatever the read size.
CHUNK = 1 << 20
# fsspec compression name -> Arrow codec, for the codecs Arrow decompresses itself. Arrow's
# decompressors also notice a truncated stream (Python's zstandard reader does not).
ARROW_CODECS = {name: codec for name, codec in
                 {None: None, "gzip": "gzip", "bz2": "bz2", "zstd": "zstd"}.items()
                 if codec is None or pa.Codec.is_available(codec)}
STREAM_ERRORS = (pa.ArrowInvalid, OSError, EOFError, zlib.error, lzma.LZMAError)


def is_broken_stream(err: BaseException) -> bool:
    """Whether an error while decompressing means the data is truncated or corrupt.

    Arrow and Python's decompressors raise plain OSError or EOFError for a stream that
    ends early or does not decode; subclasses of OSError (a missing file, a refused
    permission, a network error) are not about the data.
    """
    return type(err) is OSError or isinstance(
        err, (EOFError, zlib.error, lzma.LZMAError, pa.ArrowInvalid))


@contextmanager
def open_stream(fs, f: InputFile):
    """The decompressed bytes of a whole file, as a stream with ``read(n)``."""
    if f.compression not in ARROW_CODECS:
        with open_input(fs, f.path, compression=f.compression) as handle:
            yield handle
    elif isinstance(fs, LocalFileSystem):
        with pa.input_stream(f.path, compression=ARROW_CODECS[f.compression]) as stream:
            yield stream
    else:
        with open_input(fs, f.path) as raw:
            if f.compression is None:
                yield raw
            else:
                stream = pa.CompressedInputStream(raw, ARROW_CODECS[f.compression])
                try:
                    yield stream
                finally:
                    stream.close()


def read_slice(fs, piece: FileSlice) -> tuple[bytes, str | None]:
    """The decompressed bytes of a slice, and why the stream broke (None if it did not).

    When a compressed stream is truncated or corrupt, the bytes decoded before the break
    are returned with the reason.
    """
    f = piece.file
    if not piece.whole:
        with open_input(fs, f.path) as handle:
            length = None if piece.end is None else piece.end - piece.start
            return read_block(handle, piece.start, length, delimiter=b"\n"), None
    if f.compression is None:
        return fs.cat_file(f.path), None
    with open_input(fs, f.path) as raw:
        return decompress(raw, f.compression)


def new_decompressor(compression: str):
    if compression == "gzip":
        return zlib.decompressobj(wbits=31)
    if compression == "bz2":
        return bz2.BZ2Decompressor()
    if compression == "xz":
        return lzma.LZMADecompressor()
    if compression == "zstd":
        return zstandard.ZstdDecompressor().decompressobj()
    raise InvalidArgumentError(f"no decompressor for {compression!r}")


def decompress(raw, compression: str) -> tuple[bytes, str | None]:
    """Decompress a whole stream; on a break, what was decoded before it and the reason.

    Python's incremental decompressors give every byte that can be decoded before a
    break, and say whether the stream reached its end marker (``eof``); concatenated
    members (gzip) or frames (zstd) each get a new decompressor.
    """
    out: list[bytes] = []
    decompressor = new_decompressor(compression)
    seen = False
    try:
        while chunk := raw.read(CHUNK):
            seen = True
            while chunk:
                if decompressor.eof:
                    decompressor = new_decompressor(compression)
                out.append(decompressor.decompress(chunk))
                chunk = decompressor.unused_data if decompressor.eof else b""
    except (*STREAM_ERRORS, zstandard.ZstdError) as err:
        if not (is_broken_stream(err) or isinstance(err, zstandard.ZstdError)):
            raise
        return b"".join(out), f"{type(err).__name__}: {err}"
    if seen and not decompressor.eof:
        return b"".join(out), "the stream ends before its end-of-stream marker"
    return b"".join(out), None


def read_slice_bytes(fs, piece: FileSlice) -> bytes:
    """The bytes of a slice, decompressed.

    A byte range starts after the first newline at or after ``piece.start`` and runs to
    the end of the line that spans ``piece.end`` (fsspec's ``read_block``), so adjacent
    ranges read every line exactly once.

    Raises
    ------
    TruncatedFileError
        When a compressed file's stream ends early or does not decode.
    """
    data, broken = read_slice(fs, piece)
    if broken is not None:
        raise TruncatedFileError(piece.file.path, broken, line=data.count(b"\n"),
                                 offset=len(data))
    return data


def first_line_number(fs, f: InputFile, start: int) -> int:
    """1-based number of the first line of the byte range that begins at ``start``.

    The range's first line follows the first newline at or after ``start``, so it is
    line (newlines before ``start``) + 2. Counting reads the file up to ``start``; it is
    done only to name a line in an error.
    """
    if start == 0:
        return 1
    count = 0
    with open_input(fs, f.path) as handle:
        remaining = start
        while remaining:
            chunk = handle.read(min(remaining, 1 << 24))
            if not chunk:
                break
            count += chunk.count(b"\n")
            remaining -= len(chunk)
    return count + 2


def mapped_range(path: str, piece: FileSlice) -> pa.Buffer:
    """The bytes ``read_block`` would return for ``piece``, as a slice of a memory map."""
    mapped = pa.memory_map(path)
    size = mapped.size()

    def after_newline(pos: int) -> int:
        while pos < size:
            chunk = mapped.read_at(min(1 << 16, size - pos), pos)
            cut = chunk.find(b"\n")
            if cut >= 0:
                return pos + cut + 1
            pos += len(chunk)
        return size

    start = 0 if piece.start == 0 else after_newline(piece.start)
    end = size if piece.end is None or piece.end >= size else after_newline(piece.end)
    mapped.seek(start)
    return mapped.read_buffer(max(end - start, 0))  # zero-copy: a view of the map


def sample_bytes(fs, f: InputFile, extra: int = SAMPLE_BYTES) -> bytes:
    """The first complete line of a file, however long, and up to ``extra`` bytes after it.

    The file is streamed until the first line that is not blank ends, so a huge first
    document is read whole but nothing more than ``extra`` beyond it. The sample ends at
    a line boundary. A broken compressed stream ends the sample where it breaks.
    """
    chunks: list[bytes] = []
    read = 0
    first_end = None
    content = False
    ended = False
    try:
        with open_stream(fs, f) as stream:
            while first_end is None or read < first_end + extra:
                chunk = stream.read(CHUNK)
                if not chunk:
                    ended = True
                    break
                if first_end is None:
                    start = 0
                    while True:
                        newline = chunk.find(b"\n", start)
                        stop = len(chunk) if newline < 0 else newline
                        content = content or (not chunk[start:stop].isspace() and stop > start)
                        if newline < 0:
                            break
                        if content:
                            first_end = read + newline + 1
                            break
                        start = newline + 1
                chunks.append(chunk)
                read += len(chunk)
    except STREAM_ERRORS as err:
        if not is_broken_stream(err):
            raise
    data = b"".join(chunks)
    if first_end is None:  # one line, or none: all of it, if the file ended
        return data if ended else b""
    if ended and len(data) <= first_end + extra:
        return data
    return data[: data.rfind(b"\n", 0, first_end + extra) + 1]
