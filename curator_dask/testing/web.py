"""Generated web pages and WARC files, for tests, benchmarks and trying things out.

No crawl is needed to exercise the WARC reader and the HTML extractors:
:func:`synthetic_pages` makes deterministic pages that look like the web (a navigation
bar, an article of English prose, a sidebar, a footer, in several charsets, with a few
pages that hold no text and a few payloads that are not HTML), and :func:`write_warc`
writes them as response records (each preceded by its request record, as crawlers do)
with warcio's writer, gzip-compressed one member per record by default, as Common
Crawl ships them. warcio is in the ``test`` and ``bench`` extras.

Examples
--------
>>> pages = synthetic_pages(4, seed=1)
>>> [p.content_type for p in pages]
['text/html', 'text/html', 'text/html', 'text/html']
>>> pages[0].url
'http://site-0.example.com/articles/0'
"""

from __future__ import annotations

import io
import os
import random
from dataclasses import dataclass

from fsspec.implementations.local import LocalFileSystem

from curator_dask.io import atomic

__all__ = ["Page", "synthetic_pages", "write_warc"]

_SUBJECTS = ["the city council", "a small team of engineers", "the museum", "our readers",
             "the old library", "the river authority", "local farmers", "the school board",
             "a group of students", "the regional hospital", "the new bakery", "the orchestra"]
_VERBS = ["announced", "discussed", "reviewed", "described", "questioned", "welcomed",
          "explained", "rebuilt", "measured", "opened", "planned", "remembered"]
_OBJECTS = ["a plan for the harbour", "the results of the survey", "their winter schedule",
            "the history of the bridge", "a careful report on water quality",
            "the cost of the repairs", "an exhibition of early maps", "the budget for next year",
            "a programme for young musicians", "the long delays on the northern line"]
_TAILS = ["after a meeting that lasted well into the evening",
          "because many people had asked about it for years",
          "and they said that the work would be done before the spring",
          "while most of the residents were still at home",
          "so that everyone could see what had been decided",
          "although not all of the members were in favour of it",
          "with the help of volunteers from the neighbourhood",
          "and it was the first time that this had happened in the town"]
_BOILERPLATE = ["Home", "News", "Sport", "Culture", "Contact", "About us", "Subscribe",
                "Sign in", "Privacy policy", "Terms of use", "Cookie settings"]


@dataclass(frozen=True)
class Page:
    """One generated capture: its URL, HTTP content type and charset, payload, and the
    article sentences a good extractor should find (empty for a page without text)."""

    url: str
    content_type: str
    charset: str | None
    payload: bytes
    sentences: tuple[str, ...]


def _sentence(rng: random.Random) -> str:
    text = (f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
            f"{rng.choice(_TAILS)}.")
    return text[0].upper() + text[1:]


def _html(title: str, paragraphs: list[str], meta_charset: str | None, links: int) -> str:
    nav = "".join(f'<li><a href="/{w.lower().replace(" ", "-")}">{w}</a></li>'
                  for w in _BOILERPLATE[:links])
    meta = f'<meta charset="{meta_charset}">' if meta_charset else ""
    body = "".join(f"<p>{p}</p>\n" for p in paragraphs)
    article = f"<article><h1>{title}</h1>\n{body}</article>" if paragraphs else ""
    return (
        f"<!DOCTYPE html>\n<html lang=\"en\"><head>{meta}<title>{title}</title>"
        "<script>var tracking = {id: 42, consent: false};</script>"
        "<style>body { font-family: serif; }</style></head>\n<body>"
        f"<header><nav><ul>{nav}</ul></nav></header>\n<main>{article}</main>\n"
        "<aside><h3>Most read</h3><ul><li><a href=\"/a\">Weather</a></li>"
        "<li><a href=\"/b\">Markets</a></li></ul></aside>\n"
        "<footer><p>Copyright 2024 Example Media. All rights reserved.</p>"
        f"<p>{' | '.join(_BOILERPLATE[-3:])}</p></footer></body></html>"
    )


def synthetic_pages(n: int, seed: int = 0, *, empty_every: int = 0, non_html_every: int = 0,
                    latin1_every: int = 0, paragraphs: tuple[int, int] = (4, 12)) -> list[Page]:
    """``n`` generated captures.

    Parameters
    ----------
    n : int
    seed : int
        The same seed gives the same pages.
    empty_every, non_html_every, latin1_every : int
        Every k-th page (0: none) is an HTML page with no article, a PNG image, or an
        ISO-8859-1 page that declares its charset only in a ``<meta>`` tag.
    paragraphs : (int, int)
        Range of the number of article paragraphs (3 to 6 sentences each).
    """
    rng = random.Random(seed)
    pages = []
    for i in range(n):
        url = f"http://site-{i % 97}.example.com/articles/{i}"
        if non_html_every and i % non_html_every == non_html_every - 1:
            payload = b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(64))
            pages.append(Page(url, "image/png", None, payload, ()))
            continue
        if empty_every and i % empty_every == empty_every - 1:
            html = _html(f"Page {i}", [], "utf-8", links=len(_BOILERPLATE))
            pages.append(Page(url, "text/html", "utf-8", html.encode(), ()))
            continue
        sentences = [_sentence(rng) for _ in range(rng.randint(*paragraphs) * 4)]
        grouped, pos = [], 0
        while pos < len(sentences):
            take = rng.randint(3, 6)
            grouped.append(" ".join(sentences[pos: pos + take]))
            pos += take
        title = f"Report {i}: {sentences[0][:40]}"
        if latin1_every and i % latin1_every == latin1_every - 1:
            grouped = [g.replace("the ", "the café ", 1) for g in grouped]
            sentences = [s for g in grouped for s in _split_sentences(g)]
            html = _html(title, grouped, "iso-8859-1", links=6)
            pages.append(Page(url, "text/html", None, html.encode("iso-8859-1"),
                              tuple(sentences)))
            continue
        html = _html(title, grouped, None, links=rng.randint(3, len(_BOILERPLATE)))
        pages.append(Page(url, "text/html", "utf-8", html.encode(), tuple(sentences)))
    return pages


def _split_sentences(paragraph: str) -> list[str]:
    return [s.strip() + "." for s in paragraph.split(".") if s.strip()]


def write_warc(path, pages: list[Page], *, gzip: bool = True, requests: bool = True) -> list[str]:
    """Write ``pages`` as WARC response records to ``path``; returns their record ids.

    ``gzip=True`` compresses each record as its own gzip member. With ``requests=True``
    each response follows a request record for the same URL.
    """
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    ids = []
    with atomic.atomic_open(LocalFileSystem(), os.path.abspath(os.fspath(path))) as out:
        writer = WARCWriter(out, gzip=gzip)
        for page in pages:
            if requests:
                request = StatusAndHeaders("GET / HTTP/1.1", [("Host", "example.com")],
                                           is_http_request=True)
                writer.write_record(writer.create_warc_record(
                    page.url, "request", http_headers=request))
            content_type = page.content_type
            if page.charset:
                content_type += f"; charset={page.charset}"
            http = StatusAndHeaders("200 OK", [("Content-Type", content_type)],
                                    protocol="HTTP/1.1")
            record = writer.create_warc_record(page.url, "response",
                                               payload=io.BytesIO(page.payload),
                                               http_headers=http)
            writer.write_record(record)
            ids.append(record.rec_headers.get_header("WARC-Record-ID"))
    return ids
