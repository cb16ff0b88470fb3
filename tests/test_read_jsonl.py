"""Reading JSONL: inputs, partitioning, compression and options.

Bad input (malformed lines, bad UTF-8, missing columns, empty or missing files) is in
the data-safety catalog, tests/reliability/test_bad_input_known.py.
"""

from __future__ import annotations

import bz2
import gzip
import json

import fsspec
import pandas as pd
import pyarrow as pa
import pytest
import zstandard
from conftest import docs, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset


def texts(ds: DocumentDataset) -> list[str]:
    return ds.df.compute()["text"].tolist()


def test_directory_is_read_recursively_in_sorted_order(tmp_path):
    write_jsonl(tmp_path / "b.jsonl", docs(2, start=10))
    write_jsonl(tmp_path / "a.jsonl", docs(2, start=0))
    write_jsonl(tmp_path / "sub" / "c.jsonl", docs(2, start=20))
    (tmp_path / "notes.txt").write_text("not jsonl")
    ds = DocumentDataset.read_jsonl(str(tmp_path), files_per_partition=1)
    assert ds.npartitions == 3
    assert [t.split()[1] for t in texts(ds)] == ["0", "1", "10", "11", "20", "21"]


def test_glob_and_list_of_paths(tmp_path):
    for i in range(3):
        write_jsonl(tmp_path / f"part{i}.jsonl", docs(1, start=i))
    by_glob = DocumentDataset.read_jsonl(str(tmp_path / "part[02].jsonl"))
    assert [t.split()[1] for t in texts(by_glob)] == ["0", "2"]
    by_list = DocumentDataset.read_jsonl(
        [str(tmp_path / "part2.jsonl"), str(tmp_path / "part1.jsonl")]
    )
    assert [t.split()[1] for t in texts(by_list)] == ["1", "2"]


def test_strings_are_arrow_backed_and_numbers_keep_their_type(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", docs(3))
    df = DocumentDataset.read_jsonl(str(tmp_path)).df
    assert isinstance(df.dtypes["text"], pd.StringDtype) and df.dtypes["text"].storage == "pyarrow"
    # Nullable: an integer column with a null in some partition stays integers.
    assert df.dtypes["n"] == pd.Int64Dtype()
    assert df.compute()["n"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("suffix,compress", [
    (".jsonl.gz", gzip.compress),
    (".jsonl.bz2", bz2.compress),
    (".jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b)),
])
def test_compressed_jsonl_by_extension(tmp_path, suffix, compress):
    rows = docs(5)
    payload = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (tmp_path / f"data{suffix}").write_bytes(compress(payload))
    ds = DocumentDataset.read_jsonl(str(tmp_path), blocksize="10B")
    assert ds.npartitions == 1  # a compressed file cannot be split
    assert texts(ds) == [r["text"] for r in rows]


def test_blocksize_splits_a_large_file_and_reads_each_line_once(tmp_path):
    rows = docs(500)
    write_jsonl(tmp_path / "big.jsonl", rows)
    ds = DocumentDataset.read_jsonl(str(tmp_path), blocksize="2KiB")
    assert ds.npartitions > 5
    assert texts(ds) == [r["text"] for r in rows]


def test_blocksize_groups_small_files(tmp_path):
    for i in range(10):
        write_jsonl(tmp_path / f"f{i:02d}.jsonl", docs(2, start=2 * i))
    ds = DocumentDataset.read_jsonl(str(tmp_path), blocksize="1MiB")
    assert ds.npartitions == 1
    assert len(ds.df.compute()) == 20


def test_files_per_partition_and_blocksize_are_exclusive(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", docs(1))
    with pytest.raises(ValueError, match="either files_per_partition or blocksize, not both"):
        DocumentDataset.read_jsonl(str(tmp_path), files_per_partition=2, blocksize="1MiB")


def test_columns_add_filename_and_input_meta(tmp_path):
    write_jsonl(tmp_path / "x" / "one.jsonl", [{"text": "a", "n": 1, "extra": "e"}])
    write_jsonl(tmp_path / "x" / "two.jsonl", [{"text": "b", "n": 2, "extra": "f"}])
    ds = DocumentDataset.read_jsonl(str(tmp_path), columns=["text", "n"], add_filename=True,
                                    input_meta={"n": "float64"})
    out = ds.df.compute()
    assert list(out.columns) == ["text", "n", "file_name"]
    assert out["n"].dtype == pd.ArrowDtype(pa.float64())
    assert out["file_name"].tolist() == ["x/one.jsonl", "x/two.jsonl"]


def test_memory_filesystem(tmp_path):
    fs = fsspec.filesystem("memory")
    with fs.open("/corpus/a.jsonl", "wb") as f:
        f.write(b'{"text": "in memory"}\n')
    assert texts(DocumentDataset.read_jsonl("memory://corpus")) == ["in memory"]


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.fixed_dictionaries(
           {"id": st.integers(-2**53, 2**53), "text": _TEXT},
           optional={"meta": st.one_of(st.none(), _TEXT), "score": st.floats(allow_nan=False)}),
           min_size=1, max_size=25),
       files=st.integers(min_value=1, max_value=3))
def test_local_files_read_from_a_memory_map_equal_the_streamed_read(tmp_path_factory, records,
                                                                    files):
    """Uncompressed local files are parsed from a memory map, whole or by byte range;
    everything else is streamed. The same lines give the same frame either way: the
    same bytes on the memory filesystem (streamed), gzip-compressed locally (streamed),
    and plain locally (mapped)."""
    root = tmp_path_factory.mktemp("mapped")
    memory = fsspec.filesystem("memory")
    if memory.exists("/mapped"):
        memory.rm("/mapped", recursive=True)
    for i in range(files):
        part = records[i::files]
        raw = "".join(json.dumps(r, ensure_ascii=i % 2 == 0) + "\n" for r in part).encode()
        (root / "plain").mkdir(exist_ok=True)
        (root / "plain" / f"f{i}.jsonl").write_bytes(raw)
        (root / "gz").mkdir(exist_ok=True)
        (root / "gz" / f"f{i}.jsonl.gz").write_bytes(gzip.compress(raw))
        with memory.open(f"/mapped/f{i}.jsonl", "wb") as f:
            f.write(raw)

    def frame(path, **kw):
        out = DocumentDataset.read_jsonl(path, **kw).df.compute(scheduler="sync")
        return out.sort_values("id", kind="stable").reset_index(drop=True)

    streamed = frame("memory://mapped")
    pd.testing.assert_frame_equal(frame(str(root / "plain")), streamed)
    pd.testing.assert_frame_equal(frame(str(root / "gz")), streamed)
    # Byte ranges of the mapped files: every document once, the same values.
    pd.testing.assert_frame_equal(frame(str(root / "plain"), blocksize=64), streamed)


def test_text_field_selects_another_column(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"content": "x"}])
    ds = DocumentDataset.read_jsonl(str(tmp_path), text_field="content")
    assert ds.df.compute()["content"].tolist() == ["x"]


def test_reads_on_a_cluster_of_worker_processes(tmp_path, client):
    for i in range(4):
        write_jsonl(tmp_path / f"f{i}.jsonl", docs(25, start=25 * i))
    ds = DocumentDataset.read_jsonl(str(tmp_path), files_per_partition=1)
    out = ds.df.compute()
    assert sorted(out["n"].tolist()) == list(range(100))
