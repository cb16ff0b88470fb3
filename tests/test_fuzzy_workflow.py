"""The fuzzy dedup workflow: files in, Parquet out, on a real cluster, resumable by phase."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import write_jsonl

from curator_dask import DocumentDataset
from curator_dask.dedup import FuzzyDedupConfig
from curator_dask.dedup.fuzzy import FuzzyDeduplicationWorkflow, FuzzyDuplicates, MinHash
from curator_dask.dedup.fuzzy import duplicates as duplicates_module
from curator_dask.dedup.removal import default_shuffle_method
from curator_dask.testing.fuzzy import planted_near_duplicates


@pytest.fixture(scope="module")
def corpus() -> pd.DataFrame:
    return planted_near_duplicates(60, variants=(0, 3), words=(200, 300),
                                   mutation_rates=(0.0, 0.003), seed=9)


@pytest.fixture
def raw(tmp_path, corpus):
    """Three JSONL files without ids; the workflow assigns them with AddId."""
    for f in range(3):
        write_jsonl(tmp_path / "raw" / f"part{f}.jsonl",
                    [{"text": t, "family": int(fam)}
                     for t, fam in zip(corpus["text"][f::3], corpus["family"][f::3], strict=True)])
    return tmp_path


def workflow(raw, **options) -> FuzzyDeduplicationWorkflow:
    return FuzzyDeduplicationWorkflow(
        input_path=str(raw / "raw"), cache_path=str(raw / "cache"),
        output_path=str(raw / "out"), perform_removal=options.pop("perform_removal", True),
        input_blocksize=options.pop("input_blocksize", 20_000), **options)


def expected_kept(raw, **options) -> list[int]:
    """The ids FuzzyDuplicates keeps in memory from the same input: lowest of each group."""
    w = workflow(raw, **options)
    ds = w.read()
    groups = FuzzyDuplicates(**options).identify(ds).df.compute()
    removed = set(groups.loc[groups["id"] != groups["group"], "id"])
    return sorted(set(ds.df["id"].compute()) - removed)


@pytest.mark.slow
def test_workflow_on_a_local_cluster_keeps_one_document_per_group(client, raw):
    assert default_shuffle_method() == "p2p"
    result = workflow(raw).run()
    out = pd.read_parquet(raw / "out")
    assert sorted(out["id"]) == expected_kept(raw)
    groups = pd.read_parquet(result.groups_path)
    assert result.kept_documents == len(out) == result.input_documents - result.duplicate_documents
    assert result.duplicate_groups == groups["group"].nunique()
    assert result.duplicate_documents == len(groups) - result.duplicate_groups > 0
    assert result.output.dropped == {"fuzzy_duplicate": result.duplicate_documents}
    # Every planted family keeps exactly one document: copies differ by a word or two,
    # similarity 0.85 or more, where LSH finds a pair at least 94% of the time and a
    # family of copies is connected through any of its pairs.
    assert out["family"].value_counts().max() == 1
    assert out["family"].nunique() == 60
    for phase in ("minhash", "lsh", "components", "removal"):
        assert (raw / "cache" / "fuzzy" / phase / "_COMPLETE.json").exists()

    again = workflow(raw).run()
    assert again.phases_from_cache == ["minhash", "lsh", "components", "removal"]
    assert (again.kept_documents, again.duplicate_groups) == (result.kept_documents,
                                                               result.duplicate_groups)


@pytest.mark.slow
def test_a_crash_in_components_resumes_after_lsh(raw, monkeypatch):
    want = expected_kept(raw)

    def crash(*args, **kwargs):
        raise RuntimeError("worker lost")

    monkeypatch.setattr(duplicates_module, "connected_components", crash)
    with pytest.raises(RuntimeError, match="worker lost"):
        workflow(raw).run()
    markers = sorted(p.parent.name for p in (raw / "cache" / "fuzzy").glob("*/_COMPLETE.json"))
    assert markers == ["lsh", "minhash"]
    monkeypatch.undo()

    # The rerun must not compute signatures again.
    monkeypatch.setattr(MinHash, "process", crash)
    result = workflow(raw).run()
    assert result.phases_from_cache == ["minhash", "lsh"]
    assert sorted(pd.read_parquet(raw / "out")["id"]) == want


@pytest.mark.slow
def test_a_crash_inside_lsh_redoes_only_the_unfinished_bands(raw, monkeypatch):
    from curator_dask.dedup.fuzzy.lsh import LSH

    want = expected_kept(raw)
    calls = []
    band_edges = LSH.band_edges

    def fail_on_third(self, signatures, bands):
        calls.append(bands)
        if len(calls) == 3:
            raise RuntimeError("worker lost")
        return band_edges(self, signatures, bands)

    monkeypatch.setattr(LSH, "band_edges", fail_on_third)
    with pytest.raises(RuntimeError):
        workflow(raw, perform_removal=False, bands_per_iteration=5).run()
    calls.clear()
    result = workflow(raw, perform_removal=False, bands_per_iteration=5).run()
    assert calls == [range(10, 15), range(15, 20)]
    assert result.phases_from_cache == ["minhash"]
    assert result.output is None
    assert result.kept_documents == len(want)


def test_a_corpus_whose_buckets_fit_memory_is_shuffled_in_one_iteration_of_all_bands(
        raw, monkeypatch):
    from curator_dask.dedup.fuzzy.lsh import LSH

    calls = []
    band_edges = LSH.band_edges

    def record(self, signatures, bands):
        calls.append(bands)
        return band_edges(self, signatures, bands)

    monkeypatch.setattr(LSH, "band_edges", record)
    result = workflow(raw, perform_removal=False).run()
    assert calls == [range(0, FuzzyDedupConfig().num_bands)]
    assert result.kept_documents == len(expected_kept(raw))


@pytest.mark.slow
def test_changed_parameters_or_input_are_not_taken_from_the_cache(raw, corpus):
    first = workflow(raw, perform_removal=False).run()
    # bands_per_iteration changes how LSH runs, not what it finds.
    regrouped = workflow(raw, perform_removal=False, bands_per_iteration=10).run()
    assert regrouped.phases_from_cache == ["minhash", "lsh", "components"]
    assert regrouped.duplicate_documents == first.duplicate_documents
    # The false-positive check reuses MinHash and LSH; another threshold reuses the scores.
    checked = workflow(raw, perform_removal=False, false_positive_check=True).run()
    assert checked.phases_from_cache == ["minhash", "lsh"]
    scored = pd.read_parquet(raw / "cache" / "fuzzy" / "jaccard")
    assert (scored["jaccard"] < 0.8).sum() == checked.false_positive_pairs
    stricter = workflow(raw, perform_removal=False, false_positive_check=True,
                        jaccard_threshold=0.95).run()
    assert stricter.phases_from_cache == ["minhash", "lsh", "jaccard"]
    assert stricter.false_positive_pairs == (scored["jaccard"] < 0.95).sum()
    assert stricter.duplicate_documents <= checked.duplicate_documents
    other_seed = workflow(raw, perform_removal=False, seed=1).run()
    assert other_seed.phases_from_cache == []
    write_jsonl(raw / "raw" / "part3.jsonl", [{"text": "one more document", "family": -1}])
    grown = workflow(raw, perform_removal=False, seed=1).run()
    assert grown.phases_from_cache == [] and grown.input_documents == len(corpus) + 1


@pytest.mark.slow
def test_an_interrupted_marker_is_ignored(raw):
    workflow(raw, perform_removal=False).run()
    marker = raw / "cache" / "fuzzy" / "components" / "_COMPLETE.json"
    assert json.loads(marker.read_text())["stats"]["groups"] > 0
    marker.unlink()
    assert workflow(raw, perform_removal=False).run().phases_from_cache == ["minhash", "lsh"]


def test_removal_needs_an_output_path(raw):
    with pytest.raises(ValueError, match="output_path"):
        FuzzyDeduplicationWorkflow(str(raw / "raw"), str(raw / "cache"), perform_removal=True)


def test_string_ids_are_refused_with_the_fix(raw):
    ds = DocumentDataset.from_pandas(pd.DataFrame({"id": ["a", "b"], "text": ["x y z", "x y z"]}))
    with pytest.raises(TypeError, match="AddId"):
        FuzzyDuplicates(char_ngrams=3).identify(ds)
