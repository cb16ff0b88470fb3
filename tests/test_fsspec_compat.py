"""The one use of fsspec's private API (curator_dask/_fsspec.py), on real filesystems: when
an fsspec release changes it, this test names what changed."""

from __future__ import annotations

import os

import fsspec
from fsspec.implementations.local import LocalFileSystem

from curator_dask._fsspec import strip_protocol


def test_a_local_path_is_absolute_without_its_protocol_or_trailing_slash(tmp_path,
                                                                         monkeypatch):
    fs = LocalFileSystem()
    monkeypatch.chdir(tmp_path)
    assert strip_protocol(fs, f"file://{tmp_path}/raw/") == f"{tmp_path}/raw"
    assert strip_protocol(fs, f"{tmp_path}/raw") == f"{tmp_path}/raw"
    assert strip_protocol(fs, "raw/a.jsonl") == os.path.join(str(tmp_path), "raw", "a.jsonl")
    # What the filesystem's own calls take: the stripped path lists the file.
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "a.jsonl").write_text("{}\n")
    assert fs.ls(strip_protocol(fs, "file://raw/"), detail=False) == \
        [f"{tmp_path}/raw/a.jsonl"]


def test_a_memory_url_is_its_path():
    fs = fsspec.filesystem("memory")
    fs.pipe("/corpus/raw/a.jsonl", b"{}\n")
    try:
        assert strip_protocol(fs, "memory://corpus/raw/") == "/corpus/raw"
        assert strip_protocol(fs, "memory:///corpus/raw") == "/corpus/raw"
        assert fs.ls(strip_protocol(fs, "memory://corpus/raw"), detail=False) == \
            ["/corpus/raw/a.jsonl"]
    finally:
        fs.rm("/corpus", recursive=True)


def test_an_http_url_keeps_its_protocol():
    fs = fsspec.filesystem("https")
    url = "https://data.example.org/crawl/a.warc.gz"
    assert strip_protocol(fs, url) == url
