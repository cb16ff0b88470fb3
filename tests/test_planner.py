"""The partition planner: deterministic plans, and every line read exactly once."""

from __future__ import annotations

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask.io.files import list_files
from curator_dask.io.jsonl import read_slice_bytes
from curator_dask.io.planner import check_partitioning, plan_partitions


def _write(fs, path: str, lines: list[bytes], trailing_newline: bool = True) -> None:
    body = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    with fs.open(path, "wb") as f:
        f.write(body)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(
        st.lists(st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\n", b"_").replace(b"\r", b"_")),
                 min_size=0, max_size=30),
        min_size=1, max_size=4,
    ),
    blocksize=st.integers(min_value=1, max_value=400),
    trailing_newline=st.booleans(),
)
def test_every_line_is_read_exactly_once_for_any_blocksize(files, blocksize, trailing_newline):
    fs = fsspec.filesystem("memory")
    root = "/planner-prop"
    if fs.exists(root):
        fs.rm(root, recursive=True)
    expected = []
    for i, lines in enumerate(files):
        _write(fs, f"{root}/f{i}.jsonl", lines, trailing_newline)
        expected.extend(lines)
    fs, listed = list_files(f"memory://{root}", [".jsonl"])
    plan = plan_partitions(listed, blocksize=blocksize, fs=fs)
    got = []
    for spec in plan:
        for piece in spec.slices:
            data = read_slice_bytes(fs, piece)
            got.extend(data.splitlines())
    assert got == expected
    # Re-planning the same input gives the same plan.
    assert plan_partitions(listed, blocksize=blocksize, fs=fs) == plan


def test_files_per_partition_groups_whole_files():
    fs = fsspec.filesystem("memory")
    for i in range(5):
        _write(fs, f"/fpp/f{i}.jsonl", [b'{"text": "x"}'])
    fs, listed = list_files("memory:///fpp", [".jsonl"])
    plan = plan_partitions(listed, files_per_partition=2)
    assert [[s.file.name for s in p.slices] for p in plan] == [
        ["f0.jsonl", "f1.jsonl"], ["f2.jsonl", "f3.jsonl"], ["f4.jsonl"]]
    assert all(s.whole for p in plan for s in p.slices)
    assert [p.index for p in plan] == [0, 1, 2]


@pytest.mark.parametrize("fpp,blocksize,message", [
    (2, "1MiB", "not both"),
    (0, None, "positive integer"),
    (None, 0, "must be positive"),
])
def test_bad_partitioning_arguments(fpp, blocksize, message):
    with pytest.raises(ValueError, match=message):
        check_partitioning(fpp, blocksize)


def test_default_blocksize_is_256mib():
    assert check_partitioning(None, None) == 256 * 2**20


@settings(max_examples=100, deadline=None)
@given(
    lines=st.lists(st.binary(min_size=1, max_size=30).map(lambda b: b.replace(b"\n", b"_")),
                   min_size=0, max_size=40),
    blocksize=st.integers(min_value=1, max_value=300),
)
def test_local_memory_mapped_ranges_match_fsspec_read_block(lines, blocksize):
    """The zero-copy fast path for local files cuts ranges exactly where read_block does."""
    import tempfile

    from curator_dask.io.jsonl import _mapped_range

    with tempfile.TemporaryDirectory() as directory:
        with open(f"{directory}/f.jsonl", "wb") as f:
            f.write(b"\n".join(lines) + (b"\n" if lines else b""))
        fs, listed = list_files(directory, [".jsonl"])
        for spec in plan_partitions(listed, blocksize=blocksize, fs=fs):
            for piece in spec.slices:
                if not piece.whole:
                    assert _mapped_range(piece.file.path, piece).to_pybytes() == read_slice_bytes(fs, piece)
