"""One config object per dedup algorithm, accepted by the algorithm, the workflow and the
pipeline stage, with the same results as the keyword parameters."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import write_jsonl

from curator_dask import DocumentDataset, JsonlReader, ParquetWriter, Pipeline
from curator_dask.dedup import (
    ExactDedupConfig,
    ExactDeduplicationWorkflow,
    ExactDuplicates,
    FuzzyDedupConfig,
    FuzzyDeduplicationWorkflow,
    FuzzyDuplicates,
)
from curator_dask.dedup.stages import ExactDedup, FuzzyDedup
from curator_dask.executors import LocalExecutor

BASE = "the quick brown fox jumps over the lazy dog and keeps on running far away " * 3
TEXTS = [BASE, BASE.replace("lazy", "LAZY", 1), "something else entirely, nothing alike",
         "alpha", "alpha", "beta", "alpha", BASE]


@pytest.fixture
def corpus(tmp_path):
    write_jsonl(tmp_path / "raw" / "a.jsonl",
                [{"id": i, "text": t} for i, t in enumerate(TEXTS)])
    return tmp_path


def kept(path) -> list[int]:
    return sorted(pd.read_parquet(path)["id"])


def test_exact_config_gives_the_same_kept_documents_at_every_entry_point(corpus):
    config = ExactDedupConfig(hash_method="md5", hash_partitions=2, removal_strategy="shuffle")
    ds = DocumentDataset.read_jsonl(str(corpus / "raw"))
    by_keywords = ExactDuplicates(hash_partitions=2, removal_strategy="shuffle",
                                  perform_removal=True)(ds)
    by_config = ExactDuplicates(config=config, perform_removal=True)(ds)
    want = sorted(by_keywords.df.compute()["id"])
    assert sorted(by_config.df.compute()["id"]) == want == [0, 1, 2, 3, 5]

    ExactDeduplicationWorkflow(str(corpus / "raw"), str(corpus / "wf"), str(corpus / "c1"),
                               assign_id=False, config=config).run()
    assert kept(corpus / "wf") == want

    Pipeline("exact").add_stage(JsonlReader(str(corpus / "raw"))).add_stage(
        ExactDedup(config=config)).add_stage(ParquetWriter(str(corpus / "pipe"))).run(
        LocalExecutor(cache_path=str(corpus / "c2")))
    assert kept(corpus / "pipe") == want
    # Each entry point exposes the config it runs with.
    assert ExactDedup(config=config).dedup.config == config
    assert ExactDeduplicationWorkflow("in", "out", "cache", config=config).dedup.config == config


def test_fuzzy_config_gives_the_same_groups_at_every_entry_point(corpus):
    config = FuzzyDedupConfig(char_ngrams=5, num_bands=10, minhashes_per_band=4)
    ds = DocumentDataset.read_jsonl(str(corpus / "raw"))
    by_keywords = FuzzyDuplicates(char_ngrams=5, num_bands=10, minhashes_per_band=4,
                                  perform_removal=True)(ds)
    want = sorted(by_keywords.df.compute()["id"])
    by_config = FuzzyDuplicates(config=config, perform_removal=True)(ds)
    assert sorted(by_config.df.compute()["id"]) == want
    assert 1 not in want and 0 in want  # the near duplicate goes, its original stays

    FuzzyDeduplicationWorkflow(str(corpus / "raw"), str(corpus / "c1"), str(corpus / "wf"),
                               perform_removal=True, config=config).run()
    assert kept(corpus / "wf") == want

    Pipeline("fuzzy").add_stage(JsonlReader(str(corpus / "raw"))).add_stage(
        FuzzyDedup(config=config)).add_stage(ParquetWriter(str(corpus / "pipe"))).run(
        LocalExecutor(cache_path=str(corpus / "c2")))
    assert kept(corpus / "pipe") == want
    assert FuzzyDedup(config=config).dedup.config == config


def test_a_config_and_differing_keywords_together_are_refused():
    with pytest.raises(ValueError, match="hash_method"):
        ExactDuplicates(hash_method="xxh3_128", config=ExactDedupConfig())
    with pytest.raises(ValueError, match="char_ngrams"):
        FuzzyDedup(char_ngrams=5, config=FuzzyDedupConfig())
    # Keywords left at their defaults are fine beside a config, and a mapping works too.
    assert ExactDedup(name="x", config={"on_null": "skip"}).dedup.on_null == "skip"


def test_bad_values_are_refused_once_with_the_choices():
    with pytest.raises(ValueError, match="on_null must be one of"):
        ExactDedupConfig(on_null="ignore")
    with pytest.raises(ValueError, match="jaccard_threshold"):
        FuzzyDedupConfig(jaccard_threshold=1.5)
    with pytest.raises(ValueError, match="removal_strategy"):
        FuzzyDeduplicationWorkflow("in", "cache", removal_strategy="nope")
