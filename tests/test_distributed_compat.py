"""One test per use of distributed's private API (curator_dask/_distributed.py), on a real
LocalCluster: when a distributed release changes one, its test names the attribute."""

from __future__ import annotations

import inspect
import time
import typing

import pytest
from conftest import wait_until
from distributed import Client, Event, LocalCluster, SpecCluster
from distributed.scheduler import Scheduler, WorkerState
from distributed.worker_state_machine import TaskStateState

from curator_dask._distributed import (
    UNFINISHED_TASK_STATES,
    bound_shuffle_buffers,
    correct_cluster_state,
    executing_seconds,
    fail_running_task,
    hand_cluster_to_client,
    last_heartbeat,
    name_new_workers,
    own_adaptive_target,
    scheduler_workers,
    set_adaptive_target,
    shuffle_buffer_limits,
    worker_memory_limit,
    worker_task_states,
)


def in_process_cluster(n_workers: int = 1) -> LocalCluster:
    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False,
                        dashboard_address=None)


def blocked_task(client: Client, name: str):
    """A task that runs until its Event is set; returns (future, event)."""
    event = Event(name, client=client)

    def wait(event_name):
        Event(event_name).wait(60)
        return 1

    return client.submit(wait, name, key=f"blocked-{name}", pure=False), event


def test_hand_cluster_to_client_makes_close_close_the_cluster():
    cluster = in_process_cluster(n_workers=0)
    client = Client(cluster)
    assert hasattr(client, "_start_arg"), \
        "distributed.Client has no _start_arg any more: hand_cluster_to_client needs a new way"
    hand_cluster_to_client(client)
    client.close()
    assert cluster.status.name == "closed", (
        "Client.close no longer closes its cluster when Client._start_arg is None: "
        f"cluster status is {cluster.status.name}")


def test_name_new_workers_names_the_workers_scale_adds():
    with in_process_cluster(n_workers=0) as cluster:
        assert "_new_worker_name" in inspect.getsource(SpecCluster.new_worker_spec), \
            "SpecCluster.new_worker_spec no longer calls SpecCluster._new_worker_name"
        name_new_workers(cluster, lambda number: f"grown-{number}")
        assert list(cluster.new_worker_spec()) == ["grown-0"], \
            "SpecCluster.new_worker_spec ignores _new_worker_name"


def test_correct_cluster_state_starts_the_workers_added_to_worker_spec():
    with in_process_cluster(n_workers=0) as cluster, Client(cluster) as client:
        spec = next(iter(cluster.new_worker_spec().values()))
        cluster.worker_spec["added-by-spec"] = spec
        correct_cluster_state(cluster)
        client.wait_for_workers(1, timeout=30)
        names = {w["name"] for w in client.scheduler_info()["workers"].values()}
        assert names == {"added-by-spec"}, \
            f"SpecCluster._correct_state did not start the worker in worker_spec: {names}"


def test_set_adaptive_target_is_what_autoscalers_get():
    assert list(inspect.signature(Scheduler.adaptive_target).parameters) == \
        ["self", "target_duration"], "Scheduler.adaptive_target changed its signature"
    with in_process_cluster(n_workers=0) as cluster:
        scheduler = cluster.scheduler
        own = own_adaptive_target(scheduler)
        assert own() == 0  # no work, no workers wanted
        set_adaptive_target(scheduler, lambda target_duration=None: 7)
        # Adaptive asks through the scheduler comm (the "adaptive_target" handler).
        assert cluster.sync(cluster.scheduler_comm.adaptive_target) == 7, \
            "the scheduler's 'adaptive_target' handler is not what autoscalers call"
        assert scheduler.adaptive_target() == 7
        assert own_adaptive_target(scheduler)() == 0, \
            "own_adaptive_target returned the installed wrapper, not Scheduler.adaptive_target"
        set_adaptive_target(scheduler, own)
        assert cluster.sync(cluster.scheduler_comm.adaptive_target) == 0


def test_executing_seconds_and_last_heartbeat_follow_a_running_task():
    assert {"executing", "last_seen"} <= set(WorkerState.__slots__), \
        "distributed.scheduler.WorkerState lost 'executing' or 'last_seen'"
    with in_process_cluster() as cluster, Client(cluster) as client:
        future, event = blocked_task(client, "heartbeat")
        try:
            ws = next(iter(cluster.scheduler.workers.values()))
            since = time.time()
            assert wait_until(lambda: last_heartbeat(ws) > since, timeout=30, interval=0.05), \
                "WorkerState.last_seen is not updated by heartbeats"
            assert wait_until(
                lambda: any(ts.key == future.key and seconds > 0
                            for ts, seconds in executing_seconds(ws).items()),
                timeout=30, interval=0.05), \
                f"WorkerState.executing never showed the running task: {executing_seconds(ws)}"
        finally:
            event.set()
        assert future.result(timeout=30) == 1


