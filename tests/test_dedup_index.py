"""Dedup indexes: incremental dedup of a batch against earlier ones equals dedup from
scratch (exact always; fuzzy as documented), and the index on disk is never half-updated."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import wait_until, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.dedup import (
    ExactDedupConfig,
    ExactDuplicates,
    FuzzyDedupConfig,
    FuzzyDeduplicationWorkflow,
    FuzzyDuplicates,
    held,
)
from curator_dask.dedup.index import (
    ExactDedupIndex,
    FuzzyDedupIndex,
    IndexChangedError,
    IndexParameterError,
)
from curator_dask.io.errors import OutputOverlapsInputError
from curator_dask.testing.fuzzy import planted_near_duplicates

FUZZY = FuzzyDedupConfig(char_ngrams=5, num_bands=10, minhashes_per_band=3)


pytestmark = pytest.mark.usefixtures("sync_scheduler")


def dataset(df: pd.DataFrame, npartitions: int = 2) -> DocumentDataset:
    return DocumentDataset.from_pandas(df.reset_index(drop=True), npartitions=npartitions)


def split(union: pd.DataFrame, at: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``A`` (the first ``at`` rows, with the union's ids) and ``B`` (the rest, ids
    renumbered from 0 as a batch read on its own has them, ``doc`` the union's id)."""
    first = union.iloc[:at].assign(doc=union["id"].iloc[:at])
    second = union.iloc[at:].assign(doc=union["id"].iloc[at:])
    second = second.assign(id=np.arange(len(second), dtype=np.int64))
    return first, second


def kept_docs(query) -> set[int]:
    return set(query.kept.df.compute()["doc"])


# -- exact -----------------------------------------------------------------------------------

texts = st.lists(st.sampled_from(["a", "b", "c", "", " ", "é", "a\n", "dd"]), min_size=1,
                 max_size=40)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, st.data())
def test_exact_incremental_removes_what_dedup_from_scratch_removes(corpus, data):
    union = pd.DataFrame({"id": np.arange(len(corpus), dtype=np.int64), "text": corpus})
    first, second = split(union, data.draw(st.integers(0, len(corpus))))
    scratch = ExactDuplicates(perform_removal=True)(dataset(union, 3))
    kept_from_scratch = set(scratch.df.compute()["id"])
    with tempfile.TemporaryDirectory() as root:
        index = ExactDedupIndex(root + "/index", partitions=data.draw(st.integers(1, 4)))
        query_a = index.query(dataset(first, data.draw(st.integers(1, 3))))
        query_a.append()
        query_b = index.query(dataset(second, data.draw(st.integers(1, 3))))
        kept = kept_docs(query_a) | kept_docs(query_b)
    assert kept == kept_from_scratch
    in_first = set(first["text"])
    assert query_b.removed["exact_duplicate_of_index"] == int(second["text"].isin(in_first).sum())
    assert query_b.kept.dropped_counts() == {k: v for k, v in query_b.removed.items() if v}


def test_exact_query_counts_what_it_removes_and_append_adds_only_new_texts(tmp_path):
    index = ExactDedupIndex(str(tmp_path / "index"), partitions=2)
    base = pd.DataFrame({"id": [0, 1, 2, 3], "text": ["a", "b", "a", "c"]})
    first = index.query(dataset(base))
    assert (first.documents, first.new_keys) == (4, 3)
    assert first.append() == 1 and index.keys == 3
    batch = pd.DataFrame({"id": [0, 1, 2, 3, 4], "text": ["c", "d", "d", "e", "a"]})
    query = index.query(dataset(batch, 3))
    assert sorted(query.kept.df.compute()["text"]) == ["d", "e"]
    assert query.removed == {"exact_duplicate": 1, "exact_duplicate_of_index": 2}
    assert query.append() == 2 and index.keys == 5


