"""Token counts: per document as the tokenizer counts them, per stage and per source as
counters that reach the run's result and the HTML report."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from curator_dask import DocumentDataset, LocalExecutor, ParquetReader, ParquetWriter, Pipeline
from curator_dask.observe.report import write_report
from curator_dask.stages.filters import ScoreFilter, WordCountFilter
from curator_dask.testing.tokenizer import save_bpe_tokenizer
from curator_dask.training import CountTokens

tokenizers = pytest.importorskip("tokenizers", reason="counting tokens needs the tokenize extra")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return save_bpe_tokenizer(tmp_path_factory.mktemp("bpe"), vocab_size=600, limit=100)


def lengths(tokenizer_dir: str, texts, extra: int = 0) -> list[int]:
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    return [len(tokenizer.encode(t, add_special_tokens=False).ids) + extra for t in texts]


TEXTS = ["The quick brown fox.", "", "naïve café", "a " * 40, "Dask curates text at scale"]


def test_each_document_gets_its_count_and_the_stage_its_total(bpe):
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": TEXTS}), npartitions=2)
    counted = CountTokens(bpe, eos=True)(ds)
    expected = lengths(bpe, TEXTS, extra=1)
    assert counted.df.compute()["token_count"].tolist() == expected
    assert counted.counters() == {"count_tokens.tokens": sum(expected)}


def test_counts_by_source_and_by_stage_reach_the_result_and_the_report(tmp_path, bpe):
    frame = pd.DataFrame({"text": TEXTS * 4, "corpus": ["web", "books"] * 10})
    frame.to_parquet(tmp_path / "in.parquet")
    pipeline = (Pipeline("counts")
                .add_stage(ParquetReader(str(tmp_path / "in.parquet")))
                .add_stage(CountTokens(bpe, source_field="corpus", token_field=None))
                .add_stage(ScoreFilter(WordCountFilter(min_words=3)))
                .add_stage(CountTokens(bpe, source_field="corpus"))
                .add_stage(ParquetWriter(str(tmp_path / "out"))))
    result = pipeline.run(LocalExecutor(progress=False))

    frame["tokens"] = lengths(bpe, frame["text"])
    kept = frame[[len(t.split()) >= 3 for t in frame["text"]]]
    for stage, rows in (("count_tokens", frame), ("count_tokens_2", kept)):
        assert result.counters[f"{stage}.tokens"] == rows["tokens"].sum()
        for corpus, tokens in rows.groupby("corpus")["tokens"].sum().items():
            assert result.counters[f"{stage}.tokens.{corpus}"] == tokens
    written = pd.read_parquet(tmp_path / "out")
    assert written["token_count"].tolist() == kept["tokens"].tolist()
    with open(write_report(result, tmp_path / "report.html", stages=pipeline.stages)) as handle:
        report = handle.read()
    assert "count_tokens_2.tokens.books" in report
