"""Common Crawl listings, reading in place over HTTP, and downloads that resume."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

pytest.importorskip("fastwarc", reason="the warc extra (fastwarc) is not installed")
pytest.importorskip("aiohttp", reason="fsspec's HTTP filesystem needs aiohttp (warc extra)")
pytest.importorskip("warcio", reason="warcio writes the test WARC files (test extra)")

from http_files import serve_directory

from curator_dask.download.common_crawl import (
    PARTIAL_SUFFIX,
    download_warc,
    read_common_crawl,
    warc_paths,
)
from curator_dask.testing.web import synthetic_pages, write_warc

SEGMENT = "crawl-data/CC-TEST-2024-01/segments/1700000000000.0/warc"


@pytest.fixture
def crawl(tmp_path):
    """Three WARC files laid out as on Common Crawl's endpoint, and their warc.paths.gz."""
    root = tmp_path / "site"
    os.makedirs(root / SEGMENT)
    ids, names = [], []
    for k in range(3):
        name = f"{SEGMENT}/CC-TEST-{k:05d}.warc.gz"
        pages = synthetic_pages(150, seed=k, non_html_every=10, paragraphs=(2, 8))
        file_ids = write_warc(root / name, pages)
        ids += [i for i, p in zip(file_ids, pages, strict=True) if p.content_type == "text/html"]
        names.append(name)
    listing = root / "crawl-data/CC-TEST-2024-01/warc.paths.gz"
    listing.write_bytes(gzip.compress(("\n".join(names) + "\n").encode()))
    return root, names, sorted(ids)


def test_warc_paths_joins_the_listing_to_the_base_url(crawl):
    root, names, _ = crawl
    listing = str(root / "crawl-data/CC-TEST-2024-01/warc.paths.gz")
    assert warc_paths(listing) == [f"https://data.commoncrawl.org/{n}" for n in names]
    assert warc_paths(listing, base_url="s3://commoncrawl", limit=2) == \
        [f"s3://commoncrawl/{n}" for n in names[:2]]


def test_a_crawl_is_read_in_place_over_http(crawl):
    root, _, ids = crawl
    with serve_directory(root) as server:
        listing = f"{server.url}/crawl-data/CC-TEST-2024-01/warc.paths.gz"
        ds = read_common_crawl(listing, base_url=server.url, blocksize=100_000)
        df = ds.df.compute(scheduler="sync")
    assert ds.npartitions > 3
    assert sorted(df["warc_record_id"]) == ids


def test_an_interrupted_download_resumes_where_it_stopped(crawl, tmp_path):
    root, names, ids = crawl
    target = tmp_path / "cc"
    chunk = 32 * 1024
    size = os.path.getsize(root / names[1])
    with serve_directory(root) as server:
        urls = [f"{server.url}/{n}" for n in names]
        server.cut_after[f"/{names[1]}"] = size // 2
        with pytest.raises(OSError, match="a rerun resumes"):
            download_warc(urls, target, chunk_size=chunk, retries=0)
        partial = target / (names[1] + PARTIAL_SUFFIX)
        have = partial.stat().st_size
        assert 0 < have < size
        assert (target / names[0]).read_bytes() == (root / names[0]).read_bytes()
        assert not (target / names[1]).exists()

        server.log.clear()
        local = download_warc(urls, target, chunk_size=chunk)
        second = [r for r in server.log if r.method == "GET" and r.path == f"/{names[1]}"]

    assert local == [str(target / n) for n in names]
    for name in names:
        assert (target / name).read_bytes() == (root / name).read_bytes()
    assert not partial.exists()
    # The second run asked only for the bytes the first did not get.
    assert second[0].range.startswith(f"bytes={have}-")
    assert sum(r.sent for r in second) == size - have
    from curator_dask import DocumentDataset

    df = DocumentDataset.read_warc(local).df.compute(scheduler="sync")
    assert sorted(df["warc_record_id"]) == ids


@pytest.mark.slow
def test_a_dropped_connection_is_retried_within_one_call(crawl, tmp_path):
    root, names, _ = crawl
    size = os.path.getsize(root / names[0])
    with serve_directory(root) as server:
        server.cut_after[f"/{names[0]}"] = size // 3
        (path,) = download_warc([f"{server.url}/{names[0]}"], tmp_path / "cc",
                                chunk_size=16 * 1024, retries=2)
        sent = server.sent(f"/{names[0]}")
    assert Path(path).read_bytes() == (root / names[0]).read_bytes()
    assert sent < size + 16 * 1024  # resumed, not started over


def test_a_different_file_in_the_way_is_not_overwritten(crawl, tmp_path):
    root, names, _ = crawl
    target = tmp_path / "cc" / names[0]
    os.makedirs(target.parent)
    target.write_bytes(b"someone else's file")
    with serve_directory(root) as server, pytest.raises(FileExistsError, match="Move it away"):
        download_warc([f"{server.url}/{names[0]}"], tmp_path / "cc")
    assert target.read_bytes() == b"someone else's file"


def test_read_common_crawl_can_download_first(crawl, tmp_path):
    root, _, ids = crawl
    with serve_directory(root) as server:
        ds = read_common_crawl(f"{server.url}/crawl-data/CC-TEST-2024-01/warc.paths.gz",
                               base_url=server.url, download_dir=str(tmp_path / "cc"), limit=2)
    df = ds.df.compute(scheduler="sync")
    assert len(df) == len(ids) * 2 // 3
    assert set(df["warc_record_id"]) < set(ids)
