"""Stage balancing in the StreamingExecutor: decisions from recorded task timelines.

Caps, bottlenecks and lending are decided from what tasks took, so they are tested on
task records written by hand (:class:`TaskRecord`, as workers send them back): the same
timeline gives the same plan on any machine, however busy. One end-to-end run on a real
CPU + stand-in GPU cluster then checks what a plan must never break, whatever the
timing: every document once, no stage ever above its cap, restricted work only where
its resources are.
"""

from __future__ import annotations

import itertools
import logging
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import docs, write_jsonl
from distributed import Client, LocalCluster

from curator_dask import Resources, processing_stage
from curator_dask.cluster import add_cpu_workers
from curator_dask.executors import StreamingExecutor
from curator_dask.executors.balancing import (
    StageLoad,
    StageMeter,
    StageTimeline,
    busy_fraction,
    lend_slots,
    plan_caps,
)
from curator_dask.executors.streaming import CapPlanner
from curator_dask.observe.run_result import TaskRecord
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

CPU, GPU = frozenset({"cpu-0", "cpu-1"}), frozenset({"gpu-0"})
#: Two 1-thread CPU workers and one 1-thread worker advertising a GPU.
WORKERS = {"cpu-0": (1, {"CPU": 1}), "cpu-1": (1, {"CPU": 1}),
           "gpu-0": (1, {"GPU": 1, "GPU_MEMORY_GB": 80})}


def loads(read, stage, restricted, write):
    return [StageLoad("read", read, 2, CPU), StageLoad("stage", stage, 2, CPU),
            StageLoad("restricted", restricted, 1, GPU), StageLoad("write", write, 2, CPU)]


def timeline(stage: str, seconds: float, n: int, *, worker: str = "cpu-0", start: float = 0.0,
             partitions: int = 1) -> list[TaskRecord]:
    """``n`` back-to-back tasks of ``seconds`` each, as a worker would record them."""
    return [TaskRecord(stage=stage, index=i * partitions, partitions=partitions, rows_in=10,
                       rows_out=10, bytes=100, seconds=seconds, start=start + i * seconds,
                       stop=start + (i + 1) * seconds, worker=worker) for i in range(n)]


def step(name, resources, *, capped=True, movable=False):
    """What the planner reads of a segment's step."""
    return SimpleNamespace(name=name, resources=resources, capped=capped, movable=movable,
                           batch_size=1)


def chain():
    """read -> a CPU stage -> a GPU stage -> write, as a streamed segment's steps."""
    return [step("read", {"CPU": 1.0}, movable=True), step("clean", {"CPU": 1.0}),
            step("classify", {"GPU": 1.0}), step("write", {"CPU": 1.0}, movable=True)]


def planned(records, **options) -> CapPlanner:
    planner = CapPlanner(chain(), label="test", **options)
    planner.set_workers(WORKERS)
    planner.plan(0.0)  # warm-up window
    assert planner.measure(records)  # every stage measured: warm-up ends
    planner.plan(1.0)
    return planner


# -- the plan --------------------------------------------------------------------------------

def test_the_plan_gives_the_slowest_stage_a_task_waiting_per_slot_and_others_what_it_needs():
    # CPU stage 1 : restricted stage 4 -> the restricted stage (one slot) is the
    # bottleneck at 1/0.4 = 2.5 partitions/s; the CPU stage needs 2.5 * 0.1 = 0.25 slots.
    plan = plan_caps(loads(0.01, 0.1, 0.4, 0.02))
    assert (plan.bottleneck, plan.rate, plan.caps) == (2, 2.5, (1, 1, 2, 1))
    # 4 : 1 -> the CPU stage is the bottleneck: 2 running + 2 waiting, and the reader on
    # the same workers keeps one partition ready per CPU slot.
    plan = plan_caps(loads(0.01, 0.8, 0.2, 0.02))
    assert (plan.bottleneck, plan.caps, plan.shared) == (1, (2, 4, 1, 2), (0,))
    # A user's max_in_flight bounds every cap; a batch unit is the least a cap can be.
    assert plan_caps(loads(0.01, 0.8, 0.2, 0.02), limit=3).caps == (2, 3, 1, 2)
    assert plan_caps(loads(0.01, 0.1, 0.4, 0.02), unit=4).caps == (4, 4, 4, 4)
    # Not every stage measured yet, or no worker for any: no plan (the window stays).
    assert plan_caps(loads(0.01, None, 0.4, 0.02)) is None
    assert plan_caps([StageLoad("s", 1.0, 0, GPU)]) is None


