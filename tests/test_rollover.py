"""Output files of a chosen size (target_file_size): every file within its size, filled in
order, every document once, names that sort in document order, and resume intact."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import tempfile
import uuid

import fsspec
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import docs, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability.test_round_trip import tables

from curator_dask import DocumentDataset, JsonlReader, ParquetWriter, Pipeline, StreamingExecutor
from curator_dask.io import ResumeMismatchError
from curator_dask.io.rollover import FileSize, FileSizeError, cut_points
from curator_dask.io.writers import WriteSpec, write_partition


@given(sizes=st.lists(st.integers(0, 50), max_size=60), limit=st.integers(1, 120))
def test_cut_points_fill_each_file_in_order_up_to_the_limit(sizes, limit):
    starts = cut_points(sizes, limit).tolist()
    stops = [*starts[1:], len(sizes)]
    assert starts[0] == 0 and all(a < b for a, b in itertools.pairwise(starts))
    for start, stop in zip(starts, stops, strict=True):
        piece = sizes[start:stop]
        assert sum(piece) <= limit or len(piece) == 1
        if stop < len(sizes):  # full: the next row would not have fit
            assert sum(piece) + sizes[stop] > limit


@pytest.mark.parametrize("given_size, expected", [
    (1000, FileSize(1000, "bytes")), ("1KiB", FileSize(1024, "bytes")),
    ("2.5M tokens", FileSize(2_500_000, "tokens")),
    ("100_000 documents", FileSize(100_000, "documents")),
    ("7 docs", FileSize(7, "documents")), (None, None)])
def test_target_file_sizes_are_read_in_their_unit(given_size, expected):
    assert FileSize.parse(given_size) == expected


@pytest.mark.parametrize("bad", ["12 bananas", "-5", 0, "1.5 documents", True, [1]])
def test_a_size_that_cannot_be_read_is_an_error_saying_what_is_read(bad):
    with pytest.raises(FileSizeError, match="target_file_size"):
        FileSize.parse(bad)


def test_tokens_are_for_the_tokenizing_writers():
    with pytest.raises(FileSizeError, match="tokenizing writers"):
        ParquetWriter("out/", target_file_size="1000 tokens")


def visible(path) -> list[str]:
    return sorted(n for n in os.listdir(path) if not n.startswith("."))


frames = st.lists(st.text(max_size=40), min_size=0, max_size=40).map(
    lambda texts: pd.DataFrame({"text": texts, "n": range(len(texts))}))


@given(frame=frames, limit=st.integers(30, 400), partitions=st.integers(1, 3))
@settings(max_examples=15, deadline=None)
def test_jsonl_files_hold_at_most_their_bytes_and_every_document_once(frame, limit, partitions):
    out = tempfile.mkdtemp()
    ds = DocumentDataset.from_pandas(frame, npartitions=partitions)
    result = ds.to_jsonl(out, target_file_size=limit, mode="overwrite")
    files = visible(out)
    assert [os.path.join(out, f) for f in files] == result.files
    lines = []
    for name in files:
        with open(os.path.join(out, name), "rb") as handle:
            data = handle.read()
        assert len(data) <= limit or data.count(b"\n") == 1, name
        lines += data.splitlines()
    back = [json.loads(line) for line in lines]
    assert back == frame.to_dict("records")
    assert result.rows == len(frame)


@given(table=tables(json_only=True, max_rows=30), limit=st.integers(1, 300),
       unit=st.sampled_from(["bytes", "documents"]))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_jsonl_cut_by_size_is_the_bytes_of_the_whole_part_in_pieces(table, limit, unit):
    """Values a JSON writer could round (big integers, floats, nulls, nested values, text
    with line separators) are written as the whole part writes them, cut at line ends."""
    fs = fsspec.filesystem("memory")
    path = f"/rollover-exact-{uuid.uuid4().hex}"
    whole = write_partition(table, WriteSpec(path=path + "/whole", fmt="jsonl"), 0, fs)
    cut = write_partition(table, WriteSpec(path=path + "/cut", fmt="jsonl",
                                           target_file_size=f"{limit} {unit}"), 0, fs)
    pieces = [fs.cat_file(f) for f in cut["files"]]
    assert b"".join(pieces) == fs.cat_file(whole["files"][0])
    for piece in pieces:
        size = len(piece) if unit == "bytes" else piece.count(b"\n")
        assert size <= limit or piece.count(b"\n") == 1
    assert cut["rows"] == whole["rows"] == table.num_rows


def test_compressed_jsonl_counts_the_bytes_before_compression(tmp_path):
    frame = pd.DataFrame(docs(200))
    result = DocumentDataset.from_pandas(frame, npartitions=2).to_jsonl(
        str(tmp_path), compression="gzip", target_file_size="2KiB", mode="overwrite")
    assert len(result.files) > 2
    assert all(n.endswith(".jsonl.gz") for n in visible(tmp_path))
    contents = [gzip.decompress((tmp_path / n).read_bytes()) for n in visible(tmp_path)]
    assert all(len(c) <= 2048 for c in contents)
    back = pd.read_json(io.StringIO("".join(c.decode() for c in contents)), lines=True)
    assert back["n"].tolist() == frame["n"].tolist()


def test_parquet_files_of_a_number_of_documents(tmp_path):
    frame = pd.DataFrame(docs(23))
    DocumentDataset.from_pandas(frame, npartitions=2).to_parquet(
        str(tmp_path), target_file_size="5 documents")
    # The first partition's 12 documents are cut 5, 5, 2; names sort in document order.
    assert visible(tmp_path)[:3] == ["part-00000-00000.parquet", "part-00000-00001.parquet",
                                     "part-00000-00002.parquet"]
    rows = [pq.read_metadata(tmp_path / n).num_rows for n in visible(tmp_path)]
    assert rows == [5, 5, 2, 5, 5, 1]
    back = pd.read_parquet(tmp_path)
    assert back["n"].tolist() == frame["n"].tolist()


def test_parquet_files_of_a_size_in_bytes_read_back_whole(tmp_path):
    frame = pd.DataFrame(docs(300))
    result = DocumentDataset.from_pandas(frame, npartitions=1).to_parquet(
        str(tmp_path), target_file_size="4KiB", compression=None)
    assert len(result.files) > 2
    back = pd.concat([pd.read_parquet(f) for f in result.files], ignore_index=True)
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)


def test_a_rewritten_part_leaves_no_piece_of_an_earlier_attempt(tmp_path):
    """A part written again (a retried task, a resume) with fewer rows than before (a
    stage that is not deterministic) must not leave the earlier attempt's extra pieces."""
    fs = fsspec.filesystem("file")
    spec = WriteSpec(path=str(tmp_path), fmt="parquet", target_file_size="2 documents")
    write_partition(pd.DataFrame(docs(7)), spec, 3, fs)
    assert len(visible(tmp_path)) == 4
    stats = write_partition(pd.DataFrame(docs(3)), spec, 3, fs)
    assert visible(tmp_path) == ["part-00003-00000.parquet", "part-00003-00001.parquet"]
    assert sorted(os.path.basename(f) for f in stats["files"]) == visible(tmp_path)


