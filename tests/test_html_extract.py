"""HTML extraction: main text out, boilerplate and empty pages counted, charsets decoded,
a pathological page stopped by the timeout, and WARC to Parquet on a real cluster."""

from __future__ import annotations

import os
from pathlib import Path

import dask
import pandas as pd
import pyarrow as pa
import pytest

from curator_dask import DocumentDataset, Pipeline, WarcReader
from curator_dask.dropped import sum_dropped
from curator_dask.partition import Partition
from curator_dask.stages.extract import ALGORITHMS, HtmlExtractor
from curator_dask.stages.extract.charset import decode_html
from curator_dask.stages.filters import DomainBlocklistFilter, ScoreFilter
from curator_dask.stages.io_stages import ParquetWriter

HTML_DIR = Path(__file__).parent / "data" / "html"
AVAILABLE = []
for _name in ALGORITHMS:
    try:
        __import__(_name)
        AVAILABLE.append(_name)
    except ImportError:
        AVAILABLE.append(pytest.param(_name, marks=pytest.mark.skip(
            reason=f"{_name} is not installed (the html extra)")))


def page(name: str) -> bytes:
    return (HTML_DIR / name).read_bytes()


def pages_dataset(payloads: list, charsets: list | None = None, npartitions: int = 1):
    frame = pd.DataFrame({
        "url": [f"http://example.com/{i}" for i in range(len(payloads))],
        "charset": pd.Series(charsets or [None] * len(payloads), dtype="str"),
        "html": pd.Series(payloads, dtype=pd.ArrowDtype(pa.binary())),
    })
    return DocumentDataset.from_pandas(frame, npartitions=npartitions)


def run(stage, ds):
    """The stage's output and drop counts, from one computation of its partitions."""
    parts = dask.compute(*stage(ds).to_partitions(), scheduler="sync")
    return pd.concat([p.frame for p in parts]), sum_dropped(p.dropped for p in parts)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", AVAILABLE)
def test_each_algorithm_extracts_the_article_and_leaves_the_page_furniture(algorithm):
    df, dropped = run(HtmlExtractor(algorithm), pages_dataset([page("article_en.html")]))
    text = df["text"].iloc[0]
    assert "The old harbour bridge opened to traffic again on Monday morning" in text
    assert "which it says will make the crossing safer for children" in text
    for furniture in ("Privacy policy", "Storm warning", "Subscribe", "dataLayer"):
        assert furniture not in text
    assert dropped == {}
    assert "html" not in df.columns and df["charset"].tolist() == ["utf-8"]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", [a for a in AVAILABLE if a != "trafilatura"])
def test_a_page_without_main_text_is_dropped_and_counted(algorithm):
    # jusText's parser raises on a page without elements ("<!-- -->"): that is empty too.
    payloads = [page("article_en.html"), page("boilerplate_only.html"),
                b"<html><body></body></html>", b"", b"<!-- -->"]
    df, dropped = run(HtmlExtractor(algorithm), pages_dataset(payloads))
    assert df["url"].tolist() == ["http://example.com/0"]
    assert dropped == {"html_extract.empty": 4}


@pytest.mark.slow
def test_trafilatura_counts_an_empty_page():
    pytest.importorskip("trafilatura", reason="the html extra is not installed")
    payloads = [page("article_en.html"), b"<html><head><title>t</title></head><body></body></html>"]
    df, dropped = run(HtmlExtractor("trafilatura"), pages_dataset(payloads))
    assert len(df) == 1 and dropped == {"html_extract.empty": 1}


@pytest.mark.slow
def test_charsets_come_from_the_header_then_the_page_then_detection():
    pytest.importorskip("resiliparse", reason="the html extra is not installed")
    pytest.importorskip("charset_normalizer", reason="detection needs charset-normalizer")
    french, russian = page("article_fr_latin1.html"), page("article_ru_cp1251.html")
    payloads = [french, russian, russian, "café à la carte".encode() * 30]
    # The last page claims ISO-8859-1 in its header but is UTF-8: a label that decodes
    # is trusted, as browsers do, so the header wins over the bytes.
    declared = [None, None, "windows-1251", "iso-8859-1"]
    df, _ = run(HtmlExtractor("resiliparse", keep_html=True, options={"main_content": False}),
                pages_dataset(payloads, declared))
    assert df["charset"].tolist() == ["cp1252", "cp1251", "cp1251", "cp1252"]
    text = df["text"].tolist()
    assert "La bibliothèque de la ville a célébré samedi son centième anniversaire" in text[0]
    assert "В субботу в центре города открылся новый парк" in text[1]
    assert text[1] == text[2]
    assert df["html"].tolist() == payloads


def test_an_undecodable_declared_charset_falls_through_to_the_next():
    russian = page("article_ru_cp1251.html")
    text, used = decode_html(russian, "utf-8")
    assert used == "cp1251" and "Новый парк" in text
    text, used = decode_html(b"plain ascii", "no-such-charset")
    assert used == "utf-8"


def test_html_already_decoded_to_text_is_extracted_as_it_is():
    pytest.importorskip("resiliparse", reason="the html extra is not installed")
    html = page("article_en.html").decode("utf-8")
    ds = DocumentDataset.from_pandas(pd.DataFrame({"html": [html]}))
    df, _ = run(HtmlExtractor("resiliparse", timeout=None), ds)
    assert "harbour bridge" in df["text"].iloc[0]


