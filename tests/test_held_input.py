"""A dedup's ``identify`` keeps the partitions it parsed for the ``remove`` that follows
(curator_dask.dedup.held): the same documents kept and counted either way, the input
read once where it is held, and never a held copy standing in for another dataset."""

from __future__ import annotations

import json
import pickle

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.dedup import ExactDuplicates, FuzzyDuplicates, held
from curator_dask.errors import InvalidArgumentError

BASE = "the quick brown fox jumps over the lazy dog and keeps on running far away "


def write_corpus(directory, texts: list[str], files: int = 3) -> str:
    """``texts`` as JSONL with ids 0.., spread over ``files`` files."""
    directory.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = [json.dumps({"id": i, "text": t}) for i, t in enumerate(texts) if i % files == f]
        (directory / f"part-{f}.jsonl").write_text("".join(line + "\n" for line in lines))
    return str(directory)


def corpus_texts(n: int = 60) -> list[str]:
    """Distinct texts, a third of them repeated exactly, a few near copies."""
    texts = [f"{BASE * 3} document number {i} " + "x" * (i % 7) for i in range(n)]
    texts += texts[: n // 3]
    texts += [t.replace("lazy", "LAZY", 1) for t in texts[:5]]
    return texts


def tasks_run_by(action) -> list[str]:
    """The prefixes of the tasks the cluster ran while ``action()`` ran."""
    from distributed import get_task_stream

    with get_task_stream() as stream:
        action()
    keys = [t["key"] if isinstance(t["key"], str) else t["key"][0] for t in stream.data]
    return sorted({key.split("-")[0] for key in keys})


def parquet_rows(path) -> pd.DataFrame:
    return pd.read_parquet(path).sort_values("id").reset_index(drop=True)


# -- the path a NeMo Curator user writes, on a cluster -----------------------------------

@pytest.mark.parametrize("hold_input", [None, False])
def test_exact_api_path_reads_the_input_once_where_it_is_held(client, tmp_path, hold_input):
    source = write_corpus(tmp_path / "in", corpus_texts())
    ds = DocumentDataset.read_jsonl(source)
    dedup = ExactDuplicates(hold_input=hold_input)
    dedup.identify(ds).to_parquet(str(tmp_path / "dups"))
    duplicates = DocumentDataset.read_parquet(str(tmp_path / "dups"), text_field=None)
    written = {}

    def remove_and_write():
        written["result"] = dedup.remove(ds, duplicates).to_parquet(str(tmp_path / "out"))

    ran = tasks_run_by(remove_and_write)
    # Held (a small corpus on a cluster fits): remove reads no file; not held: it does.
    assert ("read_jsonl" in ran) == (hold_input is False), ran
    kept = parquet_rows(tmp_path / "out")
    expected = (pd.DataFrame({"text": corpus_texts()}).reset_index(names="id")
                .drop_duplicates("text").sort_values("id").reset_index(drop=True))
    assert kept["id"].tolist() == expected["id"].tolist()
    assert kept["text"].tolist() == expected["text"].tolist()
    assert written["result"].dropped == {"exact_duplicate": len(corpus_texts()) - len(expected)}


@pytest.mark.parametrize("hold_input", [None, False])
def test_fuzzy_api_path_keeps_the_same_documents_held_or_not(client, tmp_path, hold_input):
    source = write_corpus(tmp_path / "in", corpus_texts())
    ds = DocumentDataset.read_jsonl(source)
    dedup = FuzzyDuplicates(char_ngrams=5, num_bands=10, minhashes_per_band=4,
                            false_positive_check=True, hold_input=hold_input)
    groups = dedup.identify(ds)
    written = {}

    def remove_and_write():
        written["result"] = dedup.remove(ds, groups).to_parquet(str(tmp_path / "out"))

    ran = tasks_run_by(remove_and_write)
    assert ("read_jsonl" in ran) == (hold_input is False), ran
    reference = FuzzyDuplicates(char_ngrams=5, num_bands=10, minhashes_per_band=4,
                                false_positive_check=True, hold_input=False)
    fresh = DocumentDataset.read_jsonl(source)
    expected = sorted(reference.remove(fresh, reference.identify(fresh)).df.compute()["id"])
    assert parquet_rows(tmp_path / "out")["id"].tolist() == expected
    assert written["result"].dropped == {"fuzzy_duplicate": len(corpus_texts()) - len(expected)}


@pytest.mark.parametrize("hold_input", [None, False])
def test_fuzzy_identify_plans_lsh_bands_from_the_rows_it_holds(client, tmp_path, hold_input):
    # Held partitions are counted before LSH is built: all bands in one shuffle where
    # they fit, as the workflow plans them; unheld, the count is not known in time and
    # the default number of bands goes in each shuffle. The groups are the same.
    from curator_dask.dedup.fuzzy.lsh import DEFAULT_BANDS_PER_ITERATION

    texts = corpus_texts()
    source = write_corpus(tmp_path / "in", texts)
    dedup = FuzzyDuplicates(char_ngrams=5, num_bands=12, minhashes_per_band=4,
                            hold_input=hold_input)
    planned = []
    iterations = dedup.lsh.iterations

    def recorded(documents=None):
        planned.append((documents, iterations(documents)))
        return planned[-1][1]

    dedup.lsh.iterations = recorded
    groups = dedup.identify(DocumentDataset.read_jsonl(source)).df.compute()
    if hold_input is None:
        assert planned == [(len(texts), [range(0, 12)])]
    else:
        step = DEFAULT_BANDS_PER_ITERATION
        assert planned == [(None, [range(lo, min(lo + step, 12)) for lo in range(0, 12, step)])]
    reference = FuzzyDuplicates(char_ngrams=5, num_bands=12, minhashes_per_band=4,
                                bands_per_iteration=1, hold_input=False)
    expected = reference.identify(DocumentDataset.read_jsonl(source)).df.compute()
    key = ["id", "group"]
    assert groups.sort_values(key).reset_index(drop=True).equals(
        expected.sort_values(key).reset_index(drop=True))


def test_an_input_that_does_not_fit_is_read_again(client, tmp_path, monkeypatch):
    from distributed import wait

    monkeypatch.setattr(held, "IN_MEMORY_FRACTION", 0.0)
    ds = DocumentDataset.read_jsonl(write_corpus(tmp_path / "in", corpus_texts()))
    dedup = ExactDuplicates()
    duplicates = dedup.identify(ds).df.persist()
    wait(duplicates)
    ran = tasks_run_by(dedup.remove(ds, DocumentDataset(duplicates)).df.compute)
    assert "read_jsonl" in ran, ran


def test_remove_takes_the_hold_once(client, tmp_path):
    from distributed import wait

    ds = DocumentDataset.read_jsonl(write_corpus(tmp_path / "in", corpus_texts()))
    dedup = ExactDuplicates()
    duplicates = DocumentDataset(dedup.identify(ds).df.persist())
    wait(duplicates.df)  # the held partitions are read by now
    first = tasks_run_by(dedup.remove(ds, duplicates).df.compute)
    second = tasks_run_by(dedup.remove(ds, duplicates).df.compute)
    assert "read_jsonl" not in first and "read_jsonl" in second, (first, second)


# -- never a held copy in place of another dataset ---------------------------------------

def test_a_dataset_changed_in_place_after_identify_is_removed_from_as_it_is_now(tmp_path):
    ds = DocumentDataset.read_jsonl(write_corpus(tmp_path / "in", corpus_texts()))
    dedup = ExactDuplicates(hold_input=True)
    duplicates = DocumentDataset(dedup.identify(ds).df.persist())
    ds.df = ds.df.assign(marked=1)
    clean = dedup.remove(ds, duplicates).df.compute()
    assert clean["marked"].tolist() == [1] * len(clean)  # the changed partitions, not the held
    assert sorted(clean["text"]) == sorted(set(corpus_texts()))


def test_another_dataset_is_not_served_the_held_partitions(tmp_path):
    texts = corpus_texts()
    first = DocumentDataset.read_jsonl(write_corpus(tmp_path / "a", texts))
    other = DocumentDataset.read_jsonl(write_corpus(tmp_path / "b", [t.upper() for t in texts]))
    dedup = ExactDuplicates(hold_input=True)
    dedup.identify(first)
    duplicates = DocumentDataset(dedup.identify(other).df.persist())  # replaces the hold
    clean = dedup.remove(other, duplicates).df.compute()
    assert all(t == t.upper() for t in clean["text"])
    assert sorted(clean["text"]) == sorted({t.upper() for t in texts})


def test_a_copy_of_a_dedup_holds_nothing(tmp_path):
    ds = DocumentDataset.read_jsonl(write_corpus(tmp_path / "in", corpus_texts()))
    dedup = ExactDuplicates(hold_input=True)
    dedup.identify(ds)
    copy = pickle.loads(pickle.dumps(dedup))
    assert copy.held.take(ds) is ds
    assert dedup.held.take(ds) is not ds


def test_a_failed_identify_holds_nothing(tmp_path):
    from curator_dask.dedup.ids import DuplicateIdError

    texts = corpus_texts(12)
    source = write_corpus(tmp_path / "in", texts)
    (tmp_path / "in" / "part-0.jsonl").write_text(  # id 1 on a second document too
        (tmp_path / "in" / "part-0.jsonl").read_text()
        + json.dumps({"id": 1, "text": "another text"}) + "\n")
    ds = DocumentDataset.read_jsonl(source)
    dedup = FuzzyDuplicates(char_ngrams=5, num_bands=10, minhashes_per_band=4,
                            hold_input=True)
    with pytest.raises(DuplicateIdError):
        dedup.identify(ds)
    assert dedup.held.take(ds) is ds


def test_hold_input_takes_only_true_false_or_none():
    with pytest.raises(InvalidArgumentError, match="hold_input must be True, False or None"):
        ExactDuplicates(hold_input="yes")


# -- any corpus: held or read again, the same result ---------------------------------------

texts_strategy = st.lists(st.sampled_from(["a", "b", "c", "", "the same text", "é ü", "b "]),
                          min_size=1, max_size=30)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=texts_strategy, files=st.integers(1, 4), cut=st.sampled_from([None, "64B"]))