def test_stages_are_measured_per_input_partition_over_a_sliding_window():
    meter = StageMeter(window=10.0)
    # A batch of 4 partitions in 2 s is 0.5 s per input partition, whatever it emits.
    meter.add(timeline("s", 2.0, 1, partitions=4)[0])
    meter.add(timeline("s", 1.0, 1, start=2.0)[0])
    assert meter.seconds_per_partition() == pytest.approx(3.0 / 5)
    # Tasks that stopped more than `window` seconds before the latest one are forgotten
    # once more than 3 remain.
    for record in timeline("s", 0.1, 3, start=19.9):
        meter.add(record)
    assert meter.seconds_per_partition() == pytest.approx(0.1)
    # Busy share of one slot since the window's first task: three tasks back to back.
    assert meter.busy_ratio(slots=1) == pytest.approx(1.0)
    assert meter.busy_ratio(slots=2) == pytest.approx(0.5)


def test_a_recorded_gpu_bound_run_is_planned_around_the_gpu_stage():
    records = [*timeline("read", 0.01, 8), *timeline("clean", 0.1, 8),
               *timeline("classify", 0.4, 8, worker="gpu-0"), *timeline("write", 0.02, 8)]
    planner = planned(records)
    assert planner.bottleneck_name == "classify"
    assert planner.caps == [1, 1, 2, 1]  # 1 running + 1 waiting on the GPU; 1 elsewhere
    assert planner.limit == 5  # the partitions in memory: the caps' sum
    assert planner.lent == {}  # nothing shares the GPU worker: nothing to lend
    # The steps feeding the bottleneck run before it on a worker; the write first of all.
    assert [planner.priority(k) for k in range(4)] == [4, 5, 2, 11]


def test_warm_up_shares_one_partition_per_worker_until_every_stage_is_measured():
    planner = CapPlanner(chain(), label="test")
    planner.set_workers(WORKERS)
    planner.plan(0.0)
    assert planner.caps == [3, 3, 3, 3] and planner.limit == 3
    assert not planner.measure(timeline("read", 0.01, 2))  # classify not measured yet
    assert not planner.due(1e9)  # no periodic re-plan before warm-up
    assert planner.bottleneck is None and planner.priority(3) > planner.priority(0)
    # A user's max_in_flight is the warm-up window; without balancing the window is
    # two per worker, for the whole run.
    for options, window in (({"max_in_flight": 4}, 4), ({"balance": False}, 6)):
        fixed = CapPlanner(chain(), label="test", **options)
        fixed.set_workers(WORKERS)
        fixed.plan(0.0)
        assert fixed.caps == [window] * 4 and fixed.limit == window


def test_max_in_flight_bounds_every_cap_and_the_total():
    records = [*timeline("read", 0.01, 8), *timeline("clean", 0.8, 8),
               *timeline("classify", 0.2, 8, worker="gpu-0"), *timeline("write", 0.02, 8)]
    planner = planned(records, max_in_flight=3, lend=False)
    assert planner.bottleneck_name == "clean"
    assert max(planner.caps) <= 3 and planner.limit == 3


# -- lending ---------------------------------------------------------------------------------

def test_reads_and_writes_beside_a_cpu_bound_stage_are_lent_to_the_idle_gpu_worker():
    # CPU stage 4 : GPU stage 1, reads and writes of 0.05 s on the CPU workers.
    records = [*timeline("read", 0.05, 8), *timeline("clean", 1.0, 8),
               *timeline("classify", 0.25, 8, worker="gpu-0"), *timeline("write", 0.05, 8)]
    planner = planned(records)
    assert planner.bottleneck_name == "clean"
    assert planner.lent == {0: GPU, 3: GPU}  # reads and writes run on the GPU worker
    assert planner.slots == [1, 2, 1, 1]  # one per thread of the pool they are lent
    # Without lending, every step stays where its resources put it.
    kept = planned(records, lend=False)
    assert kept.lent == {} and kept.slots == [2, 2, 1, 2]
    # The GPU worker leaves: the lent steps come back, and a re-plan is due.
    assert planner.set_workers({w: v for w, v in WORKERS.items() if w != "gpu-0"})
    assert planner.lent == {} and planner.slots == [2, 2, 0, 2]


def test_nothing_is_lent_when_the_gpu_stage_is_the_bottleneck_or_the_gain_is_small():
    stages = [StageLoad("read", 0.05, 2, CPU), StageLoad("clean", 0.25, 2, CPU),
              StageLoad("classify", 1.0, 1, GPU), StageLoad("write", 0.05, 2, CPU)]
    threads = {"cpu-0": 1, "cpu-1": 1, "gpu-0": 1}
    assert lend_slots(stages, plan_caps(stages), [0, 3], threads)[0] == {}
    # Reads and writes of 1 ms beside a 1 s CPU stage: moving them gains under 2%.
    tiny = [StageLoad("read", 0.001, 2, CPU), StageLoad("clean", 1.0, 2, CPU),
            StageLoad("classify", 0.25, 1, GPU), StageLoad("write", 0.001, 2, CPU)]
    assert lend_slots(tiny, plan_caps(tiny), [0, 3], threads)[0] == {}
    # A pool that would be over 80% busy takes nothing.
    busy = [StageLoad("read", 0.05, 2, CPU), StageLoad("clean", 1.0, 2, CPU),
            StageLoad("classify", 0.45, 1, GPU), StageLoad("write", 0.05, 2, CPU)]
    assert lend_slots(busy, plan_caps(busy), [0, 3], threads)[0] == {}


