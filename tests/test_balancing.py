"""Stage balancing in the StreamingExecutor: the plan, and a real CPU + stand-in GPU run.

The cluster is 2 CPU workers plus one worker advertising ``GPU=1`` (a stand-in for a
dask-cuda worker). The stages sleep, so their cost per partition is known and scheduling
noise on a busy machine is small next to it.
"""

from __future__ import annotations

import itertools
import logging
import time

import pandas as pd
import pytest
from conftest import Sampler, docs, write_jsonl
from distributed import Client, LocalCluster

from curator_dask import Resources, processing_stage
from curator_dask.cluster import add_cpu_workers
from curator_dask.executors import StreamingExecutor
from curator_dask.executors.balancing import StageLoad, StageMeter, plan_caps
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

CPU, GPU = frozenset({"cpu-0", "cpu-1"}), frozenset({"gpu-0"})


def loads(read, stage, restricted, write):
    return [StageLoad("read", read, 2, CPU), StageLoad("stage", stage, 2, CPU),
            StageLoad("restricted", restricted, 1, GPU), StageLoad("write", write, 2, CPU)]


def test_the_plan_gives_the_slowest_stage_a_task_waiting_per_slot_and_others_what_it_needs():
    # CPU stage 1 : restricted stage 4 -> the restricted stage (one slot) is the
    # bottleneck at 1/0.4 = 2.5 partitions/s; the CPU stage needs 2.5 * 0.1 = 0.25 slots.
    plan = plan_caps(loads(0.01, 0.1, 0.4, 0.02))
    assert (plan.bottleneck, plan.rate, plan.caps) == (2, 2.5, (1, 1, 2, 1))
    # 4 : 1 -> the CPU stage is the bottleneck: 2 running + 2 waiting, and the reader on
    # the same workers keeps one partition ready per CPU slot.
    plan = plan_caps(loads(0.01, 0.8, 0.2, 0.02))
    assert (plan.bottleneck, plan.caps) == (1, (2, 4, 1, 2))
    # A user's max_in_flight bounds every cap; a batch unit is the least a cap can be.
    assert plan_caps(loads(0.01, 0.8, 0.2, 0.02), limit=3).caps == (2, 3, 1, 2)
    assert plan_caps(loads(0.01, 0.1, 0.4, 0.02), unit=4).caps == (4, 4, 4, 4)
    # Not every stage measured yet, or no worker for any: no plan (the window stays).
    assert plan_caps(loads(0.01, None, 0.4, 0.02)) is None
    assert plan_caps([StageLoad("s", 1.0, 0, GPU)]) is None


def test_stages_are_measured_per_input_partition_over_a_sliding_window():
    meter = StageMeter(window=10.0)
    # A batch of 4 partitions in 2 s is 0.5 s per input partition, whatever it emits.
    meter.add({"start": 0.0, "stop": 2.0, "seconds": 2.0, "partitions": 4})
    meter.add({"start": 2.0, "stop": 3.0, "seconds": 1.0, "partitions": 1})
    assert meter.seconds_per_partition() == pytest.approx(3.0 / 5)
    # Tasks that stopped more than `window` seconds before the latest one are forgotten
    # once more than 3 remain.
    for stop in (20.0, 21.0, 22.0):
        meter.add({"start": stop - 0.1, "stop": stop, "seconds": 0.1, "partitions": 1})
    assert meter.seconds_per_partition() == pytest.approx(0.1)


COST = 0.1  # seconds per partition of the CPU stage; the restricted stage takes 4x
PARTITIONS = 20


@processing_stage(name="clean")
def clean(df):
    time.sleep(COST)
    return df.assign(text=df["text"].str.upper())


@processing_stage(name="classify", resources=Resources(gpus=1),
                  output_columns={"score": "float64"})
def classify(df):
    time.sleep(4 * COST)
    return df.assign(score=df["n"] / 10.0)


@pytest.fixture(scope="module")
def cpu_and_gpu_stand_in():
    """1 worker advertising GPU=1 and 2 CPU workers, 1 thread each."""
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, resources={"GPU": 1, "GPU_MEMORY_GB": 80},
                           silence_logs=logging.ERROR)
    add_cpu_workers(cluster, 2, silence_logs=logging.ERROR)
    with cluster, Client(cluster) as client:
        client.wait_for_workers(3)
        yield client


class GaugeWatch(Sampler):
    """Samples one stage's Prometheus gauges in this process every 50 ms."""

    def __init__(self, pipeline: str, stage: str):
        self.labels = {"pipeline": pipeline, "stage": stage}
        super().__init__(self.now, 0.05)

    def now(self):
        from prometheus_client import REGISTRY

        return (REGISTRY.get_sample_value("curator_stage_busy_ratio", self.labels),
                REGISTRY.get_sample_value("curator_stage_queue_length", self.labels))

    def values(self, i: int) -> list[float]:
        """Busy ratios (0) or queue lengths (1) sampled while they were set."""
        return [v[i] for _, v in self.samples if v[i] is not None]


def _cap_before(history, t):
    """The cap in force just before ``t``: the executor samples, then re-plans, in one tick,
    so a cap set at a sample's time applies after it."""
    return ([cap for since, cap in history if since < t] or [history[0][1]])[-1]