def test_null_texts_are_an_error_or_dropped_and_counted(tmp_path):
    batch = pd.DataFrame({"id": [0, 1, 2], "text": ["a", None, "a"]})
    with pytest.raises(Exception, match=r"partition 0: 1 document.*null"):
        ExactDedupIndex(str(tmp_path / "strict")).query(dataset(batch, 1))
    query = ExactDedupIndex(str(tmp_path / "lenient"),
                            config=ExactDedupConfig(on_null="skip")).query(dataset(batch, 1))
    assert query.kept.df.compute()["id"].tolist() == [0]
    assert query.kept.dropped_counts() == {"exact_duplicate": 1, "null_text": 1}


def test_string_ids_that_repeat_keep_one_copy_of_each_text(tmp_path):
    batch = pd.DataFrame({"id": ["x", "x", "y"], "text": ["a", "a", "b"]})
    query = ExactDedupIndex(str(tmp_path / "index")).query(dataset(batch, 1))
    assert query.kept.df.compute()["text"].tolist() == ["a", "b"]


# -- a batch read from files: hashed as it is read, its kept rows from the same read ---------

def _unchanged(df):
    return df


def _write_batch(root, frame: pd.DataFrame, fmt: str, files: int) -> DocumentDataset:
    """``frame`` as ``files`` JSONL or Parquet files (one partition each), read back."""
    root.mkdir(parents=True)
    for i, part in enumerate(np.array_split(np.arange(len(frame)), files)):
        rows = frame.iloc[part]
        if fmt == "jsonl":
            write_jsonl(root / f"part-{i}.jsonl", rows.to_dict("records"))
            if i == 0:  # a malformed line, skipped and counted by the reader
                with open(root / f"part-{i}.jsonl", "a", encoding="utf-8") as out:
                    out.write('{"id": 1, "text": \n')
        else:
            rows.to_parquet(root / f"part-{i}.parquet", index=False)
    read = DocumentDataset.read_jsonl if fmt == "jsonl" else DocumentDataset.read_parquet
    options = {"on_bad_lines": "skip"} if fmt == "jsonl" else {}
    return read(str(root), files_per_partition=1, **options)


def _outcome(query) -> tuple:
    kept = query.kept.df.compute().sort_values("id", ignore_index=True)
    return (kept, query.kept.dropped_counts(), query.removed, query.documents, query.new_keys)


def _assert_same(read, frames) -> None:
    pd.testing.assert_frame_equal(read[0], frames[0])
    assert read[1:] == frames[1:]


nullable_texts = st.lists(st.sampled_from(["a", "b", "c", "", "é", "a\n", None]),
                          min_size=1, max_size=30)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nullable_texts, nullable_texts, st.sampled_from(["jsonl", "parquet"]), st.data())
def test_a_batch_read_from_files_keeps_and_indexes_what_its_frames_do(first, second, fmt,
                                                                      data):
    """The same files, queried as read (one Arrow read, kept rows from it or from a
    second read) and through a step (their frames), against indexes built the same way:
    the same kept documents, counts and keys, batch after batch."""
    fraction = data.draw(st.sampled_from([0.25, 0.0]))  # kept rows held, or read again
    config = ExactDedupConfig(on_null="skip")
    with tempfile.TemporaryDirectory() as root, pytest.MonkeyPatch.context() as patch:
        patch.setattr(held, "IN_MEMORY_FRACTION", fraction)
        partitions = data.draw(st.integers(1, 3))
        indexes = [ExactDedupIndex(f"{root}/{name}", config=config, partitions=partitions)
                   for name in ("read", "frames")]
        start = 0
        for number, batch_texts in enumerate((first, second)):
            ids = np.arange(start, start + len(batch_texts), dtype=np.int64)
            start += len(batch_texts)
            frame = pd.DataFrame({"id": ids, "text": pd.array(batch_texts, dtype="string")})
            files = data.draw(st.integers(1, min(3, len(frame))))
            ds = _write_batch(Path(root) / f"batch-{number}", frame, fmt, files)
            read, frames = indexes[0].query(ds), indexes[1].query(ds.map_partitions(_unchanged))
            _assert_same(_outcome(read), _outcome(frames))
            assert read.append() == frames.append() == number + 1
            assert indexes[0].keys == indexes[1].keys


