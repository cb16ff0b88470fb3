"""DocumentDataset: the wrapper's own operations."""

from __future__ import annotations

import importlib.util

import dask.dataframe as dd
import pandas as pd
import pytest
from conftest import docs

from curator_dask import DocumentDataset


def test_wraps_only_dask_dataframes():
    with pytest.raises(TypeError, match="from_pandas"):
        DocumentDataset(pd.DataFrame({"text": ["a"]}))


def test_head_persist_and_repartition():
    ds = DocumentDataset.from_pandas(pd.DataFrame(docs(30)), npartitions=3)
    assert ds.head(2)["n"].tolist() == [0, 1]
    persisted = ds.persist()
    assert persisted.df.compute()["n"].tolist() == list(range(30))
    assert ds.repartition(npartitions=1).npartitions == 1
    assert len(ds.repartition(partition_size="1KiB").df) == 30
    with pytest.raises(ValueError, match="exactly one"):
        ds.repartition()


def test_plan_is_kept_while_partitions_map_to_it(tmp_path):
    from conftest import write_jsonl

    write_jsonl(tmp_path / "a.jsonl", docs(100))
    ds = DocumentDataset.read_jsonl(str(tmp_path), blocksize="1KiB")
    assert ds.plan is not None and len(ds.plan) == ds.npartitions
    assert ds.persist().plan == ds.plan
    assert ds.repartition(npartitions=2).plan is None


def test_to_backend_pandas_is_a_no_op_and_cudf_needs_the_gpu_extra():
    ds = DocumentDataset.from_pandas(pd.DataFrame(docs(3)))
    assert isinstance(ds.to_backend("pandas").df, dd.DataFrame)
    with pytest.raises(ValueError, match="backend must be one of"):
        ds.to_backend("polars")
    if importlib.util.find_spec("cudf") is None:
        with pytest.raises(ImportError, match=r"curator-dask\[gpu\]"):
            ds.to_backend("cudf")


def test_dropped_counts_sum_over_partitions():
    from curator_dask import processing_stage
    from curator_dask.dropped import record_dropped

    @processing_stage(name="drop_odd")
    def drop_odd(df):
        keep = df["n"] % 2 == 0
        return record_dropped(df[keep], "odd", int((~keep).sum()))

    ds = drop_odd(DocumentDataset.from_pandas(pd.DataFrame(docs(11)), npartitions=3))
    assert len(ds.df) == 6
    assert ds.dropped_counts() == {"odd": 5}
