"""Parquet reading, and writing both formats: round trips, names, atomicity, modes."""

from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import docs, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.io import MissingColumnError, TextTypeError
from curator_dask.io.files import list_files
from curator_dask.io.parquet import read_parquet_table
from curator_dask.io.planner import plan_partitions


def frame(n: int, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame(docs(n, start=start))


def test_parquet_blocksize_splits_by_row_groups(tmp_path):
    table = pa.Table.from_pandas(frame(1000), preserve_index=False)
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=100)
    whole = DocumentDataset.read_parquet(str(tmp_path))
    split = DocumentDataset.read_parquet(
        str(tmp_path), blocksize=os.path.getsize(tmp_path / "a.parquet") // 4
    )
    assert whole.npartitions == 1
    assert 3 <= split.npartitions <= 10
    assert split.df.compute()["n"].tolist() == list(range(1000))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=4),
       blocks=st.integers(min_value=2, max_value=12))
def test_row_groups_larger_than_a_partition_are_read_in_row_ranges_once_each(
        tmp_path, groups, blocks):
    path = tmp_path / f"g{'-'.join(map(str, groups))}-{blocks}.parquet"
    n = sum(groups)
    with pq.ParquetWriter(path, pa.schema([("text", pa.string()), ("n", pa.int64())])) as w:
        first = 0
        for size in groups:
            w.write_table(pa.table({"text": [f"document {i} " * 20 for i in
                                             range(first, first + size)],
                                    "n": list(range(first, first + size))}))
            first += size
    blocksize = max(1, os.path.getsize(path) // blocks)
    ds = DocumentDataset.read_parquet(str(path), blocksize=blocksize)
    slices = [s for spec in ds.plan for s in spec.slices]
    assert ds.df.compute()["n"].tolist() == list(range(n))  # every row once, in order
    assert ds.source.most_rows() == n  # from the footers, whatever the cut
    ranges = [s.rows for s in slices if s.rows is not None]
    assert all(0 <= a < b for a, b in ranges)
    # Only a row group too large for the planned partitions is read in ranges.
    if len(groups) == 1 and blocks > 1 and groups[0] > 1:
        assert len(ranges) >= 2


def test_an_error_in_a_row_range_names_the_row_in_the_file(tmp_path):
    path = tmp_path / "one-group.parquet"
    pq.write_table(pa.table({"text": list(range(300)), "n": list(range(300))}), path)
    fs, listed = list_files(str(tmp_path), [".parquet"])
    plan = plan_partitions(listed, blocksize=os.path.getsize(path) // 3, fs=fs, fmt="parquet")
    first, _ = plan[1].slices[0].rows
    assert first > 0  # the second range of the one row group
    with pytest.raises(TextTypeError) as err:
        read_parquet_table(plan[1], fs, pa.schema([("text", pa.string()), ("n", pa.int64())]))
    assert (err.value.path, err.value.line) == (str(path), first + 1)


def test_parquet_columns_and_filename(tmp_path):
    pq.write_table(pa.Table.from_pandas(frame(3), preserve_index=False), tmp_path / "a.parquet")
    ds = DocumentDataset.read_parquet(str(tmp_path), columns=["text"], add_filename="source")
    out = ds.df.compute()
    assert list(out.columns) == ["text", "source"] and set(out["source"]) == {"a.parquet"}


def test_parquet_missing_text_column(tmp_path):
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "a.parquet")
    with pytest.raises(MissingColumnError,
                       match=r"'text' not found in .*a\.parquet; it has \['body'\]"):
        DocumentDataset.read_parquet(str(tmp_path)).df.compute()


@pytest.mark.parametrize("fmt,compression", [
    ("parquet", "snappy"), ("parquet", "zstd"),
    ("jsonl", None), ("jsonl", "gzip"), ("jsonl", "zstd"), ("jsonl", "bz2"),
])
def test_round_trip(tmp_path, fmt, compression):
    source = frame(50)
    write_jsonl(tmp_path / "in" / "a.jsonl", source.to_dict("records"))
    ds = DocumentDataset.read_jsonl(str(tmp_path / "in"), blocksize="1KiB")
    writer = ds.to_parquet if fmt == "parquet" else ds.to_jsonl
    result = writer(str(tmp_path / "out"), compression=compression)
    assert result.rows == 50 and len(result.files) == ds.npartitions
    names = sorted(n for n in os.listdir(tmp_path / "out") if not n.startswith("."))
    suffix = {"parquet": ".parquet"}.get(fmt) or ".jsonl" + {
        None: "",
        "gzip": ".gz",
        "zstd": ".zst",
        "bz2": ".bz2",
    }[compression]
    assert names == [f"part-{i:05d}{suffix}" for i in range(ds.npartitions)]
    reader = DocumentDataset.read_parquet if fmt == "parquet" else DocumentDataset.read_jsonl
    back = reader(str(tmp_path / "out")).df.compute().reset_index(drop=True)
    pd.testing.assert_frame_equal(back, source, check_dtype=False)


def visible(path) -> list[str]:
    return sorted(n for n in os.listdir(path) if not n.startswith("."))


def test_non_empty_output_is_refused_unless_overwrite_or_append(tmp_path):
    ds = DocumentDataset.from_pandas(frame(4), npartitions=2)
    ds.to_parquet(str(tmp_path / "out"))
    with pytest.raises(FileExistsError, match=r"not empty .*mode='overwrite'"):
        ds.to_parquet(str(tmp_path / "out"))
    ds.to_parquet(str(tmp_path / "out"), mode="append")
    assert visible(tmp_path / "out") == [f"part-{i:05d}.parquet" for i in range(4)]
    ds.to_parquet(str(tmp_path / "out"), mode="overwrite")
    assert visible(tmp_path / "out") == ["part-00000.parquet", "part-00001.parquet"]
    # A file curator-dask did not write is never deleted by "overwrite" (it used to be);
    # the whole-directory wipe has to be asked for.
    (tmp_path / "out" / "stray.txt").write_text("old")
    with pytest.raises(FileExistsError, match=r"'stray\.txt'.*mode='overwrite_all'"):
        ds.to_parquet(str(tmp_path / "out"), mode="overwrite")
    assert (tmp_path / "out" / "stray.txt").read_text() == "old"
    ds.to_parquet(str(tmp_path / "out"), mode="overwrite_all")
    assert visible(tmp_path / "out") == ["part-00000.parquet", "part-00001.parquet"]


def test_a_failing_partition_leaves_no_part_that_looks_complete(tmp_path):
    # Parquet has no complex type: the writer fails after opening its file.
    bad = pd.DataFrame({"text": ["ok", "ok"], "z": [1 + 2j, 3j]})
    ds = DocumentDataset.from_pandas(bad, npartitions=1)
    with pytest.raises(pa.ArrowNotImplementedError):
        ds.to_parquet(str(tmp_path / "out"))
    # Only the manifest, written before any part, is left; a retry may write there.
    assert os.listdir(tmp_path / "out") == [".curator-output.json"]
    good = DocumentDataset.from_pandas(frame(2), npartitions=1)
    assert good.to_parquet(str(tmp_path / "out")).rows == 2


def test_write_to_filename_writes_each_source_file_back(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", docs(3, prefix="a"))
    write_jsonl(tmp_path / "in" / "sub" / "b.jsonl", docs(2, prefix="b"))
    ds = DocumentDataset.read_jsonl(str(tmp_path / "in"), add_filename=True, blocksize="1MiB")
    result = ds.to_jsonl(str(tmp_path / "out"), write_to_filename=True)
    assert result.rows == 5
    a = pd.read_json(tmp_path / "out" / "a.jsonl", lines=True)
    b = pd.read_json(tmp_path / "out" / "sub" / "b.jsonl", lines=True)
    assert a["text"].str.startswith("a").all() and len(a) == 3
    assert b["text"].str.startswith("b").all() and len(b) == 2
    assert "file_name" not in a.columns


def test_write_to_filename_refuses_files_split_by_blocksize(tmp_path):
    write_jsonl(tmp_path / "in" / "big.jsonl", docs(200))
    ds = DocumentDataset.read_jsonl(str(tmp_path / "in"), add_filename=True, blocksize="1KiB")
    with pytest.raises(ValueError, match="split across partitions"):
        ds.to_parquet(str(tmp_path / "out"), write_to_filename=True)


def test_write_to_filename_needs_the_filename_column(tmp_path):
    ds = DocumentDataset.from_pandas(frame(2))
    with pytest.raises(KeyError, match="add_filename=True"):
        ds.to_parquet(str(tmp_path / "out"), write_to_filename=True)


def test_a_file_without_a_text_column_reads_with_text_field_none_as_the_error_says(tmp_path):
    (tmp_path / "ids").mkdir()
    pd.DataFrame({"id": [3, 1, 2]}).to_parquet(tmp_path / "ids" / "a.parquet")
    with pytest.raises(MissingColumnError, match=r"text_field=None to read files that have "
                                                 r"none \(a list of ids"):
        DocumentDataset.read_parquet(str(tmp_path / "ids")).df.compute()
    ids = DocumentDataset.read_parquet(str(tmp_path / "ids"), text_field=None)
    assert list(ids.df.columns) == ["id"]
    assert ids.df.compute()["id"].tolist() == [3, 1, 2]
