"""Decode web payloads: the declared charset, then the page's own, then a detector.

The order follows what browsers trust: the charset of the HTTP ``Content-Type`` header,
then a ``<meta charset>`` or ``<meta http-equiv="Content-Type">`` in the page's first
bytes, then strict UTF-8 (most of the web, and almost never valid by accident), then
charset-normalizer's guess when it is installed. A label is used only if Python knows
it and it decodes the whole payload; ISO-8859-1 and ASCII labels mean windows-1252, as
the WHATWG Encoding standard says. When nothing fits, UTF-8 with U+FFFD replacements.
"""

from __future__ import annotations

import codecs
import re

__all__ = ["decode_html", "meta_charset"]

_META = re.compile(rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([a-zA-Z0-9_:.+-]{1,40})",
                   re.IGNORECASE)
_META_WINDOW = 4096
# WHATWG: these labels are decoded as windows-1252.
_AS_WINDOWS_1252 = {"iso8859-1", "ascii"}


def meta_charset(payload: bytes) -> str | None:
    """The charset a page declares in a ``<meta>`` tag within its first 4 kB.

    Examples
    --------
    >>> meta_charset(b'<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">')
    'Shift_JIS'
    >>> meta_charset(b"<html><body>no declaration</body></html>") is None
    True
    """
    found = _META.search(payload, 0, _META_WINDOW)
    return found.group(1).decode("ascii") if found else None


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'")).name
    except LookupError:
        return None
    return "cp1252" if name in _AS_WINDOWS_1252 else name


def decode_html(payload: bytes, declared: str | None = None) -> tuple[str, str]:
    """The page as text, and the charset (a Python codec name) that decoded it.

    Examples
    --------
    >>> decode_html("café".encode("utf-8"), "utf-8")
    ('café', 'utf-8')
    >>> decode_html(b'<meta charset="iso-8859-1"><p>caf\\xe9</p>')
    ('<meta charset="iso-8859-1"><p>café</p>', 'cp1252')
    >>> decode_html("naïve".encode("utf-8"), "x-unknown-label")
    ('naïve', 'utf-8')
    """
    tried = set()
    for label in (declared, meta_charset(payload), "utf-8"):
        codec = _codec(label)
        if codec is None or codec in tried:
            continue
        tried.add(codec)
        try:
            return payload.decode(codec), codec
        except (UnicodeDecodeError, LookupError):
            continue
    guess = _detect(payload)
    if guess is not None:
        return guess
    return payload.decode("utf-8", errors="replace"), "utf-8"


def _detect(payload: bytes) -> tuple[str, str] | None:
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        return None
    best = from_bytes(payload).best()
    if best is None:
        return None
    codec = _codec(best.encoding)
    if codec is None:
        return None
    try:
        return payload.decode(codec), codec
    except (UnicodeDecodeError, LookupError):
        return None