def test_a_batch_read_again_after_its_append_is_recognised_by_its_files(tmp_path):
    index = ExactDedupIndex(str(tmp_path / "index"))
    batch = pd.DataFrame({"id": [0, 1, 2], "text": ["x", "y", "x"]})
    first = index.query(_write_batch(tmp_path / "batch", batch, "parquet", 2))
    assert first.append() == 1
    again = index.query(DocumentDataset.read_parquet(str(tmp_path / "batch"),
                                                     files_per_partition=1))
    assert (again.appended_as, again.base_generation) == (1, 0)
    assert sorted(again.kept.df.compute()["text"]) == ["x", "y"]


# -- the index on disk ---------------------------------------------------------------------

def test_a_rerun_of_an_appended_batch_is_compared_as_before_and_not_appended_again(tmp_path):
    index = ExactDedupIndex(str(tmp_path / "index"))
    index.query(dataset(pd.DataFrame({"id": [0], "text": ["old"]}))).append()
    write_jsonl(tmp_path / "batch" / "a.jsonl",
                [{"id": i, "text": t} for i, t in enumerate(["old", "new", "new"])])
    batch = DocumentDataset.read_jsonl(str(tmp_path / "batch"))
    first = index.query(batch)
    kept = first.kept.df.compute()["text"].tolist()
    assert first.append() == 2
    again = index.query(DocumentDataset.read_jsonl(str(tmp_path / "batch")))
    assert again.appended_as == 2 and again.base_generation == 1
    assert again.kept.df.compute()["text"].tolist() == kept == ["new"]
    assert again.append() == 2 and index.generation == 2 and index.keys == 2
    # The same texts from other files are another batch: all of it is in the index now.
    write_jsonl(tmp_path / "copy" / "a.jsonl",
                [{"id": i, "text": t} for i, t in enumerate(["old", "new", "new"])])
    copy = index.query(DocumentDataset.read_jsonl(str(tmp_path / "copy")))
    assert copy.appended_as is None and copy.kept.df.compute().empty
    # A batch from memory is recognised only by a name given to it.
    memory = dataset(pd.DataFrame({"id": [0], "text": ["newer"]}))
    index.query(memory, batch_id="2026-12").append()
    assert index.query(memory).kept.df.compute().empty
    assert index.query(memory, batch_id="2026-12").appended_as == 3


def test_as_of_compares_with_an_earlier_generation_and_cannot_append(tmp_path):
    index = ExactDedupIndex(str(tmp_path / "index"))
    for text in ("a", "b"):
        index.query(dataset(pd.DataFrame({"id": [0], "text": [text]}))).append()
    batch = dataset(pd.DataFrame({"id": [0, 1], "text": ["a", "b"]}))
    query = index.query(batch, as_of=1)
    assert query.kept.df.compute()["text"].tolist() == ["b"]
    with pytest.raises(IndexParameterError, match="latest"):
        query.append()
    with pytest.raises(IndexParameterError, match="from 0 to 2"):
        index.query(batch, as_of=3)


def test_other_parameters_are_refused_naming_them(tmp_path):
    path = str(tmp_path / "index")
    FuzzyDedupIndex(path, config=FUZZY).query(
        dataset(pd.DataFrame({"id": [0], "text": ["some text here"]}))).append()
    other = FuzzyDedupConfig(char_ngrams=7, num_bands=10, minhashes_per_band=3, seed=1)
    with pytest.raises(IndexParameterError, match=r"char_ngrams 5 -> 7.*seed 42 -> 1"):
        FuzzyDedupIndex(path, config=other)
    # Without a config the index's own parameters are used; query-only fields may differ.
    assert FuzzyDedupIndex(path).config.char_ngrams == 5
    FuzzyDedupIndex(path, config=FuzzyDedupConfig(char_ngrams=5, num_bands=10,
                                                  minhashes_per_band=3, text_field="body"))
    with pytest.raises(IndexParameterError, match="fuzzy dedup index, not a exact"):
        ExactDedupIndex(path)
    with pytest.raises(IndexParameterError, match=r"3 partitions|partitions, not 5"):
        FuzzyDedupIndex(path, partitions=5)


