"""Stage balancing: the StreamingExecutor's fixed window against balanced per-stage caps.

The pipeline: read JSONL -> a CPU stage -> a stage restricted to a worker advertising
``GPU=1`` (standing in for a GPU model) -> write Parquet, on 2 CPU workers (``--cpu-workers``)
and 1 stand-in worker. Both middle stages sleep a fixed time per partition, at CPU:restricted cost
ratios 1:1, 1:4 and 4:1 (the restricted stage is the bottleneck at 1:1 and 1:4, having
one worker against the CPU stage's two; the CPU stage at 4:1). The fixed window grows
with the worker count, the balanced caps with what the bottleneck needs, so
``--cpu-workers 6`` shows the memory difference better. Each ratio runs with
``StreamingExecutor(balance=False)`` (one window of twice the workers shared by all
stages), with balancing but ``lend=False`` (every task on the workers its resources
name), and with balancing as it is by default (at 4:1 the reads and writes are lent to
the stand-in's spare slots), in one process on one cluster, and writes
``benchmarks/results/balancing.json`` (``balancing-<n>cpu.json`` with other worker counts).
A short run first imports everything on the workers, so warm-up costs of the first task per worker
do not count against whichever run comes first. Before each run the workers collect
garbage and trim their heaps.

Reported per run:

- wall time, and the bound the slowest stage sets: partitions x its seconds of sleep
  per partition / its slots; the same from its measured busy seconds (it also counts
  words, about 3% more at 4:1); and the bound that all the work on the bottleneck's
  workers sets (at 4:1, without lending, they also read and write: their busy seconds /
  slots);
- busy fraction after warm-up (from the first output on) of the bottleneck, as
  ``RunResult`` reports it (its busy seconds over its slots' time); and of all tasks on
  the bottleneck's workers (at 4:1 the CPU workers also read and write);
- peak cluster memory (sum of the workers' RSS, every 50 ms), also above the idle
  baseline; and the peak of partitions held by the executor (summed over stages).

Targets: bottleneck busy at least 97% after warm-up; wall time within 1.1x of the
bound; peak memory with balancing no higher than with the fixed window. No GPU here:
the restricted stage sleeps on a CPU worker that advertises ``GPU=1``.

Usage::

    python benchmarks/balancing.py                    # ~2 minutes
    python benchmarks/balancing.py --cpu-workers 6 --ratios 1:4   # a wider cluster
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from distributed import Client, LocalCluster
from rss import RssSampler
from streaming_vs_batch import _trim_memory, make_corpus
from table import print_table

from curator_dask import Resources, processing_stage
from curator_dask.cluster import add_cpu_workers
from curator_dask.executors import StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

RESULTS = Path(__file__).parent / "results" / "balancing.json"
RATIOS = ((1, 1), (1, 4), (4, 1))


def stages(cpu_seconds: float, restricted_seconds: float):
    @processing_stage(name="cpu_stage", output_columns={"word_count": "int64"})
    def cpu_stage(df):
        time.sleep(cpu_seconds)
        return df.assign(word_count=df["text"].str.count(" ").astype("int64") + 1)

    @processing_stage(name="restricted", resources=Resources(gpus=1),
                      output_columns={"score": "float64"})
    def restricted(df):
        time.sleep(restricted_seconds)
        return df.assign(score=df["word_count"] / 100.0)

    return cpu_stage, restricted


MODES = {"fixed window": {"balance": False}, "balanced, no lending": {"lend": False},
         "balanced": {}}


def one_run(client, input_dir: Path, out_dir: Path, cpu_seconds: float,
            restricted_seconds: float, mode: str, blocksize: str, cpu_workers: int) -> dict:
    client.run(_trim_memory)
    pids = list(client.run(os.getpid).values())
    cpu_stage, restricted = stages(cpu_seconds, restricted_seconds)
    pipeline = (Pipeline("balancing")
                .add_stage(JsonlReader(str(input_dir), blocksize=blocksize))
                .add_stage(cpu_stage).add_stage(restricted)
                .add_stage(ParquetWriter(str(out_dir), mode="overwrite")))
    with RssSampler(pids) as memory:
        started = time.perf_counter()
        result = pipeline.run(StreamingExecutor(progress=False, **MODES[mode]))
        wall = time.perf_counter() - started

    # The slowest stage by construction: seconds per partition over its slots.
    per_slot = {"cpu_stage": cpu_seconds / cpu_workers, "restricted": restricted_seconds}
    bottleneck = max(per_slot, key=per_slot.get)
    bound = result.partitions * per_slot[bottleneck]
    warm = min(r["stop"] for r in result.records if r["stage"] == "write_parquet")
    mine = result.stage(bottleneck)
    on_its_workers = [r for r in result.records if r["worker"] in mine.workers]
    end = max(r["stop"] for r in result.records if r["stage"] == bottleneck)
    slots = len(mine.workers)
    workers_busy = sum(max(0.0, min(r["stop"], end) - max(r["start"], warm))
                       for r in on_its_workers) / (slots * (end - warm))
    # At 4:1 the bottleneck's workers also read and write: the least time all the work on
    # them takes is a bound too.
    shared_bound = sum(r["seconds"] for r in on_its_workers) / slots
    # The stage does more than sleep (it counts words in 4 MB of text): the bound its
    # measured busy time sets.
    measured_bound = sum(r["seconds"] for r in result.records
                         if r["stage"] == bottleneck) / slots
    io = [r for r in result.records if r["stage"] in ("read_jsonl", "write_parquet")]
    io_shared = sum(r["worker"] in mine.workers for r in io) / max(len(io), 1)
    held: dict[float, int] = {}
    for stage in result.stages:
        for t, n in stage.in_flight_history:
            held[t] = held.get(t, 0) + n
    return {
        "mode": mode,
        "partitions": result.partitions, "rows": result.rows,
        "wall_seconds": round(wall, 3), "bound_seconds": round(bound, 3),
        "wall_over_bound": round(wall / bound, 3),
        "measured_bound_seconds": round(measured_bound, 3),
        "wall_over_measured_bound": round(wall / measured_bound, 3),
        "shared_bound_seconds": round(shared_bound, 3),
        "wall_over_shared_bound": round(wall / shared_bound, 3),
        "bottleneck": bottleneck, "executor_bottleneck": result.bottleneck,
        "bottleneck_busy_fraction": mine.busy_fraction,
        "bottleneck_workers_busy_fraction": round(workers_busy, 4),
        "restricted_busy_fraction": result.stage("restricted").busy_fraction,
        "reads_writes_on_bottleneck_workers": round(io_shared, 3),
        "bottleneck_mean_queue": mine.mean_queue_length,
        "final_caps": {s.name: s.cap_history[-1][1] for s in result.stages if s.cap_history},
        "peak_partitions_held": max(held.values(), default=0),
        "peak_memory_mb": round(memory.peak / 1e6, 1),
        "baseline_memory_mb": round(memory.baseline / 1e6, 1),
        "peak_above_baseline_mb": round((memory.peak - memory.baseline) / 1e6, 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--partition-mb", type=float, default=4.0)
    parser.add_argument("--unit", type=float, default=0.25,
                        help="seconds per partition of the cheaper middle stage")
    parser.add_argument("--cpu-workers", type=int, default=2)
    parser.add_argument("--ratios", nargs="+", default=[f"{c}:{r}" for c, r in RATIOS],
                        help="CPU:restricted cost ratios, e.g. 1:4")
    parser.add_argument("--output", default=None,
                        help="JSON file (default benchmarks/results/balancing.json, "
                             "balancing-<n>cpu.json with other worker counts)")
    args = parser.parse_args(argv)
    ratios = [tuple(int(x) for x in ratio.split(":")) for ratio in args.ratios]
    logging.basicConfig(level=logging.WARNING)

    runs = []
    with tempfile.TemporaryDirectory(prefix="curator-bench-") as tmp:
        tmp = Path(tmp)
        make_corpus(tmp / "in", args.partitions, args.partition_mb)
        make_corpus(tmp / "warm", 2, 0.1)
        blocksize = f"{int(args.partition_mb * 1.5 * 1e6)}B"  # one file per partition
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None,
                               resources={"GPU": 1, "GPU_MEMORY_GB": 80},
                               silence_logs=logging.ERROR)
        add_cpu_workers(cluster, args.cpu_workers, silence_logs=logging.ERROR)
        with cluster, Client(cluster) as client:
            client.wait_for_workers(1 + args.cpu_workers)
            one_run(client, tmp / "warm", tmp / "out-warm", 0.01, 0.01, "balanced", blocksize,
                    args.cpu_workers)
            for cpu, restricted in ratios:
                for mode in MODES:
                    run = one_run(client, tmp / "in", tmp / "out", cpu * args.unit,
                                  restricted * args.unit, mode, blocksize, args.cpu_workers)
                    run["ratio"] = f"{cpu}:{restricted}"
                    runs.append(run)
                    print(f"  {run['ratio']} {run['mode']}: {run}", file=sys.stderr)

    targets = {}
    for cpu, restricted in ratios:
        ratio = f"{cpu}:{restricted}"
        fixed, balanced = (next(r for r in runs if r["ratio"] == ratio and r["mode"] == m)
                           for m in ("fixed window", "balanced"))
        targets[ratio] = {
            "balanced_bottleneck_busy_at_least_0.97": balanced["bottleneck_busy_fraction"] >= 0.97,
            "balanced_wall_within_1.1x_bound": balanced["wall_over_bound"] <= 1.1,
            "balanced_wall_within_1.1x_measured_bound": balanced["wall_over_measured_bound"] <= 1.1,
            "balanced_peak_memory_not_above_fixed": (balanced["peak_memory_mb"]
                                                     <= fixed["peak_memory_mb"]),
            "balanced_over_fixed_peak_above_baseline": round(
                balanced["peak_above_baseline_mb"] / max(fixed["peak_above_baseline_mb"], 1e-9), 3),
        }
    header = ("ratio", "mode", "wall s", "bound s", "wall/bound", "wall/measured bound",
              "wall/bound w. shared",
              "bottleneck", "busy", "its workers busy", "restricted busy", "io on its workers",
              "held peak", "peak MB", "above base MB")
    rows = [(r["ratio"], r["mode"], f"{r['wall_seconds']:.2f}", f"{r['bound_seconds']:.2f}",
             f"{r['wall_over_bound']:.3f}", f"{r['wall_over_measured_bound']:.3f}",
             f"{r['wall_over_shared_bound']:.3f}", r["bottleneck"],
             f"{r['bottleneck_busy_fraction']:.3f}", f"{r['bottleneck_workers_busy_fraction']:.3f}",
             f"{r['restricted_busy_fraction']:.3f}",
             f"{r['reads_writes_on_bottleneck_workers']:.2f}", str(r["peak_partitions_held"]),
             f"{r['peak_memory_mb']:.0f}", f"{r['peak_above_baseline_mb']:.0f}") for r in runs]
    print_table(header, rows)
    print(json.dumps(targets, indent=2))
    results = RESULTS if args.cpu_workers == 2 else RESULTS.with_name(
        f"balancing-{args.cpu_workers}cpu.json")
    if args.output:
        results = Path(args.output)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps({
        "config": vars(args), "cpu_count": os.cpu_count(), "runs": runs, "targets": targets,
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