# -- flow metrics from timelines ---------------------------------------------------------------

def test_busy_fraction_and_queue_are_measured_after_warm_up():
    line = StageTimeline("classify", slots=[(0.0, 1)], warmup_end=10.0)
    for t, queued in [(10.0, 2), (12.0, 1), (14.0, 0), (16.0, 1), (20.0, 1)]:
        line.sample(t, in_flight=queued + 1, queued=queued)
    records = [{"start": 9.0, "stop": 12.0}, {"start": 12.0, "stop": 19.0},
               {"start": 19.5, "stop": 20.0}]
    assert busy_fraction(records, line) == 0.95
    # 2 for 2 s, 1 for 2 s, 0 for 2 s, 1 for 4 s: 10 partition-seconds in 10 s.
    assert line.mean_queue_length() == pytest.approx(1.0)
    # Capacity follows the slots: a second slot from t=15 doubles it from there.
    line.set_slots(15.0, 2)
    assert line.capacity(10.0, 20.0) == pytest.approx(5.0 + 10.0)


# -- one run on a real cluster -------------------------------------------------------------------

@processing_stage(name="clean")
def clean(df):
    return df.assign(text=df["text"].str.upper())


@processing_stage(name="classify", resources=Resources(gpus=1),
                  output_columns={"score": "float64", "gpu_worker": "str"})
def classify(df):
    from distributed import get_worker

    return df.assign(score=df["n"] / 10.0, gpu_worker=get_worker().address)


@pytest.fixture(scope="module")
def cpu_and_gpu_stand_in():
    """1 worker advertising GPU=1 and 2 CPU workers, 1 thread each."""
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, resources={"GPU": 1, "GPU_MEMORY_GB": 80},
                           silence_logs=logging.ERROR)
    add_cpu_workers(cluster, 2, silence_logs=logging.ERROR)
    with cluster, Client(cluster) as client:
        client.wait_for_workers(3)
        client.gpu_worker = next(a for a, w in client.scheduler_info(n_workers=-1)["workers"]
                                 .items() if "GPU" in (w.get("resources") or {}))
        yield client


def _cap_before(history, t):
    """The cap in force just before ``t``: the executor samples, then re-plans, in one tick,
    so a cap set at a sample's time applies after it."""
    return ([cap for since, cap in history if since < t] or [history[0][1]])[-1]


@pytest.mark.slow
@pytest.mark.parametrize("lend", [True, False])
def test_a_balanced_run_writes_every_document_once_within_its_caps(
        tmp_path, cpu_and_gpu_stand_in, lend):
    client = cpu_and_gpu_stand_in
    for i in range(20):
        write_jsonl(tmp_path / "in" / f"f{i:02d}.jsonl", docs(10, start=10 * i))
    p = (Pipeline("balanced").add_stage(JsonlReader(str(tmp_path / "in"), files_per_partition=1))
         .add_stage(clean).add_stage(classify).add_stage(ParquetWriter(str(tmp_path / "out"))))
    result = p.run(StreamingExecutor(max_in_flight=6, balance_interval=0.2, lend=lend,
                                     progress=False, client=client))

    out = pd.read_parquet(str(tmp_path / "out"))
    assert sorted(out["n"]) == list(range(200))  # every document, once
    # Restricted work only where its resources are; CPU stages never on the GPU worker,
    # reads and writes there only when lent.
    assert set(out["gpu_worker"]) == {client.gpu_worker}
    assert client.gpu_worker not in result.stage("clean").workers
    if not lend:
        for name in ("read_jsonl", "write_parquet"):
            assert client.gpu_worker not in result.stage(name).workers, name

    # From the executor's own timelines: no stage ever took more partitions than its cap
    # allowed (a sample above the cap in force is only a stage draining after a re-plan
    # lowered it, never growing), and no cap above max_in_flight.
    for stage in result.stages:
        assert stage.cap_history and stage.in_flight_history, stage.name
        assert max(cap for _, cap in stage.cap_history) <= 6, stage.name
        for (_, before), (t, now) in itertools.pairwise(stage.in_flight_history):
            assert now <= max(before, _cap_before(stage.cap_history, t)), stage.name
    # And, from the task records: partitions between the start of their read and the
    # end of their write never exceeded max_in_flight.
    spans = {}
    for r in result.records:
        lo, hi = spans.get(r["index"], (r["start"], r["stop"]))
        spans[r["index"]] = (min(lo, r["start"]), max(hi, r["stop"]))
    events = sorted([(hi, -1) for _, hi in spans.values()] + [(lo, 1) for lo, _ in spans.values()])
    held = peak = 0
    for _, change in events:
        held += change
        peak = max(peak, held)
    assert 1 <= peak <= 6
