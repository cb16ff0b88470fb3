"""The global shuffle: every document once, in an order fixed by the seed whatever the
partitioning or the cluster, spread evenly, and usable as a pipeline barrier."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import write_jsonl

from curator_dask import (
    AddId,
    DocumentDataset,
    JsonlReader,
    ParquetWriter,
    Pipeline,
    StreamingExecutor,
)
from curator_dask.training import Shuffle, ShuffleError, shuffle_dataset


def frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"id": range(n), "text": [f"document {i}" for i in range(n)]})


def order(ds: DocumentDataset) -> list[int]:
    return ds.df.compute()["id"].tolist()


def test_a_shuffle_is_a_permutation_fixed_by_its_seed():
    ds = DocumentDataset.from_pandas(frame(1000), npartitions=4)
    shuffled = order(shuffle_dataset(ds, seed=7))
    assert sorted(shuffled) == list(range(1000)) and shuffled != list(range(1000))
    assert order(shuffle_dataset(ds, seed=7)) == shuffled
    assert order(shuffle_dataset(ds, seed=8)) != shuffled
    # Spread evenly: the first half of the output holds about half of the first half of
    # the input (a hypergeometric count, sd ~ 11, here with a fixed seed).
    assert abs(sum(i < 500 for i in shuffled[:500]) - 250) < 60


def test_the_order_does_not_depend_on_the_partitions():
    one = order(shuffle_dataset(DocumentDataset.from_pandas(frame(300), npartitions=1), seed=3,
                                npartitions=5))
    many = DocumentDataset.from_pandas(frame(300).iloc[::-1], npartitions=7)
    assert order(shuffle_dataset(many, seed=3, npartitions=2)) == one


def test_without_ids_the_text_keys_the_order():
    texts = DocumentDataset.from_pandas(frame(200)[["text"]], npartitions=3)
    shuffled = shuffle_dataset(texts, seed=1).df.compute()["text"].tolist()
    assert sorted(shuffled) == sorted(frame(200)["text"])
    assert shuffled != frame(200)["text"].tolist()
    again = DocumentDataset.from_pandas(frame(200)[["text"]], npartitions=5)
    assert shuffle_dataset(again, seed=1).df.compute()["text"].tolist() == shuffled


@pytest.mark.slow
def test_a_pipeline_shuffles_on_the_cluster_as_in_process(tmp_path, client):
    for k in range(3):
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl",
                    [{"text": f"text {k} {i}"} for i in range(50)])
    result = (Pipeline("shuffled")
              .add_stage(JsonlReader(str(tmp_path / "in"), files_per_partition=1))
              .add_stage(AddId())
              .add_stage(Shuffle(seed=11, npartitions=4))
              .add_stage(ParquetWriter(str(tmp_path / "out")))
              .run(StreamingExecutor(progress=False)))
    assert result.rows == 150
    written = pd.read_parquet(tmp_path / "out")  # parts in name order
    ds = AddId()(DocumentDataset.read_jsonl(str(tmp_path / "in"), files_per_partition=1))
    expected = shuffle_dataset(ds, seed=11, npartitions=4).df.compute()
    assert written["id"].tolist() == expected["id"].tolist()
    assert written["text"].tolist() == expected["text"].tolist()


@pytest.mark.parametrize("seed", [None, 1.5, "42", True])
def test_a_shuffle_without_an_integer_seed_is_refused_before_it_runs(seed):
    with pytest.raises(ShuffleError, match="seed must be an integer") as refused:
        Shuffle(seed=seed)
    assert isinstance(refused.value, ValueError)
