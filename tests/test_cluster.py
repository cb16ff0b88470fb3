"""get_client: local clusters whose workers advertise resources, and connecting to others."""

from __future__ import annotations

import ctypes
import importlib.util
import inspect
import json
import logging
import sys

import dask
import pytest
from conftest import wait_until
from dask.utils import parse_bytes, parse_timedelta
from distributed import LocalCluster
from distributed.core import Status

from curator_dask._distributed import shuffle_buffer_limits
from curator_dask.cluster import (
    TrimWhenPaused,
    WorkerAllocator,
    dashboard_link,
    get_client,
    worker_resources,
)
from curator_dask.cluster.allocator import huge_pages_enabled, libc, malloc_thresholds
from curator_dask.cluster.recycling import recycler_for
from curator_dask.io.planner import shuffle_buffer_bytes


def test_local_cpu_cluster_workers_advertise_their_threads_and_close_with_the_client(caplog):
    with caplog.at_level(logging.INFO, logger="curator_dask.cluster"):
        client = get_client(n_workers=1, threads_per_worker=2, dashboard_address="127.0.0.1:0",
                            silence_logs=logging.ERROR)
    cluster = client.cluster
    try:
        assert list(worker_resources(client).values()) == [{"CPU": 2}]
        info = client.scheduler_info(n_workers=-1)["workers"]
        assert all(addr.startswith("tcp://127.0.0.1:") for addr in info)
        # A task whose resources no worker offers fails after the timeout, never hangs: the
        # scheduler runs with the timeout get_client documents as its default.
        documented = inspect.signature(get_client).parameters["no_workers_timeout"].default
        assert client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.no_workers_timeout) == parse_timedelta(documented)
        assert f"Dask dashboard: {client.dashboard_link}" in caplog.text
    finally:
        client.close()
    assert cluster.status.name == "closed"


def test_a_cluster_started_without_a_dashboard_has_no_dashboard_link(caplog):
    with caplog.at_level(logging.INFO, logger="curator_dask.cluster"):
        client = get_client(n_workers=1, dashboard_address=None, silence_logs=logging.ERROR)
    with client:
        assert dashboard_link(client) is None
        assert "Dask dashboard" not in caplog.text


def test_connecting_to_an_existing_cluster_changes_nothing_on_it(tmp_path):
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None, resources={"CPU": 1}) as cluster:
        scheduler_file = tmp_path / "scheduler.json"
        scheduler_file.write_text(json.dumps({"address": cluster.scheduler_address}))
        for kwargs in ({"scheduler_address": cluster.scheduler_address},
                       {"scheduler_file": str(scheduler_file)}):
            client = get_client(n_workers=4, worker_lifetime="1s", **kwargs)
            assert list(worker_resources(client).values()) == [{"CPU": 1}]
            assert cluster.scheduler.no_workers_timeout is None
            client.close()
            assert cluster.status.name == "running"


def planned_shuffle_buffers(memory_limit: int) -> dict[str, int]:
    """distributed's configured P2P buffers, each bounded by the plan for the limit."""
    planned = shuffle_buffer_bytes(memory_limit)
    return {"comm": min(parse_bytes(dask.config.get("distributed.p2p.comm.buffer")), planned),
            "disk": min(parse_bytes(dask.config.get("distributed.p2p.storage.buffer")), planned)}


@pytest.mark.slow
def test_every_worker_of_a_local_cluster_shuffles_within_buffers_planned_from_its_memory():
    expected = planned_shuffle_buffers(512 * 2**20)
    assert expected["comm"] < parse_bytes(dask.config.get("distributed.p2p.comm.buffer"))
    with get_client(n_workers=1, memory_limit="512MiB", dashboard_address=None,
                    silence_logs=logging.ERROR) as client:
        assert list(client.run(shuffle_buffer_limits).values()) == [expected]
        if GLIBC_LINUX:
            assert list(client.run(huge_pages_enabled).values()) == [False]
        client.cluster.scale(2)  # a worker that joins later
        assert wait_until(lambda: list(client.run(shuffle_buffer_limits).values())
                          == [expected, expected], timeout=60), client.run(shuffle_buffer_limits)


def test_a_cluster_passed_in_gets_buffers_planned_and_a_worker_without_a_limit_keeps_its_own():
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None, memory_limit="1GiB") as limited, \
            get_client(cluster=limited) as client:
        assert list(client.run(shuffle_buffer_limits).values()) == [
            planned_shuffle_buffers(2**30)]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None, memory_limit=0) as unlimited, \
            get_client(cluster=unlimited) as client:
        assert list(client.run(shuffle_buffer_limits).values()) == [{
            "comm": parse_bytes(dask.config.get("distributed.p2p.comm.buffer")),
            "disk": parse_bytes(dask.config.get("distributed.p2p.storage.buffer"))}]


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


