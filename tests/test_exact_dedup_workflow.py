"""The exact dedup workflow on a real 2-process LocalCluster: files in, Parquet out, resume."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import write_jsonl

from curator_dask import DocumentDataset
from curator_dask.dedup import ExactDeduplicationWorkflow, ExactDuplicates
from curator_dask.dedup.removal import default_shuffle_method

TEXTS = ["alpha", "beta", "alpha", "", " ", "", " ", "gamma\n", "beta", "alpha", "delta"]


@pytest.fixture
def raw(tmp_path):
    """Three JSONL files whose texts repeat within and across files."""
    for f in range(3):
        write_jsonl(tmp_path / "raw" / f"part{f}.jsonl",
                    [{"text": t, "source": f} for t in TEXTS[f:] + TEXTS[:f]])
    return tmp_path


def read_output(path) -> pd.DataFrame:
    return pd.read_parquet(path).sort_values("id", ignore_index=True)


def expected(raw) -> pd.DataFrame:
    """What any correct run keeps: the first of each text, by id (file, then line)."""
    df = workflow(raw).read().df.compute()
    return df.sort_values("id").drop_duplicates("text").reset_index(drop=True)


def workflow(raw, **options) -> ExactDeduplicationWorkflow:
    return ExactDeduplicationWorkflow(str(raw / "raw"), str(raw / "out"), str(raw / "cache"),
                                      input_blocksize=options.pop("input_blocksize", 120),
                                      **options)


def test_workflow_deduplicates_jsonl_on_a_cluster_with_p2p(client, raw):
    assert default_shuffle_method() == "p2p"
    result = workflow(raw).run()
    out = read_output(raw / "out")
    want = expected(raw)
    assert out[["id", "text"]].equals(want[["id", "text"]])
    assert (result.input_documents, result.duplicate_documents, result.kept_documents,
            result.duplicate_groups) == (33, 27, 6, 6)
    assert not result.identify_from_cache
    assert result.output.dropped == {"exact_duplicate": 27}
    assert (raw / "cache" / "exact_duplicates" / "_COMPLETE.json").exists()


@pytest.mark.slow
def test_both_removal_strategies_write_identical_files_on_a_cluster(client, raw):
    # auto with a threshold of 0 persists and counts the ids, then takes the shuffle.
    runs = {"broadcast": {}, "shuffle": {}, "auto": {"broadcast_threshold": 0}}
    for strategy, options in runs.items():
        workflow(raw, removal_strategy=strategy, **options).run()
        (raw / "out").rename(raw / f"out-{strategy}")
    def parts(path):
        return sorted(p.name for p in path.iterdir() if p.name.startswith("part-"))

    files = parts(raw / "out-broadcast")
    for strategy in ("shuffle", "auto"):
        assert files == parts(raw / f"out-{strategy}")
        for name in files:
            pd.testing.assert_frame_equal(pd.read_parquet(raw / "out-broadcast" / name),
                                          pd.read_parquet(raw / f"out-{strategy}" / name))


def test_parquet_input_with_its_own_ids_and_xxh3(client, raw):
    pytest.importorskip("xxhash")
    df = pd.DataFrame({"id": range(100, 100 + 3 * len(TEXTS)), "text": TEXTS * 3})
    (raw / "pq").mkdir()
    df.iloc[:15].to_parquet(raw / "pq" / "a.parquet")
    df.iloc[15:].to_parquet(raw / "pq" / "b.parquet")
    result = ExactDeduplicationWorkflow(str(raw / "pq"), str(raw / "out"), str(raw / "cache"),
                                        input_filetype="parquet", assign_id=False,
                                        hash_method="xxh3_128").run()
    assert read_output(raw / "out")["id"].tolist() == [100, 101, 103, 104, 107, 110]
    assert result.kept_documents == 6


@pytest.mark.slow
@pytest.mark.parametrize("in_memory", [True, False])
def test_rerun_after_a_crash_in_removal_reuses_the_marked_cache(client, raw, monkeypatch,
                                                                in_memory):
    from curator_dask.dedup import exact_files, held
    from curator_dask.io.writers import write_partition

    def crash_after_the_first_part(df, spec, index, fs, **options):
        if spec.path.endswith("/out") and index > 0:
            raise RuntimeError("simulated crash while writing")
        return write_partition(df, spec, index, fs, **options)

    # A corpus this small runs in one pass; a share of 0 forces the staged copy.
    monkeypatch.setattr(held, "IN_MEMORY_FRACTION", 0.25 if in_memory else 0.0)
    with monkeypatch.context() as patch:
        patch.setattr(exact_files, "write_partition", crash_after_the_first_part)
        with pytest.raises(RuntimeError, match="simulated crash"):
            workflow(raw).run()
    assert (raw / "cache" / "exact_duplicates" / "_COMPLETE.json").exists()
    # The staged input, for the rerun to read (kept only when it was staged).
    assert (raw / "cache" / "exact_staging").exists() == (not in_memory)
    # What the crashed write left (its manifest, maybe a part) is replaced, not an error:
    # the manifest records that this workflow, input and parameters wrote it.
    assert (raw / "out" / ".curator-output.json").exists()

    def must_not_identify(self, ds):
        raise AssertionError("identify recomputed although the cache is complete")

    monkeypatch.setattr(ExactDuplicates, "identify", must_not_identify)
    result = workflow(raw).run()
    assert result.identify_from_cache
    assert read_output(raw / "out")[["id", "text"]].equals(expected(raw)[["id", "text"]])
    assert result.duplicate_documents == 27
    assert not (raw / "cache" / "exact_staging").exists()


@pytest.mark.slow
def test_rerun_without_the_marker_recomputes_the_duplicates(client, raw):
    first = workflow(raw).run()
    (raw / "cache" / "exact_duplicates" / "_COMPLETE.json").unlink()
    second = workflow(raw, output_mode="overwrite").run()
    assert not second.identify_from_cache
    assert (second.duplicate_documents, second.kept_documents) == (
        first.duplicate_documents, first.kept_documents)
    assert (raw / "cache" / "exact_duplicates" / "_COMPLETE.json").exists()


def test_a_cache_from_other_input_is_not_reused(client, raw):
    workflow(raw).run()
    write_jsonl(raw / "raw" / "part9.jsonl", [{"text": "alpha", "source": 9}])
    result = workflow(raw, output_mode="overwrite").run()
    assert not result.identify_from_cache
    assert result.duplicate_documents == 28
    marker = json.loads((raw / "cache" / "exact_duplicates" / "_COMPLETE.json").read_text())
    assert len(marker["fingerprint"]["files"]) == 4


def test_existing_output_is_not_overwritten_by_a_fresh_run(client, raw):
    (raw / "out").mkdir()
    (raw / "out" / "keep-me.txt").write_text("user data")
    with pytest.raises(FileExistsError, match="output_mode='overwrite'"):
        workflow(raw).run()
    assert (raw / "out" / "keep-me.txt").exists()
    assert not (raw / "cache").exists()  # refused before any hashing


def test_null_text_is_skipped_and_counted_when_asked(client, raw):
    write_jsonl(raw / "raw" / "part9.jsonl", [{"text": None, "source": 9}])
    with pytest.raises(ValueError, match="null 'text'"):
        workflow(raw).run()
    result = workflow(raw, on_null="skip").run()
    assert result.null_text_documents == 1 and result.input_documents == 34
    assert result.output.dropped == {"exact_duplicate": 27, "null_text": 1}


def test_reading_assigns_deterministic_ids(raw):
    ds = workflow(raw).read()
    assert isinstance(ds, DocumentDataset) and ds.npartitions > 1
    assert ds.df.compute()["id"].is_unique


@pytest.mark.parametrize("threshold", [10, 0])
def test_auto_removal_of_a_lazy_duplicate_list_on_a_cluster(client, threshold):
    # No cache: auto persists the ids on the cluster, counts them and picks broadcast
    # (10 >= 4 ids) or shuffle (0 < 4); the persisted ids must outlive remove().
    df = pd.DataFrame({"id": range(9), "text": ["a", "b", "a", "c", "b", "a", "d", "c", "e"]})
    ds = DocumentDataset.from_pandas(df, npartitions=3)
    clean = ExactDuplicates(perform_removal=True, broadcast_threshold=threshold)(ds)
    assert sorted(clean.df.compute()["id"]) == [0, 1, 3, 6, 8]
    assert clean.dropped_counts() == {"exact_duplicate": 4}


@pytest.mark.parametrize("in_memory", [True, False])
@pytest.mark.parametrize("hash_partitions,strategy", [(None, "auto"), (3, "broadcast"),
                                                      (3, "shuffle")])
def test_workflow_keeps_what_identify_and_remove_keep(client, tmp_path, monkeypatch,
                                                       hash_partitions, strategy, in_memory):
    from curator_dask.dedup import held

    monkeypatch.setattr(held, "IN_MEMORY_FRACTION", 0.25 if in_memory else 0.0)
    # Parquet with its own ids, each on two documents, in four partitions.
    texts = (TEXTS * 4)[:40]
    ids = [i // 2 for i in range(len(texts))]  # every id on two documents
    df = pd.DataFrame({"id": ids, "text": texts, "n": range(len(texts))})
    (tmp_path / "pq").mkdir()
    for k in range(4):
        df.iloc[k * 10:(k + 1) * 10].to_parquet(tmp_path / "pq" / f"{k}.parquet")
    flow = ExactDeduplicationWorkflow(
        str(tmp_path / "pq"), str(tmp_path / "out"), str(tmp_path / "cache"),
        input_filetype="parquet", assign_id=False, input_blocksize=1,
        hash_partitions=hash_partitions, removal_strategy=strategy)
    result = flow.run()
    ds = flow.read()
    dedup = ExactDuplicates()
    want = dedup.remove(ds, dedup.identify(ds)).df.compute()
    got = pd.read_parquet(tmp_path / "out")
    assert sorted(got["n"]) == sorted(want["n"])
    assert result.kept_documents == len(want) == got["text"].nunique()
    assert result.input_documents == len(df)
    assert not (tmp_path / "cache" / "exact_staging").exists()  # removed once written


@pytest.mark.slow
def test_rerun_on_a_cluster_of_another_size_reads_the_same_partitions(tmp_path):
    from distributed import Client, LocalCluster

    # 8 MB: an automatic blocksize of 2 MiB for 1 thread, 1 MiB for 8.
    rows = [{"text": f"document {i % 7000} " + "word " * 200} for i in range(8000)]
    write_jsonl(tmp_path / "raw" / "a.jsonl", rows)
    runs = []
    for workers, threads in ((1, 1), (2, 4)):
        with LocalCluster(n_workers=workers, threads_per_worker=threads, processes=False,
                          dashboard_address=None) as cluster, Client(cluster):
            flow = ExactDeduplicationWorkflow(str(tmp_path / "raw"), str(tmp_path / "out"),
                                              str(tmp_path / "cache"),
                                              output_mode="overwrite")
            runs.append((flow.blocksize(), flow.run()))
    (first_block, first), (second_block, second) = runs
    assert first_block == second_block == 2 * 2**20
    assert second.identify_from_cache
    assert (first.kept_documents, first.duplicate_documents) == (7000, 1000)
    assert (second.kept_documents, second.duplicate_documents) == (7000, 1000)
    marker = json.loads((tmp_path / "cache" / "exact_duplicates" / "_COMPLETE.json").read_text())
    assert marker["fingerprint"]["input_blocksize"] == first_block
