"""Reading WARC files: every HTML response exactly once, however the files are split."""

from __future__ import annotations

import gzip
import io
import zlib

import fsspec
import pandas as pd
import pytest

pytest.importorskip("fastwarc", reason="the warc extra (fastwarc) is not installed")
pytest.importorskip("warcio", reason="warcio writes the test WARC files (test extra)")

import itertools

from http_files import serve_directory
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from curator_dask import DocumentDataset, WarcReader
from curator_dask.io.files import list_files
from curator_dask.io.planner import FileSlice, PartitionSpec
from curator_dask.io.warc import (
    NOT_HTML_REASON,
    WARC_EXTENSIONS,
    MalformedWarcError,
    read_warc_partition,
)
from curator_dask.testing.web import synthetic_pages, write_warc

PAGES = synthetic_pages(240, seed=3, empty_every=11, non_html_every=7, latin1_every=5,
                        paragraphs=(1, 6))
HTML = [p.content_type == "text/html" for p in PAGES]
N_HTML, N_OTHER = sum(HTML), len(PAGES) - sum(HTML)


def _html_ids(ids):
    return sorted(i for i, html in zip(ids, HTML, strict=True) if html)


def _read(path, **kwargs):
    ds = DocumentDataset.read_warc(path, **kwargs)
    return ds, ds.df.compute(scheduler="sync")


@pytest.mark.parametrize("compressed", [True, False], ids=["gzip", "plain"])
@pytest.mark.parametrize("blocksize", [9_999, 60_000, 10**9])
def test_every_html_response_is_read_exactly_once_for_any_blocksize(tmp_path, compressed,
                                                                    blocksize):
    path = tmp_path / ("crawl.warc.gz" if compressed else "crawl.warc")
    ids = write_warc(path, PAGES, gzip=compressed)
    ds, df = _read(str(path), blocksize=blocksize)
    if blocksize < path.stat().st_size:
        assert ds.npartitions > 1
    assert sorted(df["warc_record_id"]) == _html_ids(ids)
    assert ds.dropped_counts() == {NOT_HTML_REASON: N_OTHER}


def test_columns_hold_the_record_headers_and_the_raw_payload(tmp_path):
    path = tmp_path / "crawl.warc.gz"
    write_warc(path, PAGES)
    _, df = _read(str(path))
    assert list(df.columns) == ["url", "warc_date", "warc_record_id", "content_type",
                                "charset", "html"]
    html_pages = [p for p in PAGES if p.content_type == "text/html"]
    assert df["url"].tolist() == [p.url for p in html_pages]
    assert df["html"].tolist() == [p.payload for p in html_pages]
    assert [None if pd.isna(c) else c for c in df["charset"]] == [p.charset for p in html_pages]
    assert set(df["content_type"]) == {"text/html"}
    assert pd.to_datetime(df["warc_date"], utc=True).notna().all()


def test_records_that_span_range_boundaries_are_read_by_the_range_they_start_in(tmp_path):
    path = tmp_path / "crawl.warc.gz"
    ids = write_warc(path, PAGES)
    fs, files = list_files(str(path), WARC_EXTENSIONS)
    size = files[0].size
    cuts = [*list(range(0, size, 1500)), None]
    per_range = [
        read_warc_partition(PartitionSpec(i, (FileSlice(files[0], start, end),)), fs)
        for i, (start, end) in enumerate(itertools.pairwise(cuts))
    ]
    read = [i for part in per_range for i in part["warc_record_id"]]
    assert sorted(read) == _html_ids(ids)
    # The cuts fall inside records: most of them are not where a gzip member starts.
    data, members, pos = path.read_bytes(), set(), 0
    while pos < len(data):
        members.add(pos)
        inflater = zlib.decompressobj(31)
        inflater.decompress(data[pos:])
        pos = len(data) - len(inflater.unused_data)
    assert sum(c not in members for c in cuts[1:-1]) > len(cuts) // 2


def test_a_payload_that_quotes_a_warc_header_does_not_start_a_record(tmp_path):
    fake = (b"<html><body><pre>\r\n\r\nWARC/1.0\r\nWARC-Type: response\r\n"
            b"Content-Length: 5\r\n\r\nhello</pre><p>About the WARC format.</p></body></html>")
    pages = list(PAGES[:20])
    pages[7] = type(pages[7])(pages[7].url, "text/html", "utf-8", fake, ())
    path = tmp_path / "quoting.warc"
    ids = write_warc(path, pages, gzip=False)
    start = path.read_bytes().index(b"WARC/1.0\r\nWARC-Type: response\r\nContent-Length: 5")
    html = [p.content_type == "text/html" for p in pages]
    expected = sorted(i for i, h in zip(ids, html, strict=True) if h)
    for blocksize in (start - 3, start, start + 1, 777):
        _, df = _read(str(path), blocksize=blocksize)
        assert sorted(df["warc_record_id"]) == expected


def test_a_file_gzipped_as_one_stream_is_read_whole(tmp_path):
    plain = tmp_path / "crawl.warc"
    ids = write_warc(plain, PAGES, gzip=False)
    whole = tmp_path / "whole.warc.gz"
    whole.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    ds, df = _read(str(whole), blocksize=2000)
    assert ds.npartitions == 1
    assert sorted(df["warc_record_id"]) == _html_ids(ids)