@pytest.mark.slow
def test_a_streaming_run_resumed_after_a_crash_writes_every_document_once(tmp_path, client):
    rows = docs(120)
    for k in range(4):
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl", rows[k * 30:(k + 1) * 30])

    def pipeline(size="7 documents"):
        return (Pipeline("sized")
                .add_stage(JsonlReader(str(tmp_path / "in"), files_per_partition=1))
                .add_stage(ParquetWriter(str(tmp_path / "out"), target_file_size=size)))

    first = pipeline().run(StreamingExecutor(progress=False))
    assert first.rows == 120 and len(first.files) == 4 * 5
    # A crash in the middle of part 2: its marker and its last pieces never written.
    os.remove(tmp_path / "out" / ".part-00002.done")
    for name in ("part-00002-00003.parquet", "part-00002-00004.parquet"):
        os.remove(tmp_path / "out" / name)
    resumed = pipeline().run(StreamingExecutor(resume=True, progress=False))
    assert resumed.partitions_skipped == 3
    back = pd.read_parquet(tmp_path / "out")
    assert sorted(back["n"].tolist()) == list(range(120))
    assert all(pq.read_metadata(tmp_path / "out" / n).num_rows <= 7
               for n in visible(tmp_path / "out"))
    # Files of another size are another output: a resume into it is refused.
    with pytest.raises(ResumeMismatchError, match="target_file_size"):
        pipeline("9 documents").run(StreamingExecutor(resume=True, progress=False))