@pytest.mark.timeout(90)
def test_balancing_keeps_the_restricted_stage_busy_within_the_caps(tmp_path, cpu_and_gpu_stand_in):
    for i in range(PARTITIONS):
        write_jsonl(tmp_path / "in" / f"f{i:02d}.jsonl", docs(10, start=10 * i))
    p = (Pipeline("balanced").add_stage(JsonlReader(str(tmp_path / "in"), files_per_partition=1))
         .add_stage(clean).add_stage(classify).add_stage(ParquetWriter(str(tmp_path / "out"))))
    with GaugeWatch("balanced", "classify") as gauges:
        result = p.run(StreamingExecutor(max_in_flight=6, balance_interval=1, progress=False,
                                         client=cpu_and_gpu_stand_in))

    out = pd.read_parquet(str(tmp_path / "out"))
    assert sorted(out["n"]) == list(range(10 * PARTITIONS))

    # The plan found the restricted stage slowest: 1 running + 1 waiting there, and the
    # faster stages only what keeps it fed (the fixed window would let 6 pile up).
    assert result.bottleneck == "classify"
    final = {s.name: s.cap_history[-1][1] for s in result.stages}
    assert final == {"read_jsonl": 1, "clean": 1, "classify": 2, "write_parquet": 1}

    # After warm-up (first output) the restricted stage never waited for work: checked
    # from the task records themselves, and as RunResult reports it.
    slow = [r for r in result.records if r["stage"] == "classify"]
    warm = min(r["stop"] for r in result.records if r["stage"] == "write_parquet")
    end = max(r["stop"] for r in slow)
    busy = sum(r["stop"] - max(r["start"], warm) for r in slow if r["stop"] > warm)
    assert busy / (end - warm) >= 0.95
    assert result.stage("classify").busy_fraction >= 0.95
    assert result.stage("classify").mean_queue_length >= 1  # work was always waiting
    assert result.stage("clean").busy_fraction < 0.5  # it ran only far enough ahead
    # The same, live, as Prometheus gauges of this process (the last measurement window),
    # removed when the run is over so that dashboards show no stale values.
    assert max(gauges.values(0)) >= 0.9
    assert max(gauges.values(1)) >= 1
    assert gauges.now() == (None, None)

    # No stage ever took more partitions than its cap allowed: a sample above the cap in
    # force is only a stage draining after a re-plan lowered it (never growing).
    for stage in result.stages:
        samples = stage.in_flight_history
        for (_, before), (t, now) in itertools.pairwise(samples):
            assert now <= max(before, _cap_before(stage.cap_history, t)), stage.name
    # And, independently, max_in_flight held: partitions between the start of their read
    # and the end of their write never exceeded 6.
    spans = {}
    for r in result.records:
        lo, hi = spans.get(r["index"], (r["start"], r["stop"]))
        spans[r["index"]] = (min(lo, r["start"]), max(hi, r["stop"]))
    events = sorted([(lo, 1) for lo, _ in spans.values()] + [(hi, -1) for _, hi in spans.values()])
    held, peak = 0, 0
    for _, step in events:
        held += step
        peak = max(peak, held)
    assert 2 <= peak <= 6


@processing_stage(name="heavy_clean")
def heavy_clean(df):
    time.sleep(4 * COST)
    return df.assign(text=df["text"].str.upper())


@processing_stage(name="light_classify", resources=Resources(gpus=1),
                  output_columns={"score": "float64"})
def light_classify(df):
    time.sleep(COST)
    return df.assign(score=df["n"] / 10.0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lend", [True, False])
def test_a_cpu_bound_run_lends_reads_and_writes_to_the_idle_restricted_worker(
        tmp_path, cpu_and_gpu_stand_in, lend):
    # CPU stage 4 : restricted 1. The CPU stage is the bottleneck, and the reads and
    # writes share its two workers while the stand-in idles most of the time: with
    # lending they move there once the plan is made, and the CPU workers run only the
    # CPU stage; without it they stay on the CPU workers.
    client = cpu_and_gpu_stand_in
    stand_in = next(a for a, w in client.scheduler_info(n_workers=-1)["workers"].items()
                    if "GPU" in (w.get("resources") or {}))
    # Partitions of 1 MB, so that reading and writing one is a few percent of the CPU
    # stage's time (lending pays only from 2% on).
    for i in range(PARTITIONS):
        write_jsonl(tmp_path / "in" / f"f{i:02d}.jsonl",
                    [dict(d, text=d["text"] + " filler" * 150)
                     for d in docs(1000, start=1000 * i)])
    p = (Pipeline("lending").add_stage(JsonlReader(str(tmp_path / "in"), files_per_partition=1))
         .add_stage(heavy_clean).add_stage(light_classify)
         .add_stage(ParquetWriter(str(tmp_path / "out"))))
    result = p.run(StreamingExecutor(balance_interval=1, lend=lend, progress=False,
                                     client=client))

    out = pd.read_parquet(str(tmp_path / "out"))
    assert sorted(out["n"]) == list(range(1000 * PARTITIONS))  # each document once
    assert result.bottleneck == "heavy_clean"
    # The plan comes with the first output; tasks submitted before it have started 1.5 s
    # later (at most one heavy task each in front of them).
    warm = min(r["stop"] for r in result.records if r["stage"] == "write_parquet")
    io_after_plan = [r for r in result.records if r["stage"] in ("read_jsonl", "write_parquet")
                     and r["start"] > warm + 1.5]
    assert io_after_plan  # the run went on after the plan
    on_stand_in = [r["worker"] == stand_in for r in io_after_plan]
    if lend:
        assert all(on_stand_in)
        assert stand_in not in result.stage("heavy_clean").workers
        assert result.stage("heavy_clean").busy_fraction >= 0.9
    else:
        assert not any(on_stand_in)
