"""One config object per dedup algorithm, accepted by the algorithm, the workflow, the
pipeline stage and the command, with the same results as the keyword parameters; each
option is declared once, in the config."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import dask
import numpy as np
import pandas as pd
import pytest
from conftest import write_jsonl

from curator_dask import DocumentDataset, JsonlReader, ParquetWriter, Pipeline
from curator_dask.cli.main import EXIT_USAGE, main
from curator_dask.dedup import (
    ExactDedupConfig,
    ExactDeduplicationWorkflow,
    ExactDuplicates,
    FuzzyDedupConfig,
    FuzzyDeduplicationWorkflow,
    FuzzyDuplicates,
    SemanticDedupConfig,
    SemanticDeduplicationWorkflow,
    SemanticDuplicates,
)
from curator_dask.dedup.stages import ExactDedup, FuzzyDedup, SemanticDedup
from curator_dask.executors import LocalExecutor

#: Each algorithm's config and its entry points: in memory, on files, in a pipeline.
ENTRY_POINTS = {
    ExactDedupConfig: (ExactDuplicates, ExactDeduplicationWorkflow, ExactDedup),
    FuzzyDedupConfig: (FuzzyDuplicates, FuzzyDeduplicationWorkflow, FuzzyDedup),
    SemanticDedupConfig: (SemanticDuplicates, SemanticDeduplicationWorkflow, SemanticDedup),
}

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


@pytest.mark.parametrize("config_cls", list(ENTRY_POINTS), ids=lambda c: c.__name__)
def test_each_option_is_declared_once_in_the_config_and_shown_by_every_entry_point(config_cls):
    hints = typing.get_type_hints(config_cls)
    for entry in ENTRY_POINTS[config_cls]:
        own = inspect.signature(inspect.unwrap(entry.__init__)).parameters
        fields = {f.name: f for f in dataclasses.fields(config_cls)}
        # The constructor's own code declares only what differs between entry points...
        assert sorted(set(own) & set(fields)) == [], entry.__name__
        # ...and the signature users see (help, --help, pipeline files) shows every field
        # with the config's default and type.
        shown = inspect.signature(entry).parameters
        for name, field in fields.items():
            assert shown[name].default == field.default, (entry.__name__, name)
            assert shown[name].annotation == hints[name], (entry.__name__, name)
        assert "config" in shown


def embedded_corpus(path) -> list[dict]:
    """Documents with 3-d embeddings: two near-identical pairs and two loners."""
    vectors = [[1, 0, 0], [0.99, 0.1, 0], [0, 0.7, 0.7], [0, 0, 1], [0, 0.05, 1], [1, 1, 0]]
    rows = [{"id": i, "text": f"doc {i}", "embeddings": v} for i, v in enumerate(vectors)]
    write_jsonl(path, rows)
    return rows


@pytest.mark.slow
def test_semantic_config_gives_the_same_kept_documents_at_every_entry_point(tmp_path):
    config = SemanticDedupConfig(n_clusters=2, eps_thresholds=(0.02,), eps_to_extract=0.02,
                                 device="cpu")
    rows = embedded_corpus(tmp_path / "raw" / "a.jsonl")
    frame = pd.DataFrame(rows)
    frame["embeddings"] = [np.array(v, np.float32) for v in frame["embeddings"]]
    with dask.config.set({"dataframe.convert-string": False}):  # keep the vectors' column
        ds = DocumentDataset.from_pandas(frame, npartitions=2)
    by_keywords = SemanticDuplicates(n_clusters=2, eps_thresholds=[0.02], eps_to_extract=0.02,
                                     device="cpu")
    want = sorted(by_keywords(ds, str(tmp_path / "c0")).df.compute()["id"])
    by_config = SemanticDuplicates(config=config)
    assert by_config.config == by_keywords.config == config
    assert sorted(by_config(ds, str(tmp_path / "c1")).df.compute()["id"]) == want
    assert 1 not in want and 4 not in want and {0, 3} <= set(want)

    SemanticDeduplicationWorkflow(str(tmp_path / "raw"), str(tmp_path / "c2"),
                                  str(tmp_path / "wf"), perform_removal=True,
                                  config=config).run()
    assert kept(tmp_path / "wf") == want

    Pipeline("semantic").add_stage(JsonlReader(str(tmp_path / "raw"))).add_stage(
        SemanticDedup(config=config)).add_stage(ParquetWriter(str(tmp_path / "pipe"))).run(
        LocalExecutor(cache_path=str(tmp_path / "c3"), progress=False))
    assert kept(tmp_path / "pipe") == want


def test_semantic_values_are_checked_once_in_the_config():
    with pytest.raises(ValueError, match=r"eps_to_extract=0\.5 must be one of"):
        SemanticDeduplicationWorkflow("in", "cache", eps_to_extract=0.5)
    with pytest.raises(ValueError, match="which_to_keep must be one of"):
        SemanticDedup(which_to_keep="first")
    with pytest.raises(ValueError, match="n_clusters must be a positive integer"):
        SemanticDedupConfig(n_clusters=0)
    # A list given for the default tuple is the default, beside a config too.
    assert SemanticDedup(eps_thresholds=[0.01, 0.001],
                         config={"n_clusters": 3}).dedup.n_clusters == 3


def test_the_command_takes_a_config_and_refuses_one_beside_differing_options(tmp_path, capsys):
    code = main(["dedup", "semantic", "--input", str(tmp_path / "raw"), "--cache",
                 str(tmp_path / "cache"), "--config", "{n_clusters: 3}", "--n-clusters", "5"])
    assert code == EXIT_USAGE
    assert "--n-clusters 5" in capsys.readouterr().err