def test_members_holding_several_records_are_read_once_even_when_split(tmp_path):
    plain = tmp_path / "one.warc"
    ids = write_warc(plain, PAGES, gzip=False, requests=False)
    data = plain.read_bytes()
    starts = [i for i in range(len(data)) if data.startswith(b"WARC/1.0\r\n", i)]
    # Three records per gzip member: members that begin mid-file, records inside them
    # that no resync can find.
    bounds = [*starts[::3], len(data)]
    packed = b"".join(gzip.compress(data[a:b]) for a, b in itertools.pairwise(bounds))
    path = tmp_path / "packed.warc.gz"
    path.write_bytes(packed)
    fs, files = list_files(str(path), WARC_EXTENSIONS)
    for step in (700, 2500, 9000):
        cuts = [*list(range(0, len(packed), step)), None]
        read = [i for k, (a, b) in enumerate(itertools.pairwise(cuts))
                for i in read_warc_partition(PartitionSpec(k, (FileSlice(files[0], a, b),)),
                                             fs)["warc_record_id"]]
        assert sorted(read) == _html_ids(ids)


def test_several_files_on_an_fsspec_memory_filesystem(tmp_path):
    fs = fsspec.filesystem("memory")
    expected = []
    for k in range(3):
        local = tmp_path / f"{k}.warc.gz"
        expected += _html_ids(write_warc(local, PAGES))
        fs.pipe(f"/warc-memory/{k}.warc.gz", local.read_bytes())
    ds, df = _read("memory:///warc-memory", blocksize=20_000, add_filename=True)
    assert sorted(df["warc_record_id"]) == sorted(expected)
    assert set(df["file_name"]) == {"0.warc.gz", "1.warc.gz", "2.warc.gz"}
    assert ds.dropped_counts() == {NOT_HTML_REASON: 3 * N_OTHER}


def test_a_warc_served_over_http_is_read_in_byte_ranges(tmp_path):
    pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp")
    ids = write_warc(tmp_path / "crawl.warc.gz", PAGES)
    with serve_directory(tmp_path) as server:
        ds, df = _read(f"{server.url}/crawl.warc.gz", blocksize=50_000)
        ranged = [r for r in server.log if r.method == "GET" and r.status == 206]
    assert ds.npartitions > 1
    assert sorted(df["warc_record_id"]) == _html_ids(ids)
    assert ranged, "the partitions read byte ranges, not the whole file each"


def test_content_types_chooses_the_payloads_kept(tmp_path):
    path = tmp_path / "crawl.warc.gz"
    write_warc(path, PAGES)
    ds, df = _read(str(path), content_types=["text/html", "image/png"])
    assert len(df) == len(PAGES)
    assert ds.dropped_counts() == {}


def test_a_gzip_content_encoded_payload_is_decoded(tmp_path):
    html = b"<html><body><p>compressed on the wire</p></body></html>"
    path = tmp_path / "encoded.warc.gz"
    with open(path, "wb") as out:
        writer = WARCWriter(out, gzip=True)
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html"),
                                              ("Content-Encoding", "gzip")],
                                   protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(
            "http://example.com/", "response", payload=io.BytesIO(gzip.compress(html)),
            http_headers=headers))
    _, df = _read(str(path))
    assert df["html"].tolist() == [html]


def test_bytes_that_are_not_warc_name_the_file(tmp_path):
    path = tmp_path / "broken.warc"
    path.write_bytes(b"this is not a web archive\r\n" * 20)
    with pytest.raises(MalformedWarcError, match=r"broken\.warc"):
        _read(str(path))


def test_a_corrupt_gzip_member_names_the_file(tmp_path):
    path = tmp_path / "crawl.warc.gz"
    write_warc(path, PAGES[:5])
    data = bytearray(path.read_bytes())
    data[40:60] = b"\x00" * 20
    path.write_bytes(bytes(data))
    with pytest.raises(MalformedWarcError, match=r"crawl\.warc\.gz: .*decompression"):
        _read(str(path))


def test_warc_reader_stage_plans_the_same_dataset(tmp_path):
    write_warc(tmp_path / "crawl.warc.gz", PAGES)
    reader = WarcReader(str(tmp_path), blocksize=20_000)
    ds = reader.dataset()
    assert ds.plan is not None and len(ds.plan) == ds.npartitions > 1
    parts = [reader.source().reader(spec) for spec in ds.plan]
    assert sum(len(p) for p in parts) == N_HTML


def test_a_pipeline_file_reads_warc_and_names_the_web_stages(tmp_path):
    from curator_dask.cli.config import load_config_text

    (tmp_path / "blocked.txt").write_text("example.com\n")
    config = load_config_text(f"""
reader: {{type: warc, path: {tmp_path}, blocksize: 64MiB}}
stages:
  - HtmlExtractor: {{algorithm: resiliparse, timeout: 5.0}}
  - DomainBlocklistFilter: {{blocklist_file: {tmp_path / "blocked.txt"}}}
  - UrlKeywordFilter: {{banned_words: [casino]}}
writer: {{type: parquet, path: {tmp_path / "out"}}}
""", source="web.yaml")
    stages = config.pipeline.stages
    assert [s.name for s in stages] == ["read_warc", "html_extract", "domain_blocklist",
                                              "url_keywords", "write_parquet"]
    assert isinstance(stages[0], WarcReader) and stages[0].options["blocksize"] == "64MiB"
    assert stages[2].text_field == "url" and stages[3].text_field == "url"


def test_two_readers_of_one_in_memory_file_keep_their_own_positions():
    # fsspec's memory filesystem returns one shared file object per path; readers on
    # threads (and a reader's resync check) must not move each other's position.
    from curator_dask.io.files import open_input

    fs = fsspec.filesystem("memory")
    fs.pipe("/open-input/a.bin", b"0123456789")
    first, second = open_input(fs, "/open-input/a.bin"), open_input(fs, "/open-input/a.bin")
    assert first.read(4) == b"0123"
    assert second.read(2) == b"01"
    assert first.read(2) == b"45"