def test_a_directory_of_other_files_or_inside_the_input_is_refused(tmp_path):
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("keep me")
    with pytest.raises(IndexParameterError, match="not a dedup index"):
        ExactDedupIndex(str(tmp_path / "theirs"))
    write_jsonl(tmp_path / "raw" / "a.jsonl", [{"id": 0, "text": "a"}])
    ds = DocumentDataset.read_jsonl(str(tmp_path / "raw"))
    with pytest.raises(OutputOverlapsInputError):
        ExactDedupIndex(str(tmp_path / "raw" / "index")).query(ds)
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "keep me"


def test_an_append_after_another_is_refused_and_leaves_the_index_whole(tmp_path):
    index = ExactDedupIndex(str(tmp_path / "index"))
    one = index.query(dataset(pd.DataFrame({"id": [0], "text": ["one"]})))
    two = index.query(dataset(pd.DataFrame({"id": [0], "text": ["two"]})))
    one.append()
    with pytest.raises(IndexChangedError, match="from generation 0 to 1"):
        two.append()
    assert index.generation == 1 and index.keys == 1
    assert sorted(p.name for p in (tmp_path / "index").iterdir()
                  if p.name.startswith("gen-")) == [json.loads(
                      (tmp_path / "index" / "INDEX.json").read_text())["segments"][0]["name"]]


def test_a_crashed_append_leaves_the_previous_generation_and_is_cleaned_up(tmp_path):
    root = tmp_path / "index"
    index = ExactDedupIndex(str(root), partitions=2)
    index.query(dataset(pd.DataFrame({"id": [0, 1], "text": ["a", "b"]}))).append()
    # What an append killed before its pointer moved leaves: a segment, a temporary pointer.
    leftover = root / "gen-00002-0123abcd"
    leftover.mkdir()
    (leftover / "part-00000.parquet").write_bytes(b"PAR1 half a file")
    (root / f".INDEX.json.tmp-{'f' * 32}").write_text("{")
    reopened = ExactDedupIndex(str(root))
    assert reopened.generation == 1
    query = reopened.query(dataset(pd.DataFrame({"id": [0, 1], "text": ["a", "c"]})))
    assert query.kept.df.compute()["text"].tolist() == ["c"]
    assert query.append() == 2
    assert not leftover.exists()


@pytest.mark.slow
def test_an_append_killed_at_any_moment_leaves_a_whole_generation(tmp_path):
    root = tmp_path / "index"
    ExactDedupIndex(str(root), partitions=8).query(
        dataset(pd.DataFrame({"id": [0], "text": ["first"]}))).append()
    script = textwrap.dedent(f"""
        import dask, pandas as pd
        from curator_dask import DocumentDataset
        from curator_dask.dedup.index import ExactDedupIndex
        dask.config.set(scheduler="sync")
        texts = [f"text {{i}}" for i in range(200_000)]
        ds = DocumentDataset.from_pandas(pd.DataFrame({{"id": range(len(texts)),
                                                        "text": texts}}), npartitions=8)
        ExactDedupIndex({str(root)!r}).query(ds).append()
    """)
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        # Kill it once its segment has started to appear (or when it is done).
        wait_until(lambda: child.poll() is not None or len(list(root.glob("gen-*"))) > 1, 60,
                   interval=0.01)
    finally:
        child.kill()
        child.wait()
    index = ExactDedupIndex(str(root))
    assert index.generation in (1, 2)
    expected = {1: 1, 2: 200_001}[index.generation]
    assert index.keys == expected
    seen = index.query(dataset(pd.DataFrame({"id": [0, 1], "text": ["first", "text 7"]})))
    assert seen.removed["exact_duplicate_of_index"] == (1 if index.generation == 1 else 2)
    seen.append()  # and the next append clears what the killed one left
    named = {s["name"] for s in json.loads((root / "INDEX.json").read_text())["segments"]}
    assert {p.name for p in root.glob("gen-*")} == named


# -- fuzzy -----------------------------------------------------------------------------------

