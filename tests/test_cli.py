"""The curator-dask command: the demo job end to end, on its own local cluster."""

from __future__ import annotations

import gzip
import json
from importlib.resources import files

import pandas as pd
import pytest

from curator_dask.cli.main import main


def test_demo_curates_the_bundled_sample(tmp_path, capsys):
    assert main(["demo", "--output", str(tmp_path / "demo"), "--workers", "2"]) == 0
    printed = capsys.readouterr().out
    sample = gzip.decompress(
        files("curator_dask.data").joinpath("python-docs-sample.jsonl.gz").read_bytes())
    n_docs = len(sample.splitlines())
    out = pd.read_parquet(tmp_path / "demo" / "curated")
    assert len(out) == n_docs
    assert out["id"].is_unique
    assert (out["word_count"] > 0).all()
    assert not out["text"].str.contains("  ").any()
    first = json.loads(sample.splitlines()[0])
    assert first["source"] in set(out["source"])
    for stage in ("read_jsonl", "add_id", "normalize_whitespace", "to_parquet"):
        assert stage in printed
    assert f"{n_docs:,}" in printed


def test_usage_errors_exit_with_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["no-such-command"])
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