GLIBC_LINUX = sys.platform.startswith("linux") and hasattr(libc(), "mallinfo2")


def mapped_on_its_own(size: int) -> bool:
    """Whether a block of ``size`` bytes that malloc gives this process is a mapping of
    its own (fresh zeroed pages, unmapped when freed), read from glibc's counters."""
    c = libc()
    c.mallinfo2.restype = _MallInfo2
    c.malloc.restype = ctypes.c_void_p
    c.free.argtypes = [ctypes.c_void_p]
    before = c.mallinfo2().hblkhd
    block = c.malloc(size)
    try:
        return c.mallinfo2().hblkhd - before >= size
    finally:
        c.free(block)


@pytest.mark.slow
@pytest.mark.skipif(not GLIBC_LINUX, reason="the settings are Linux's and glibc's")
def test_workers_of_a_cluster_passed_in_reuse_freed_memory_off_huge_pages():
    limit = 512 * 2**20
    _, mmap_threshold = malloc_thresholds(limit)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit=limit,
                      silence_logs=logging.ERROR) as cluster, get_client(cluster=cluster) as client:
        def settings():
            # What glibc took, and a block under the threshold that it then serves
            # from the heap: distributed's MALLOC_TRIM_THRESHOLD_ fixes glibc's mmap
            # threshold at 128 KiB, below this block. (Whether a block above the
            # threshold is mapped depends on the free space at the heap's top, so
            # it is not asked.)
            return [(huge, below, set_) for huge, below, set_ in zip(
                client.run(huge_pages_enabled).values(),
                client.run(mapped_on_its_own, mmap_threshold // 2).values(),
                client.run(_allocator_thresholds).values(), strict=True)]

        want = (False, False, malloc_thresholds(limit))
        assert settings() == [want]
        cluster.scale(2)  # a worker that joins later
        assert wait_until(lambda: settings() == [want] * 2, timeout=60), settings()
        # Other settings replace the defaults, and a later get_client keeps them.
        client.register_plugin(WorkerAllocator(huge_pages=True))
        with get_client(cluster=cluster):
            assert list(client.run(huge_pages_enabled).values()) == [True, True]


def _allocator_thresholds(dask_worker=None):
    return dask_worker.plugins[WorkerAllocator.name].thresholds


def _trims(client) -> int:
    return next(iter(client.run(
        lambda dask_worker: dask_worker.plugins[TrimWhenPaused.name].trims).values()))


def _set_status(status: str, dask_worker=None) -> None:
    dask_worker.status = Status[status]


def test_a_paused_worker_hands_its_allocators_free_pages_back_and_a_running_one_does_not():
    # memory_limit=0: no memory monitor, so the pause set here stays until undone.
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None, memory_limit=0) as cluster, \
            get_client(cluster=cluster) as client:
        assert _trims(client) == 0
        client.run(_set_status, "paused")
        assert wait_until(lambda: _trims(client) >= 2, timeout=30)
        client.run(_set_status, "running")
        stopped = _trims(client)
        # The worker runs tasks again; one more trim may have been under way.
        assert client.submit(sum, [1, 2]).result(timeout=30) == 3
        assert _trims(client) <= stopped + 1


def test_argument_errors_say_what_to_do():
    with pytest.raises(ValueError, match="cluster_type must be one of"):
        get_client(cluster_type="tpu")
    with pytest.raises(ValueError, match="not both"):
        get_client(scheduler_address="tcp://127.0.0.1:1", scheduler_file="x.json")


@pytest.mark.skipif(importlib.util.find_spec("dask_cuda") is not None,
                    reason="dask-cuda is installed")
@pytest.mark.parametrize("cluster_type", ["gpu", "mixed"])
def test_gpu_clusters_need_the_gpu_extra(cluster_type):
    with pytest.raises(ImportError, match=r"pip install 'curator-dask\[gpu\]'"):
        get_client(cluster_type=cluster_type)


def test_worker_lifetime_is_staggered_recycles_one_worker_at_a_time_and_restarts_by_default():
    recycler = recycler_for("10s", None, True, 1)
    assert (recycler.lifetime, recycler.stagger, recycler.restart, recycler.max_retiring) == (
        10.0, 1.0, True, 1)
    assert recycler_for(None, None, True, 1) is None
    assert recycler_for("1 hour", "10 minutes", False, 0.25).max_retiring == 0.25
