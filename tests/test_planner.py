"""The partition planner: deterministic plans, and every line read exactly once."""

from __future__ import annotations

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask.io.files import InputFile, list_files
from curator_dask.io.jsonl import read_slice_bytes
from curator_dask.io.planner import (
    auto_blocksize,
    check_partitioning,
    plan_partitions,
    resolve_blocksize,
)

MiB = 2**20


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
    (None, 0, "between 1 and"),
])
def test_bad_partitioning_arguments(fpp, blocksize, message):
    with pytest.raises(ValueError, match=message):
        check_partitioning(fpp, blocksize)


def test_no_blocksize_means_an_automatic_choice():
    assert check_partitioning(None, None) is None
    assert check_partitioning(None, "auto") is None
    assert check_partitioning(None, "64MiB") == 64 * MiB


def _files(sizes, compression=None):
    return [InputFile(f"/d/{i:03d}.jsonl", size, compression, f"{i:03d}.jsonl")
            for i, size in enumerate(sizes)]


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(min_value=1, max_value=600 * MiB), min_size=1, max_size=20),
       threads=st.integers(min_value=1, max_value=256))
def test_automatic_plan_fills_the_threads_when_the_data_allows(sizes, threads):
    files = _files(sizes)
    block = resolve_blocksize(files, threads=threads)
    plan = plan_partitions(files, threads=threads)
    # Never above the 256 MiB cap, and no partition above the chosen blocksize.
    assert MiB <= block <= 256 * MiB
    assert all(p.nbytes <= block for p in plan)
    total = sum(sizes)
    if total >= 2 * threads * MiB and total <= 2 * threads * 256 * MiB:
        # Uncompressed files split at any byte: two partitions per thread at least.
        assert len(plan) >= 2 * threads
    # The same input and settings give the same plan, on every call.
    assert plan_partitions(files, threads=threads) == plan
    assert plan == plan_partitions(files, blocksize=block)


def test_automatic_blocksize_is_the_same_for_clusters_of_similar_size():
    total = 500 * 10**6
    assert auto_blocksize(total, 2) == auto_blocksize(total, 3) == 64 * MiB
    assert auto_blocksize(total, 4) == 32 * MiB
    assert auto_blocksize(10**13, 1000) == 256 * MiB


def test_given_blocksize_or_files_per_partition_wins_over_the_automatic_choice():
    files = _files([100 * MiB])
    assert resolve_blocksize(files, blocksize="50MiB", threads=64) == 50 * MiB
    assert len(plan_partitions(files, blocksize="50MiB", threads=64)) == 2
    assert resolve_blocksize(files, files_per_partition=1, threads=64) is None
    assert len(plan_partitions(files, files_per_partition=1, threads=64)) == 1


def test_reading_with_a_client_plans_for_its_worker_threads(tmp_path):
    from distributed import Client, LocalCluster

    from curator_dask import DocumentDataset

    line = b'{"text": "' + b"x" * 1000 + b'"}\n'
    (tmp_path / "a.jsonl").write_bytes(line * 10_000)  # 10 MB: room for 1 MiB blocks
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster):
        ds = DocumentDataset.read_jsonl(str(tmp_path))
    assert ds.npartitions >= 2 * 4
    assert ds.blocksize == auto_blocksize(len(line) * 10_000, 4)
    # Without a client: this machine's CPU count; a given blocksize is recorded as given.
    assert DocumentDataset.read_jsonl(str(tmp_path), blocksize="4MiB").blocksize == 4 * MiB
    assert DocumentDataset.read_jsonl(str(tmp_path), files_per_partition=1).blocksize is None


@settings(max_examples=100, deadline=None)
@given(
    lines=st.lists(st.binary(min_size=1, max_size=30).map(lambda b: b.replace(b"\n", b"_")),
                   min_size=0, max_size=40),
    blocksize=st.integers(min_value=1, max_value=300),
)
def test_local_memory_mapped_ranges_match_fsspec_read_block(lines, blocksize):
    """The zero-copy fast path for local files cuts ranges exactly where read_block does."""
    import tempfile

    from curator_dask.io.jsonl_bytes import mapped_range

    with tempfile.TemporaryDirectory() as directory:
        with open(f"{directory}/f.jsonl", "wb") as f:
            f.write(b"\n".join(lines) + (b"\n" if lines else b""))
        fs, listed = list_files(directory, [".jsonl"])
        for spec in plan_partitions(listed, blocksize=blocksize, fs=fs):
            for piece in spec.slices:
                if not piece.whole:
                    assert mapped_range(piece.file.path, piece).to_pybytes() == read_slice_bytes(fs, piece)
