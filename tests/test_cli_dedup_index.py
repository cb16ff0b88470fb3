"""``curator-dask dedup index build|query|append`` and ``curator-dask dedup lines``."""

from __future__ import annotations

import json

import dask
import pandas as pd
import pytest
from conftest import write_jsonl

from curator_dask import AddId, DocumentDataset
from curator_dask.cli.main import main
from curator_dask.dedup import FuzzyDedupConfig, FuzzyDedupIndex
from curator_dask.testing.fuzzy import planted_near_duplicates


def printed_rows(out: str) -> dict[str, str]:
    rows = {}
    for line in out.splitlines():
        cells = [c for c in line.strip().split("  ") if c.strip()]
        if len(cells) >= 2:
            rows[cells[0].strip()] = cells[-1].strip()
    return rows


@pytest.mark.slow
def test_exact_index_build_append_and_a_rerun(cluster, tmp_path, capsys):
    write_jsonl(tmp_path / "m1" / "a.jsonl", [{"text": t} for t in ["a", "b", "a"]])
    write_jsonl(tmp_path / "m2" / "a.jsonl", [{"text": t} for t in ["b", "c", "c", "d"]])
    at = ["--scheduler-address", cluster.scheduler_address]
    index = ["--index", str(tmp_path / "index")]
    assert main(["dedup", "index", "build", *index, "--input", str(tmp_path / "m1"), *at]) == 0
    assert printed_rows(capsys.readouterr().out)["generation"] == "1"
    append = ["dedup", "index", "append", *index, "--input", str(tmp_path / "m2"), *at]
    assert main([*append, "--output", str(tmp_path / "out" / "m2")]) == 0
    rows = printed_rows(capsys.readouterr().out)
    assert (rows["removed: exact_duplicate_of_index"], rows["removed: exact_duplicate"],
            rows["generation"]) == ("1", "1", "2")
    assert sorted(pd.read_parquet(tmp_path / "out" / "m2")["text"]) == ["c", "d"]
    # A rerun (the first one's append done, its output lost) keeps the same and adds nothing.
    assert main([*append, "--output", str(tmp_path / "out" / "again")]) == 0
    rows = printed_rows(capsys.readouterr().out)
    assert (rows["keys added"], rows["generation"]) == ("0 (a rerun)", "2")
    assert sorted(pd.read_parquet(tmp_path / "out" / "again")["text"]) == ["c", "d"]
    # query changes nothing.
    query = ["dedup", "index", "query", *index, "--input", str(tmp_path / "m2"), *at,
             "--output", str(tmp_path / "out" / "q")]
    assert main(query) == 0
    assert json.loads((tmp_path / "index" / "INDEX.json").read_text())["generation"] == 2


@pytest.mark.slow
def test_fuzzy_index_from_a_fuzzy_runs_cache(cluster, tmp_path, capsys):
    corpus = planted_near_duplicates(20, variants=(1, 2), words=(40, 80), seed=3)
    base, batch = corpus.iloc[:30], corpus.iloc[30:]
    write_jsonl(tmp_path / "base" / "a.jsonl", base[["text"]].to_dict("records"))
    write_jsonl(tmp_path / "batch" / "a.jsonl", batch[["text"]].to_dict("records"))
    at = ["--scheduler-address", cluster.scheduler_address]
    assert main(["dedup", "fuzzy", "--input", str(tmp_path / "base"), "--cache",
                 str(tmp_path / "cache"), "--char-ngrams", "5", *at]) == 0
    assert main(["dedup", "index", "build", "--index", str(tmp_path / "index"),
                 "--from-cache", str(tmp_path / "cache"), *at]) == 0
    capsys.readouterr()
    assert main(["dedup", "index", "append", "--index", str(tmp_path / "index"), "--input",
                 str(tmp_path / "batch"), "--output", str(tmp_path / "out"), *at]) == 0
    rows = printed_rows(capsys.readouterr().out)
    # The same as an index built from the base corpus itself with the run's parameters.
    config = FuzzyDedupConfig(char_ngrams=5)
    reference = FuzzyDedupIndex(str(tmp_path / "reference"), config=config)
    with dask.config.set(scheduler="sync"):
        reference.query(AddId()(DocumentDataset.read_jsonl(str(tmp_path / "base")))).append()
        expected = reference.query(AddId()(DocumentDataset.read_jsonl(str(tmp_path / "batch"))))
        kept = sorted(expected.kept.df.compute()["text"])
    assert int(rows["removed: fuzzy_duplicate_of_index"]) == \
        expected.removed["fuzzy_duplicate_of_index"] > 0
    assert sorted(pd.read_parquet(tmp_path / "out")["text"]) == kept


@pytest.mark.slow
def test_dedup_lines_writes_documents_without_repeated_lines(cluster, tmp_path, capsys):
    rows = [{"text": f"Accept cookies\nstory {i}\nAll rights reserved"} for i in range(6)]
    rows.append({"text": "Accept cookies\n"})
    write_jsonl(tmp_path / "in" / "a.jsonl", rows)
    assert main(["dedup", "lines", "--input", str(tmp_path / "in"), "--output",
                 str(tmp_path / "out"), "--scheduler-address", cluster.scheduler_address]) == 0
    printed = printed_rows(capsys.readouterr().out)
    assert (printed["lines removed"], printed["documents emptied"],
            printed["documents written"]) == ("11", "1", "6")
    out = pd.read_parquet(tmp_path / "out")
    assert sorted(out["text"])[:2] == ["Accept cookies\nstory 0\nAll rights reserved",
                                       "story 1\n"]


def test_index_usage_errors_exit_with_2(tmp_path, capsys):
    assert main(["dedup", "index", "query", "--index", str(tmp_path / "none"), "--input",
                 str(tmp_path), "--output", str(tmp_path / "out")]) == 2
    assert "no dedup index at" in capsys.readouterr().err
    assert main(["dedup", "index", "build", "--index", str(tmp_path / "i")]) == 2
    assert "--input" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["dedup", "lines", "--input", "x", "--output", "y", "--unit", "word"])
    assert exit_.value.code == 2


@pytest.mark.parametrize("argv", [["dedup", "index"], ["dedup", "index", "build"],
                                  ["dedup", "index", "query"], ["dedup", "index", "append"],
                                  ["dedup", "lines"]])
def test_every_index_command_has_help(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: curator-dask {' '.join(argv)}")