def removed_by_scratch(union: pd.DataFrame) -> tuple[set[int], dict[int, int]]:
    groups = FuzzyDuplicates(config=FUZZY).identify(dataset(union, 3)).df.compute()
    labels = dict(zip(groups["id"], groups["group"], strict=True))
    return {i for i, g in labels.items() if i != g}, labels


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), fraction=st.floats(0.2, 0.9),
       partitions=st.integers(1, 4))
def test_fuzzy_incremental_removes_from_the_batch_what_dedup_from_scratch_removes(
        seed, fraction, partitions):
    union = planted_near_duplicates(40, variants=(0, 4), words=(20, 60),
                                    mutation_rates=(0.0, 0.3), seed=seed)
    first, second = split(union, int(len(union) * fraction))
    removed, labels = removed_by_scratch(union)
    with tempfile.TemporaryDirectory() as root:
        index = FuzzyDedupIndex(root + "/index", config=FUZZY, partitions=partitions)
        query_a = index.query(dataset(first))
        query_a.append()
        query_b = index.query(dataset(second, 3))
        kept_a, kept_b = kept_docs(query_a), kept_docs(query_b)
    # The batch: exactly what the run from scratch removes of it.
    assert set(second["doc"]) - kept_b == removed & set(second["doc"])
    # The corpus: what it removes, less the kept documents of A groups that B joins.
    joined = {doc for doc in kept_a if labels.get(doc, doc) != doc}
    assert (removed & set(first["doc"])) - (set(first["doc"]) - kept_a) == joined
    assert (set(first["doc"]) - kept_a) <= removed


def test_a_batch_document_near_two_kept_documents_is_removed_and_both_stay(tmp_path):
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in rng.permutation(400)]
    left, right = " ".join(words[:100]), " ".join(words[100:200])
    bridge = " ".join(words[:100] + words[100:200])
    config = FuzzyDedupConfig(char_ngrams=5, num_bands=20, minhashes_per_band=2)
    index = FuzzyDedupIndex(str(tmp_path / "index"), config=config)
    first = index.query(dataset(pd.DataFrame({"id": [0, 1], "text": [left, right]})))
    assert first.removed["fuzzy_duplicate"] == 0
    first.append()
    query = index.query(dataset(pd.DataFrame({"id": [0], "text": [bridge]})))
    assert query.removed == {"fuzzy_duplicate": 0, "fuzzy_duplicate_of_index": 1}
    # From scratch, the bridge joins the two: the higher id of them goes too.
    union = pd.DataFrame({"id": [0, 1, 2], "text": [left, right, bridge]})
    groups = FuzzyDuplicates(config=config).identify(dataset(union)).df.compute()
    assert sorted(groups.loc[groups["id"] != groups["group"], "id"]) == [1, 2]


def test_a_document_linked_to_the_index_only_through_the_batch_is_removed(tmp_path):
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in rng.permutation(400)]
    old = " ".join(words[:120])
    near_old = " ".join(words[:100] + words[200:220])        # near old
    near_near = " ".join(words[40:100] + words[200:260])     # near near_old only
    config = FuzzyDedupConfig(char_ngrams=5, num_bands=20, minhashes_per_band=2)
    index = FuzzyDedupIndex(str(tmp_path / "index"), config=config)
    index.query(dataset(pd.DataFrame({"id": [0], "text": [old]}))).append()
    query = index.query(dataset(pd.DataFrame({"id": [5, 9], "text": [near_near, near_old]})))
    assert query.kept.df.compute().empty
    assert query.removed == {"fuzzy_duplicate": 0, "fuzzy_duplicate_of_index": 2}


def test_fuzzy_refuses_false_positive_checks_and_repeated_ids(tmp_path):
    with pytest.raises(IndexParameterError, match="false_positive_check"):
        FuzzyDedupIndex(str(tmp_path / "a"), config=FuzzyDedupConfig(false_positive_check=True))
    batch = dataset(pd.DataFrame({"id": [1, 1], "text": ["some text", "other text"]}))
    with pytest.raises(Exception, match="FuzzyDedupIndex: 1 id is each on more than one"):
        FuzzyDedupIndex(str(tmp_path / "b"), config=FUZZY).query(batch)


