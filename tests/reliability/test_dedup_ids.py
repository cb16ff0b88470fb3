"""Dedup with repeated user ids: no unique document removed, one copy of each text kept.

The corpus: 7 documents, 5 distinct texts, ids that repeat. Id 1 is on both copies of
text A; id 3 is on a copy of B and on the only C. Removing by id would take both A's and
the C with B's copy. Exact dedup removes by row and keeps documents 0, 2, 4, 5, 6; fuzzy
dedup groups by id, so it refuses with DuplicateIdError, and works once ids are unique.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import dask
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask import AddId, DocumentDataset, JsonlReader, ParquetWriter, Pipeline
from curator_dask.cli.main import main
from curator_dask.dedup import (
    DuplicateIdError,
    DuplicateListMismatchError,
    ExactDeduplicationWorkflow,
    ExactDuplicates,
    FuzzyDeduplicationWorkflow,
    FuzzyDuplicates,
)
from curator_dask.dedup.stages import ExactDedup, FuzzyDedup
from curator_dask.executors import BatchExecutor, StreamingExecutor

TEXTS = {
    "A": "Alpine meadows bloom with gentians and edelweiss every July in the high valleys.",
    "B": "Quantum computers use qubits whose superposition lets them explore many states.",
    "C": "The recipe calls for two cups of flour, a pinch of salt and three fresh eggs.",
    "D": "Railway timetables in 1890 were synchronised by telegraph across the continent.",
    "E": "Jazz musicians improvise over chord changes, trading solos late into the night.",
}
# (id, text) of documents 0..6.
ROWS = [(1, "A"), (1, "A"), (2, "B"), (3, "B"), (3, "C"), (4, "D"), (5, "E")]
#: One document of each text: the lowest id, and of copies sharing it the first.
KEPT = [0, 2, 4, 5, 6]
DROPPED = {"exact_duplicate": 2}
EXECUTORS = {"streaming": StreamingExecutor, "batch": BatchExecutor}
REPEATED_IDS = re.compile(r"2 ids are each on more than one document \(4 documents in all; "
                          r"e\.g\. id=[13] is on 2 documents\)")
#: Short texts need short shingles; one shuffle of 10 bands finds every copy here.
FUZZY = {"char_ngrams": 5, "num_bands": 10, "minhashes_per_band": 4, "bands_per_iteration": 10}


def frame() -> pd.DataFrame:
    return pd.DataFrame({"doc": range(len(ROWS)), "id": [i for i, _ in ROWS],
                         "text": pd.array([TEXTS[k] for _, k in ROWS], dtype="str")})


@pytest.fixture
def corpus(tmp_path) -> Path:
    """The 7 documents as JSONL; about 3 partitions at a 200-byte blocksize."""
    directory = tmp_path / "in"
    directory.mkdir()
    with open(directory / "a.jsonl", "w") as out:
        for record in frame().to_dict("records"):
            out.write(json.dumps(record) + "\n")
    return directory


def fingerprint(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def docs_in(path) -> list[int]:
    return sorted(pd.read_parquet(path)["doc"].tolist())


def parts(path: Path) -> list[str]:
    return sorted(p.name for p in path.glob("part-*")) if path.exists() else []


def pipeline(corpus: Path, out: Path, *stages) -> Pipeline:
    p = Pipeline("ids").add_stage(JsonlReader(str(corpus), blocksize="200B"))
    for stage in stages:
        p = p.add_stage(stage)
    return p.add_stage(ParquetWriter(str(out)))


# -- exact: every path keeps one of each text -------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("executor", sorted(EXECUTORS))
def test_pipeline_exact_dedup_keeps_one_of_each_text_with_repeated_ids(
        corpus, tmp_path, client, executor):
    before = fingerprint(corpus)
    result = pipeline(corpus, tmp_path / "out", ExactDedup()).run(
        EXECUTORS[executor](cache_path=str(tmp_path / "cache"), progress=False))
    assert docs_in(tmp_path / "out") == KEPT
    assert result.dropped == DROPPED
    barrier = result.stage("exact_dedup")
    assert (barrier.rows_in, barrier.rows_out) == (7, 5)
    assert fingerprint(corpus) == before


@pytest.mark.parametrize("npartitions,strategy", [
    (1, "shuffle"), (3, "broadcast"), pytest.param(7, "shuffle", marks=pytest.mark.slow)])
def test_exact_duplicates_keeps_one_of_each_text_with_repeated_ids(client, npartitions,
                                                                   strategy):
    ds = DocumentDataset.from_pandas(frame(), npartitions=npartitions)
    clean = ExactDuplicates(perform_removal=True, removal_strategy=strategy)(ds)
    assert sorted(clean.df.compute()["doc"]) == KEPT
    assert clean.dropped_counts() == DROPPED


@pytest.mark.slow
def test_exact_workflow_keeps_one_of_each_text_and_counts_every_document(corpus, tmp_path,
                                                                         client):
    before = fingerprint(corpus)
    for run, output in enumerate(("out", "again")):
        result = ExactDeduplicationWorkflow(
            str(corpus), str(tmp_path / output), str(tmp_path / "cache"),
            input_blocksize="200B").run()
        assert result.identify_from_cache == (run == 1)
        assert docs_in(tmp_path / output) == KEPT
        assert (result.input_documents, result.kept_documents, result.duplicate_documents,
                result.duplicate_groups) == (7, 5, 2, 2)
        assert result.output.dropped == DROPPED
    assert fingerprint(corpus) == before


@pytest.mark.slow
def test_exact_workflow_recomputes_a_cached_list_of_ids_without_rows(corpus, tmp_path, client):
    def run(output):
        return ExactDeduplicationWorkflow(str(corpus), str(tmp_path / output),
                                          str(tmp_path / "cache"), input_blocksize="200B").run()

    run("first")
    # A list as an earlier version wrote it, complete but naming ids only.
    for part in (tmp_path / "cache" / "exact_duplicates").glob("part-*.parquet"):
        pq.write_table(pq.read_table(part).drop_columns(["_row"]), part)
    result = run("second")
    assert not result.identify_from_cache
    assert docs_in(tmp_path / "second") == KEPT


def test_cli_dedup_exact_keeps_one_of_each_text(corpus, tmp_path, cluster, capsys):
    before = fingerprint(corpus)
    assert main(["dedup", "exact", "--input", str(corpus), "--output", str(tmp_path / "out"),
                 "--cache", str(tmp_path / "cache"), "--input-blocksize", "200B",
                 "--scheduler-address", cluster.scheduler_address]) == 0
    printed = dict(re.split(r"\s{2,}", line.strip())[:2]
                   for line in capsys.readouterr().out.splitlines()
                   if len(re.split(r"\s{2,}", line.strip())) == 2)
    assert (printed["input documents"], printed["kept documents"],
            printed["duplicate documents"]) == ("7", "5", "2")
    assert docs_in(tmp_path / "out") == KEPT
    assert fingerprint(corpus) == before


@pytest.mark.parametrize("strategy", ["broadcast", "shuffle"])
def test_a_row_list_from_another_dataset_is_refused_not_misapplied(strategy):
    ds = DocumentDataset.from_pandas(frame(), npartitions=3)
    duplicates = ExactDuplicates().identify(ds)
    reordered = DocumentDataset.from_pandas(frame().iloc[::-1].reset_index(drop=True),
                                            npartitions=3)
    with pytest.raises(DuplicateListMismatchError,
                       match=r"has id=\d+, the list says \d+: the list of rows to remove "
                             r"was made from another dataset"):
        ExactDuplicates(removal_strategy=strategy).remove(reordered, duplicates).df.compute()


# -- fuzzy: refuses repeated ids, works once they are unique ----------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("executor", sorted(EXECUTORS))
def test_pipeline_fuzzy_dedup_refuses_repeated_ids_before_writing(corpus, tmp_path, client,
                                                                  executor):
    before = fingerprint(corpus)
    with pytest.raises(DuplicateIdError) as error:
        pipeline(corpus, tmp_path / "out", FuzzyDedup(**FUZZY)).run(
            EXECUTORS[executor](cache_path=str(tmp_path / "cache"), progress=False))
    message = str(error.value)
    assert message.startswith("stage 'fuzzy_dedup': FuzzyDuplicates: ")
    assert REPEATED_IDS.search(message) and "AddId" in message and "id_field=" in message
    assert parts(tmp_path / "out") == []
    assert fingerprint(corpus) == before


@pytest.mark.slow
def test_pipeline_fuzzy_dedup_with_addid_keeps_one_of_each_text(corpus, tmp_path, client):
    result = pipeline(corpus, tmp_path / "out", AddId(), FuzzyDedup(**FUZZY)).run(
        StreamingExecutor(cache_path=str(tmp_path / "cache"), progress=False))
    assert docs_in(tmp_path / "out") == KEPT
    assert result.dropped == {"fuzzy_duplicate": 2}


@pytest.mark.slow
def test_fuzzy_duplicates_refuses_repeated_ids(client):
    ds = DocumentDataset.from_pandas(frame(), npartitions=3)
    with pytest.raises(DuplicateIdError, match=REPEATED_IDS.pattern):
        FuzzyDuplicates(**FUZZY)(ds)
    unique = DocumentDataset.from_pandas(frame().assign(id=range(7)), npartitions=3)
    clean = FuzzyDuplicates(**FUZZY, perform_removal=True)(unique)
    assert sorted(clean.df.compute()["doc"]) == KEPT
    assert clean.dropped_counts() == {"fuzzy_duplicate": 2}


@pytest.mark.slow
def test_fuzzy_workflow_refuses_repeated_ids_and_names_the_fix(corpus, tmp_path, client):
    before = fingerprint(corpus)

    def workflow(**options):
        return FuzzyDeduplicationWorkflow(
            str(corpus), str(tmp_path / "cache"), str(tmp_path / "out"), perform_removal=True,
            input_blocksize="200B", **FUZZY, **options)

    with pytest.raises(DuplicateIdError, match=REPEATED_IDS.pattern) as error:
        workflow().run()
    assert "id_field=" in str(error.value) and "AddId" in str(error.value)
    assert parts(tmp_path / "out") == []
    # The advice works: a name the input lacks makes AddId number the documents.
    result = workflow(id_field="curator_id").run()
    assert docs_in(tmp_path / "out") == KEPT
    assert (result.input_documents, result.kept_documents, result.duplicate_documents) == (7, 5, 2)
    assert fingerprint(corpus) == before


def test_cli_dedup_fuzzy_exits_1_with_the_message_and_writes_nothing(corpus, tmp_path, cluster,
                                                                      capsys):
    before = fingerprint(corpus)
    code = main(["dedup", "fuzzy", "--input", str(corpus), "--output", str(tmp_path / "out"),
                 "--cache", str(tmp_path / "cache"), "--input-blocksize", "200B",
                 "--char-ngrams", "5", "--scheduler-address", cluster.scheduler_address])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("curator-dask dedup fuzzy: error: FuzzyDeduplicationWorkflow: ")
    assert REPEATED_IDS.search(err) and "--id-field" in err
    assert parts(tmp_path / "out") == []
    assert fingerprint(corpus) == before


# -- properties ---------------------------------------------------------------------------------

documents = st.lists(st.tuples(st.integers(0, 6), st.sampled_from("abcdef")), min_size=1,
                     max_size=40)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(documents, st.integers(1, 5), st.sampled_from(["broadcast", "shuffle"]))
def test_exact_dedup_keeps_exactly_one_row_of_each_text_whatever_the_ids(rows, npartitions,
                                                                         strategy):
    df = pd.DataFrame({"doc": range(len(rows)), "id": [i for i, _ in rows],
                       "text": pd.array([t for _, t in rows], dtype="str")})
    ds = DocumentDataset.from_pandas(df, npartitions=min(npartitions, len(rows)))
    with dask.config.set(scheduler="threads"):
        clean = ExactDuplicates(perform_removal=True, removal_strategy=strategy)(ds)
        kept = clean.df.compute()
        dropped = clean.dropped_counts()
    # The specification: per text, the lowest id, and of rows sharing it the first.
    expected = df.sort_values(["id", "doc"]).drop_duplicates("text")["doc"]
    assert sorted(kept["doc"]) == sorted(expected)
    assert len(kept) + dropped.get("exact_duplicate", 0) == len(df)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=2, max_size=12))
def test_fuzzy_dedup_refuses_exactly_when_ids_repeat(ids):
    texts = [TEXTS["ABCDE"[i % 5]] + f" #{i}" * (i // 5) for i in range(len(ids))]
    ds = DocumentDataset.from_pandas(pd.DataFrame({"id": ids, "text": texts}), npartitions=2)
    counts = pd.Series(ids).value_counts()
    repeated = counts[counts > 1]
    with dask.config.set(scheduler="threads"):
        if repeated.empty:
            FuzzyDuplicates(**FUZZY).identify(ds)
        else:
            with pytest.raises(DuplicateIdError,
                               match=rf"{len(repeated)} ids? (are|is) each on more than one "
                                     rf"document \({repeated.sum()} documents in all"):
                FuzzyDuplicates(**FUZZY).identify(ds)
