"""A partition (frame and counts) is counted at its frame's size: distributed decides
where a task's dependents run (moving a result costs its size) and what to spill from
it."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
from dask.sizeof import sizeof
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.partition import Partition

texts = st.lists(st.text(max_size=300), max_size=200)


@settings(max_examples=50, deadline=None)
@given(texts=texts, as_arrow=st.booleans(),
       dropped=st.dictionaries(st.sampled_from(["empty", "short", "exact_duplicate"]),
                               st.integers(0, 10**6), max_size=3))
def test_a_partition_counts_its_frame(texts, as_arrow, dropped):
    frame = (pa.table({"text": pa.array(texts, pa.string())}) if as_arrow
             else pd.DataFrame({"text": pd.array(texts, dtype="string[pyarrow]")}))
    part = Partition(frame, dropped=dropped)
    assert sizeof(frame) <= sizeof(part) <= sizeof(frame) + 4096


def test_the_scheduler_counts_a_persisted_dataset_at_its_documents_size(client):
    from distributed import futures_of, wait

    frame = pd.DataFrame({"id": range(2000), "text": ["a longer text than most " * 20] * 2000})
    ds = DocumentDataset.from_pandas(frame, npartitions=2).map_partitions(
        lambda df: df.assign(n=1)).persist()
    futures = futures_of(ds.to_partitions())
    wait(futures)
    counted = client.nbytes([f.key for f in futures], summary=False)
    text_bytes = sum(len(t) for t in frame["text"])
    # Each partition holds half the texts; 56 bytes each before partitions had a size.
    assert all(size >= text_bytes // 2 for size in counted.values()), counted