def test_worker_task_states_show_a_running_task():
    assert set(typing.get_args(TaskStateState)) >= UNFINISHED_TASK_STATES, (
        "worker task states changed: "
        f"{sorted(UNFINISHED_TASK_STATES - set(typing.get_args(TaskStateState)))} are gone")
    with in_process_cluster() as cluster, Client(cluster) as client:
        future, event = blocked_task(client, "states")
        try:
            def running():
                states = client.run(lambda dask_worker: dict(worker_task_states(dask_worker)))
                return next(iter(states.values())).get(future.key) == "executing"

            assert wait_until(running, timeout=30, interval=0.05), \
                "Worker.state.tasks does not show the executing task with state 'executing'"
        finally:
            event.set()
        assert future.result(timeout=30) == 1


def test_fail_running_task_fails_only_a_task_processing_on_that_worker():
    from distributed.scheduler import TaskState

    assert {"processing_on", "run_id"} <= set(TaskState.__slots__), \
        "distributed.scheduler.TaskState lost 'processing_on' or 'run_id'"
    assert callable(getattr(Scheduler, "handle_task_erred", None)), \
        "distributed.scheduler.Scheduler lost 'handle_task_erred'"
    with in_process_cluster(n_workers=2) as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        future, event = blocked_task(client, "fail")
        try:
            scheduler = cluster.scheduler
            assert wait_until(lambda: getattr(scheduler.tasks.get(future.key), "state", None)
                              == "processing", timeout=30, interval=0.05)
            ts = scheduler.tasks[future.key]
            ws = ts.processing_on
            other = next(w for w in scheduler.workers.values() if w is not ws)
            error = ValueError("ran too long")
            assert not fail_running_task(scheduler, ts, other, error, stimulus_id="test-a")
            assert fail_running_task(scheduler, ts, ws, error, stimulus_id="test-b")
            with pytest.raises(ValueError, match="ran too long"):
                future.result(timeout=30)
        finally:
            event.set()


def test_scheduler_workers_lists_every_worker_while_the_client_refreshes_its_cache():
    import dask

    # The client refreshes its cached identity (with no workers in it) every millisecond:
    # what scheduler_workers returns must come from its own request, never that cache.
    with dask.config.set({"distributed.client.scheduler-info-interval": "1ms"}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                         dashboard_address=None, resources={"CPU": 1}) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(2, timeout=30)
        for _ in range(200):
            workers = scheduler_workers(client)
            assert len(workers) == 2, \
                "Scheduler.identity(n_workers=-1) no longer lists every worker"
            assert all(w["resources"] == {"CPU": 1} and w["nthreads"] == 1
                       for w in workers.values()), workers


def test_worker_memory_limit_is_the_limit_the_worker_was_started_with():
    for limit, expected in (("300MiB", 300 * 2**20), (0, None)):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                          dashboard_address=None, memory_limit=limit) as cluster, \
                Client(cluster) as client:
            assert list(client.run(worker_memory_limit).values()) == [expected], \
                "Worker.memory_manager.memory_limit is not the worker's memory limit"


def _second_input_waits(i: int):
    import pandas as pd

    if i:
        Event("second-input").wait(60)
    return pd.DataFrame({"k": range(100 * i, 100 * i + 100), "v": i})


def _running_shuffle_limits(dask_worker) -> list[dict]:
    """What each P2P shuffle running on the worker reports its buffers may hold."""
    return [{"comm": run["comm"]["memory_limit"], "disk": run["disk"]["memory_limit"]}
            for run in dask_worker.extensions["shuffle"].heartbeat().values()]


def test_bound_shuffle_buffers_bounds_what_a_running_shuffle_buffers():
    import dask
    import dask.dataframe as dd
    import pandas as pd
    from dask.utils import parse_bytes

    configured = {"comm": parse_bytes(dask.config.get("distributed.p2p.comm.buffer")),
                  "disk": parse_bytes(dask.config.get("distributed.p2p.storage.buffer"))}
    bound = 3 * 2**20
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        assert list(client.run(shuffle_buffer_limits).values()) == [configured], (
            "Worker.extensions['shuffle'].memory_limiter_comms/memory_limiter_disk are not "
            "the buffers distributed.p2p.comm.buffer/storage.buffer configure")
        assert list(client.run(bound_shuffle_buffers, limit=bound).values()) == [
            {"comm": bound, "disk": bound}]
        # A larger bound leaves the smaller buffers as they are.
        assert list(client.run(bound_shuffle_buffers, limit=2 * bound).values()) == [
            {"comm": bound, "disk": bound}]
        # A shuffle started after the worker uses the bounded buffers: the second input
        # waits until the first is in the shuffle.
        event = Event("second-input", client=client)
        frame = dd.from_map(_second_input_waits, [0, 1],
                            meta=pd.DataFrame({"k": pd.Series([], dtype="int64"),
                                               "v": pd.Series([], dtype="int64")}))
        shuffled = client.persist(frame.shuffle("k", npartitions=2, shuffle_method="p2p"))
        try:
            def running():
                return next(iter(client.run(_running_shuffle_limits).values()))

            assert wait_until(running, timeout=30, interval=0.05), "no P2P shuffle ran"
            assert running() == [{"comm": bound, "disk": bound}], (
                "the shuffle run does not use the worker's memory_limiter_comms and "
                "memory_limiter_disk")
        finally:
            event.set()
        result = shuffled.compute().sort_values("k")
        assert result["k"].tolist() == list(range(200))
        assert result["v"].tolist() == [0] * 100 + [1] * 100