@pytest.mark.slow
def test_a_pathological_page_times_out_is_counted_and_the_next_page_is_extracted():
    pytest.importorskip("resiliparse", reason="the html extra is not installed")
    # Resiliparse's main-content pass takes time quadratic in nesting depth: 40,000
    # nested <div>s keep it busy for over a minute on this machine.
    deep = b"<html><body>" + b"<div>" * 40_000 + b"deep" + b"</div>" * 40_000 + b"</body></html>"
    article = page("article_en.html")
    stage = HtmlExtractor("resiliparse", timeout=2.0)
    df, dropped = run(stage, pages_dataset([article, deep, article]))
    assert df["url"].tolist() == ["http://example.com/0", "http://example.com/2"]
    # The child that was killed on the deep page was replaced: the last page came out.
    assert dropped == {"html_extract.timeout": 1}
    stage.teardown()


def test_a_missing_html_column_names_the_stage_and_the_fix():
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["x"]}))
    with pytest.raises(KeyError, match=r"html_extract.*'html'.*read_warc"):
        HtmlExtractor("resiliparse")(ds)


def test_unknown_algorithms_and_timeouts_are_refused():
    with pytest.raises(ValueError, match="algorithm must be one of"):
        HtmlExtractor("readability")
    with pytest.raises(ValueError, match="timeout"):
        HtmlExtractor("justext", timeout=0)


# -- end to end ----------------------------------------------------------------------------

@pytest.mark.slow
def test_warc_to_parquet_on_a_cluster_accounts_for_every_record(tmp_path, client):
    pytest.importorskip("resiliparse", reason="the html extra is not installed")
    pytest.importorskip("warcio", reason="warcio writes the test WARC files (test extra)")
    from curator_dask.executors import StreamingExecutor
    from curator_dask.testing.web import synthetic_pages, write_warc

    pages = synthetic_pages(400, seed=5, empty_every=9, non_html_every=13, latin1_every=6,
                            paragraphs=(1, 4))
    os.makedirs(tmp_path / "crawl")
    ids = write_warc(tmp_path / "crawl" / "a.warc.gz", pages[:250])
    ids += write_warc(tmp_path / "crawl" / "b.warc", pages[250:], gzip=False)
    blocked = tmp_path / "blocked.txt"
    blocked.write_text("site-3.example.com\nsite-40.example.com\n")

    pipeline = (Pipeline("web")
                .add_stage(WarcReader(str(tmp_path / "crawl"), blocksize=60_000))
                .add_stage(HtmlExtractor("resiliparse"))
                .add_stage(ScoreFilter(DomainBlocklistFilter(str(blocked))))
                .add_stage(ParquetWriter(str(tmp_path / "out"))))
    result = pipeline.run(StreamingExecutor(progress=False))
    out = pd.read_parquet(tmp_path / "out")

    assert result.partitions > 4
    assert out["warc_record_id"].is_unique
    assert set(out["warc_record_id"]) <= set(ids)
    blocked_hosts = ("site-3.example.com", "site-40.example.com")
    expected_blocked = sum(p.content_type == "text/html" and bool(p.sentences)
                           and p.url.split("/")[2] in blocked_hosts for p in pages)
    assert result.dropped == {
        "reader.warc_not_html": sum(p.content_type != "text/html" for p in pages),
        "html_extract.empty": sum(p.content_type == "text/html" and not p.sentences
                                  for p in pages),
        "domain_blocklist": expected_blocked,
    }
    assert len(out) + sum(result.dropped.values()) == len(pages)
    by_url = {p.url: p for p in pages}
    for url, text in zip(out["url"], out["text"], strict=True):
        assert all(sentence in text for sentence in by_url[url].sentences)


@pytest.mark.slow
@pytest.mark.parametrize("timeout", [None, 5.0], ids=["inline", "child"])
def test_a_page_the_extractor_raises_on_is_dropped_and_counted(timeout):
    pytest.importorskip("resiliparse", reason="the html extra is not installed")
    # Resiliparse refuses strings with lone surrogates (text decoded with surrogateescape).
    html = page("article_en.html").decode("utf-8")
    frame = pd.DataFrame({"url": ["a", "b", "c"],
                          "html": pd.Series([html, "<p>bad \udcff byte</p>", html],
                                            dtype=object)})
    stage = HtmlExtractor("resiliparse", timeout=timeout)
    stage.setup()
    out = Partition(frame).apply(stage.process)
    stage.teardown()
    assert out.frame["url"].tolist() == ["a", "c"]
    assert out.dropped == {"html_extract.error": 1}


@pytest.mark.slow
@pytest.mark.parametrize("timeout", [None, 5.0], ids=["inline", "child"])
def test_options_the_extractor_rejects_fail_the_run_not_every_page(timeout):
    pytest.importorskip("resiliparse", reason="the html extra is not installed")
    ds = pages_dataset([page("article_en.html")])
    stage = HtmlExtractor("resiliparse", timeout=timeout, options={"no_such_option": True})
    with pytest.raises((ValueError, RuntimeError), match="no_such_option"):
        run(stage, ds)
    stage.teardown()