def test_fuzzy_index_from_a_finished_run_equals_one_built_from_its_input(tmp_path):
    corpus = planted_near_duplicates(30, variants=(0, 3), words=(20, 50), seed=7)
    write_jsonl(tmp_path / "raw" / "a.jsonl", corpus[["id", "text"]].to_dict("records"))
    FuzzyDeduplicationWorkflow(str(tmp_path / "raw"), str(tmp_path / "cache"),
                               config=FUZZY).run()
    from_cache = FuzzyDedupIndex.from_fuzzy_cache(str(tmp_path / "from-cache"),
                                                  str(tmp_path / "cache"), partitions=2)
    built = FuzzyDedupIndex(str(tmp_path / "built"), config=FUZZY, partitions=2)
    built.query(DocumentDataset.read_jsonl(str(tmp_path / "raw"))).append()
    assert from_cache.config.char_ngrams == FUZZY.char_ngrams
    assert from_cache.keys == built.keys > 0
    batch = planted_near_duplicates(10, variants=(1, 2), words=(20, 50), seed=8)
    batch = pd.concat([batch, corpus.iloc[:5]]).assign(id=lambda d: np.arange(len(d)))
    assert (from_cache.query(dataset(batch)).removed == built.query(dataset(batch)).removed)
    with pytest.raises(IndexParameterError, match="no finished fuzzy dedup run"):
        FuzzyDedupIndex.from_fuzzy_cache(str(tmp_path / "x"), str(tmp_path / "nothing"))


@pytest.mark.slow
def test_queries_run_on_a_cluster(client, tmp_path):
    union = planted_near_duplicates(40, variants=(0, 3), words=(20, 60), seed=11)
    first, second = split(union, len(union) // 2)
    exact = ExactDedupIndex(str(tmp_path / "exact"), partitions=3)
    fuzzy = FuzzyDedupIndex(str(tmp_path / "fuzzy"), config=FUZZY, partitions=3)
    for index in (exact, fuzzy):
        index.query(dataset(first)).append()
    removed, _ = removed_by_scratch(union)
    kept = kept_docs(fuzzy.query(dataset(second, 3)))
    assert set(second["doc"]) - kept == removed & set(second["doc"])
    assert exact.query(dataset(second)).documents == len(second)


# -- as pipeline stages ------------------------------------------------------------------------

@pytest.mark.slow
def test_pipeline_files_dedup_month_after_month_and_report_each_reason(tmp_path):
    from curator_dask.cli.config import load_config
    from curator_dask.observe.report import stage_rows

    months = {"m1": ["a", "b", "a", "c"], "m2": ["b", "d", "d", "a", "e"]}
    kept: dict[str, list] = {}
    for month, month_texts in months.items():
        write_jsonl(tmp_path / month / "in.jsonl", [{"text": t} for t in month_texts])
        (tmp_path / f"{month}.yaml").write_text(textwrap.dedent(f"""
            executor: {{type: local}}
            reader: {{type: jsonl, path: {tmp_path / month}}}
            stages:
              - AddId
              - ExactIndexDedup: {{index_path: {tmp_path / 'index'}, append: true,
                                   partitions: 2}}
            writer: {{type: parquet, path: {tmp_path / 'out' / month}}}
        """))
        for _ in range(2):  # a rerun keeps the same documents and appends nothing
            config = load_config(str(tmp_path / f"{month}.yaml"))
            config.pipeline.run(config.executor())
            result = config.pipeline.last_result
            kept.setdefault(month, []).append(
                sorted(pd.read_parquet(tmp_path / "out" / month)["text"]))
            (tmp_path / "out" / month).rename(tmp_path / "out" / f"{month}-run-{_}")
        row = next(r for r in stage_rows(result, config.pipeline.stages)
                   if r.stage == "exact_index_dedup")
        assert sum(row.dropped.values()) == len(month_texts) - len(kept[month][0])
    assert kept == {"m1": [["a", "b", "c"]] * 2, "m2": [["d", "e"]] * 2}
    assert row.dropped == {"exact_duplicate": 1, "exact_duplicate_of_index": 2}
    assert ExactDedupIndex(str(tmp_path / "index")).generation == 2