def test_held_and_unheld_removal_keep_the_same_rows(tmp_path_factory, texts, files, cut):
    """Exact dedup of generated JSONL (repeats, empty texts, a line that is not JSON,
    files cut into byte ranges): the rows kept, their order and the counts (skipped
    lines included) are the same held or read again."""
    directory = tmp_path_factory.mktemp("in")
    source = write_corpus(directory, texts, files=files)
    with open(directory / "part-0.jsonl", "a") as f:
        f.write("{not json\n")
    results = []
    for hold_input in (True, False):
        ds = DocumentDataset.read_jsonl(source, blocksize=cut, on_bad_lines="skip")
        dedup = ExactDuplicates(hold_input=hold_input)
        duplicates = DocumentDataset(dedup.identify(ds).df.persist())
        clean = dedup.remove(ds, duplicates)
        results.append((clean.df.compute().reset_index(drop=True), clean.dropped_counts()))
    (held_rows, held_counts), (read_rows, read_counts) = results
    pd.testing.assert_frame_equal(held_rows, read_rows)
    assert held_counts == read_counts
    assert held_counts["reader.bad_json_line"] == 1
    assert sorted(held_rows["text"]) == sorted(set(texts))


class _Memory:
    available = 4 << 30


def test_fits_in_memory_counts_the_smallest_worker_once_per_worker(client):
    limits = [int(w["memory_limit"]) for w in client.scheduler_info()["workers"].values()]
    most = int(held.IN_MEMORY_FRACTION * len(limits) * min(limits)) // 2
    assert held.fits_in_memory(most)
    assert not held.fits_in_memory(most + 1)


def test_fits_in_memory_without_a_cluster_running_the_graphs_asks_the_machine(
        client, monkeypatch):
    import dask
    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", _Memory)
    most = int(held.IN_MEMORY_FRACTION * _Memory.available) // 2
    # A client exists, but dask is told to run graphs here: the workers' limits do not
    # bound what this process holds.
    with dask.config.set(scheduler="sync"):
        assert held.fits_in_memory(most)
        assert not held.fits_in_memory(most + 1)
