"""rows_where: the rows of a frame under a boolean mask, as ``df[keep]`` gives them, with
each column filtered where it lies (no concatenation of an Arrow column's chunks)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.backends import rows_where
from curator_dask.stages.filters import ScoreFilter, WordCountFilter


def chunked_text(values: list[str | None], pieces: int) -> pd.Series:
    """Arrow-backed strings in ``pieces`` chunks, as a partition read from several files."""
    bounds = np.linspace(0, len(values), pieces + 1).astype(int)
    chunks = [pa.array(values[a:b], type=pa.large_string())
              for a, b in itertools.pairwise(bounds)]
    return pd.Series(pd.arrays.ArrowExtensionArray(pa.chunked_array(chunks, pa.large_string())))


@st.composite
def frames(draw):
    n = draw(st.integers(0, 30))
    texts = draw(st.lists(st.one_of(st.none(), st.text(max_size=8)), min_size=n, max_size=n))
    pieces = draw(st.integers(1, 4))
    numbers = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    df = pd.DataFrame({
        "text": pd.Series(texts, dtype="str"),
        "arrow": chunked_text(texts, pieces),
        "n": np.asarray(numbers, dtype=np.int64),
        "masked": pd.array([None if v == 0 else v for v in numbers], dtype="Int64"),
        "score": np.asarray(numbers, dtype=np.float64) / 3,
        "flag": np.asarray([v > 0 for v in numbers], dtype=bool),
        "kind": pd.Categorical([str(v % 3) for v in numbers]),
        "when": pd.to_datetime(np.asarray(numbers, dtype=np.int64), unit="D"),
        "obj": pd.Series([{"k": v} for v in numbers], dtype=object),
    })
    if draw(st.booleans()):  # a repeated column name
        df.columns = ["text", "arrow", "n", "n", "score", "flag", "kind", "when", "obj"]
    if draw(st.booleans()):  # a non-unique, unordered index
        df.index = pd.Index(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)))
    df.attrs["source"] = "generated"
    return df


@settings(max_examples=80, deadline=None)
@given(df=frames(), data=st.data())
def test_rows_where_equals_boolean_indexing(df, data):
    keep = np.asarray(data.draw(st.lists(st.booleans(), min_size=len(df), max_size=len(df))),
                      dtype=bool)
    as_series = data.draw(st.booleans())
    mask = pd.Series(keep, index=df.index) if as_series and df.index.is_unique else keep
    got = rows_where(df, mask)
    pd.testing.assert_frame_equal(got, df[mask])
    assert got.attrs == df.attrs


@pytest.mark.filterwarnings("ignore:Boolean Series key will be reindexed")
def test_masks_that_mean_more_than_positions_are_handed_to_boolean_indexing():
    df = pd.DataFrame({"a": [1, 2, 3]}, index=[10, 20, 30])
    # Aligned on the index, not by position.
    other_order = pd.Series([True, False, False], index=[30, 20, 10])
    pd.testing.assert_frame_equal(rows_where(df, other_order), df[other_order])
    assert rows_where(df, other_order)["a"].tolist() == [3]
    # Nullable booleans with a missing value: pandas' own rule for them.
    nullable = pd.Series([True, pd.NA, True], index=df.index, dtype="boolean")
    pd.testing.assert_frame_equal(rows_where(df, nullable), df[nullable])


def test_an_arrow_column_keeps_its_chunks_instead_of_being_concatenated():
    texts = [f"document {i}" for i in range(100)]
    df = pd.DataFrame({"text": chunked_text(texts, 4)})
    keep = np.arange(100) % 3 != 0
    out = rows_where(df, keep)
    column = out["text"].array._pa_array
    # Filtered chunk by chunk: four chunks, none holding a copy of the whole column.
    assert column.num_chunks == 4
    assert out["text"].tolist() == [t for t, k in zip(texts, keep, strict=True) if k]


def test_a_filter_stage_on_chunked_text_keeps_the_same_rows_and_counts():
    texts = [f"{'word ' * (i % 7)}end {i}" for i in range(200)]
    frame = pd.DataFrame({"id": np.arange(200), "text": chunked_text(texts, 5)})
    ds = DocumentDataset.from_pandas(frame, npartitions=3)
    kept = ScoreFilter(WordCountFilter(min_words=4))(ds)
    result = kept.df.compute()
    want = [i for i, t in enumerate(texts) if len(t.split()) >= 4]
    assert result["id"].tolist() == want
    assert result["text"].tolist() == [texts[i] for i in want]
    assert kept.dropped_counts() == {"word_count": 200 - len(want)}


def test_a_series_or_a_subclass_of_dataframe_is_indexed_as_it_is():
    class Tagged(pd.DataFrame):
        @property
        def _constructor(self):
            return Tagged

    keep = np.array([True, False, True])
    series = pd.Series([1, 2, 3])
    assert rows_where(series, keep).tolist() == [1, 3]
    out = rows_where(Tagged({"a": [1, 2, 3]}), keep)
    assert type(out) is Tagged
    assert out["a"].tolist() == [1, 3]
