"""examples/web.yaml: WARC files to curated Parquet, every record accounted for."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("fastwarc", reason="WARC reading needs the `warc` extra (fastwarc)")
pytest.importorskip("trafilatura", reason="HTML extraction needs the `html` extra")
pytest.importorskip("warcio", reason="writing test WARC files needs warcio (the `test` extra)")

from curator_dask.cli.config import load_config
from curator_dask.executors import LocalExecutor
from curator_dask.testing.web import synthetic_pages, write_warc

EXAMPLE = Path(__file__).parent.parent / "examples" / "web.yaml"


def test_the_checked_example_file_names_the_readme_stages():
    config = load_config(EXAMPLE)
    names = [s.name for s in config.pipeline.stages]
    assert names[0] == "read_warc" and names[-1] == "write_parquet"
    for name in ("html_extract", "url_keywords", "domain_blocklist", "language_id",
                 "gopher_quality", "c4_quality", "fineweb_quality", "exact_dedup",
                 "fuzzy_dedup"):
        assert name in names


@pytest.mark.slow
def test_the_web_example_takes_warc_files_to_curated_parquet(tmp_path, monkeypatch):
    pages = synthetic_pages(60, empty_every=20, non_html_every=15)
    (tmp_path / "web-input").mkdir()
    write_warc(tmp_path / "web-input" / "a.warc.gz", pages)
    # A second crawl of half the pages: their texts are exact duplicates.
    write_warc(tmp_path / "web-input" / "b.warc.gz", pages[:30])
    html = [p for p in pages if p.content_type == "text/html"]
    records = len(pages) + 30
    monkeypatch.chdir(tmp_path)
    config = load_config(EXAMPLE)
    config.check_inputs()
    result = config.pipeline.run(LocalExecutor(progress=False))

    out = pd.read_parquet(tmp_path / "web-output" / "curated")
    assert result.rows == len(out) > 0
    # Every record is in the output or counted under the reason it left.
    assert len(out) + sum(result.dropped.values()) == records
    assert result.dropped["reader.warc_not_html"] == records - len(html) - sum(
        p.content_type == "text/html" for p in pages[:30])
    assert result.dropped.get("exact_duplicate", 0) > 0
    # One document per page: the second crawl's copies are gone.
    assert out["url"].is_unique and set(out["url"]) <= {p.url for p in html}
    assert out["id"].is_unique
