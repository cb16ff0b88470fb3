"""The partition planner: deterministic plans, and every line read exactly once."""

from __future__ import annotations

import itertools

import fsspec
import pytest
from dask.utils import parse_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask.io.files import InputFile, list_files
from curator_dask.io.jsonl import read_slice_bytes
from curator_dask.io.planner import (
    MAX_AUTO_BLOCKSIZE,
    MEMORY_FRACTION,
    WORKER_BASELINE,
    WORKING_SETS,
    WorkerMemory,
    auto_blocksize,
    check_partitioning,
    in_flight_per_worker,
    plan_partitions,
    resolve_blocksize,
    worker_memory,
)

MiB = 2**20


def _write(fs, path: str, lines: list[bytes], trailing_newline: bool = True) -> None:
    body = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    with fs.open(path, "wb") as f:
        f.write(body)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(
        st.lists(st.binary(min_size=1, max_size=40).map(
                     lambda b: b.replace(b"\n", b"_").replace(b"\r", b"_")),
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
    # Each file in the fewest byte ranges of at most the blocksize, of one size (give
    # or take a byte a range): no tail of a few bytes left as a partition of its own.
    for file in listed:
        spans = [(p.start, file.size if p.end is None else p.end)
                 for spec in plan for p in spec.slices if p.file.path == file.path]
        if file.size > blocksize:
            widths = [end - start for start, end in spans]
            assert spans[0][0] == 0 and spans[-1][1] == file.size
            assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
            assert len(spans) == -(-file.size // blocksize) and max(widths) <= blocksize
            assert min(widths) >= max(widths) - len(spans)
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
    # Never above the cap, and no partition above the chosen blocksize.
    assert MiB <= block <= MAX_AUTO

    assert all(p.nbytes <= block for p in plan)
    total = sum(sizes)
    if total >= 2 * threads * MiB and total <= 2 * threads * MAX_AUTO:
        # Uncompressed files split at any byte: two partitions per thread at least.
        assert len(plan) >= 2 * threads
    # The same input and settings give the same plan, on every call.
    assert plan_partitions(files, threads=threads) == plan
    assert plan == plan_partitions(files, blocksize=block)


def test_automatic_blocksize_is_the_same_for_clusters_of_similar_size():
    total = 500 * 10**6
    assert auto_blocksize(total, 2) == auto_blocksize(total, 3) == 64 * MiB
    assert auto_blocksize(total, 4) == 32 * MiB
    # Past the size that fills the threads, partitions stop growing with the data.
    assert auto_blocksize(10**13, 1000) == auto_blocksize(10**15, 1000) == MAX_AUTO


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
    """The zero-copy fast path for local files cuts ranges exactly where read_block does,
    and maps a whole file whole."""
    import tempfile

    from curator_dask.io.jsonl_bytes import mapped_range

    with tempfile.TemporaryDirectory() as directory:
        with open(f"{directory}/f.jsonl", "wb") as f:
            f.write(b"\n".join(lines) + (b"\n" if lines else b""))
        fs, listed = list_files(directory, [".jsonl"])
        for spec in plan_partitions(listed, blocksize=blocksize, fs=fs):
            for piece in spec.slices:
                assert mapped_range(piece.file.path, piece).to_pybytes() == read_slice_bytes(
                    fs, piece
                )


MAX_AUTO = parse_bytes(MAX_AUTO_BLOCKSIZE)


@settings(max_examples=300, deadline=None)
@given(total=st.integers(min_value=1, max_value=10**13),
       workers=st.integers(min_value=1, max_value=64),
       threads=st.integers(min_value=1, max_value=16),
       limit=st.integers(min_value=512 * MiB, max_value=512 * 2**30),
       work=st.sampled_from(sorted(WORKING_SETS)))
def test_automatic_partitions_and_window_fit_the_workers_memory(total, workers, threads,
                                                                limit, work):
    # Whatever the data and cluster: each thread's task at its working set, plus the
    # partitions a streaming run holds ahead, stay under the share of the limit the
    # plan fills, less the worker's own memory; or partitions are at the 1 MiB floor.
    memory = WorkerMemory(workers, threads, limit)
    files = _files([total])
    block = resolve_blocksize(files, memory=memory, work=work)
    assert MiB <= block <= MAX_AUTO
    ahead = in_flight_per_worker(block, WORKING_SETS[work], memory) - threads
    assert 0 <= ahead <= threads
    held = threads * block * WORKING_SETS[work] + ahead * block * WORKING_SETS["read"]
    assert block == MiB or held <= (limit - WORKER_BASELINE) * MEMORY_FRACTION
    # The same cluster without a limit plans from the data alone.
    unlimited = resolve_blocksize(files, memory=WorkerMemory(workers, threads, None), work=work)
    assert block <= unlimited == auto_blocksize(total, workers * threads)


def test_hungrier_work_and_smaller_workers_get_smaller_partitions():
    files = _files([4 * 2**30])
    small = WorkerMemory(2, 1, 2**30)
    sizes = {work: resolve_blocksize(files, memory=small, work=work)
             for work in ("read", "minhash", "filters")}
    assert sizes["read"] >= sizes["minhash"] >= sizes["filters"]
    assert sizes["read"] > sizes["filters"]
    big = WorkerMemory(2, 1, 16 * 2**30)
    assert resolve_blocksize(files, memory=big, work="filters") > sizes["filters"]


def test_a_partition_too_big_for_the_worker_leaves_one_in_flight_per_thread(caplog):
    memory = WorkerMemory(2, 2, 2**30)
    with caplog.at_level("WARNING", logger="curator_dask.io.planner"):
        assert in_flight_per_worker(2**30, WORKING_SETS["filters"], memory) == 2
    assert "smaller blocksize" in caplog.text
    assert in_flight_per_worker(None, 12.0, memory) is None
    assert in_flight_per_worker(2**20, 12.0, WorkerMemory(2, 2, None)) is None


def test_planning_reads_the_workers_memory_limits_from_the_client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      memory_limit="1GiB", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        memory = worker_memory(client)
        assert (memory.workers, memory.threads, memory.limit) == (2, 1, 2**30)
        assert worker_memory() == memory  # the current client by default
