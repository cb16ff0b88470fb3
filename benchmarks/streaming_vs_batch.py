"""Streaming vs batch executor: memory, time to first output, busy fraction, wall time.

The pipeline: read JSONL -> a CPU stage (normalise text, count words) -> a slow stage
restricted to a worker advertising ``GPU=1`` (standing in for a GPU model: it sleeps in
proportion to its rows) -> write Parquet. It runs at 1x and 8x data with both executors
on one local cluster: CPU workers plus one GPU stand-in worker. Before each run the
workers collect garbage and trim their heaps (``malloc_trim``), and the idle memory
right before the run is reported as the baseline.

Reported per run:

- peak cluster memory: the sum of the workers' RSS, sampled every 50 ms
  (also above the idle baseline measured right before the run);
- time to the first output part, and one partition's end-to-end latency (median over
  partitions of the busy seconds of its read, CPU, slow and write tasks);
- busy fraction of the slow stage: its busy seconds over the span from its first task's
  start to its last task's end;
- wall time.

Targets: streaming peak at 8x at most 1.25x its peak at 1x; first output within 2x one
partition's latency; slow stage busy at least 90% after warm-up; streaming wall time no
worse than batch.

Usage::

    python benchmarks/streaming_vs_batch.py                # small sizes, a few minutes
    python benchmarks/streaming_vs_batch.py --partitions 16 --partition-mb 16
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from distributed import Client, LocalCluster
from rss import RssSampler
from table import print_table

from curator_dask import Resources, processing_stage
from curator_dask.cluster import add_cpu_workers
from curator_dask.executors import BatchExecutor, StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

RESULTS = Path(__file__).parent / "results" / "streaming_vs_batch.json"
WORDS = ("data curation removes noise from web text so that language models learn from "
         "clean well formed documents rather than boilerplate spam and duplicates").split()


def make_corpus(directory: Path, partitions: int, partition_mb: float) -> int:
    """One JSONL file per partition of about ``partition_mb`` MB; returns the row count."""
    directory.mkdir(parents=True, exist_ok=True)
    line_words = 150
    rows_per_file = max(1, int(partition_mb * 1e6 / (line_words * 7)))
    total = 0
    for p in range(partitions):
        with open(directory / f"shard-{p:05d}.jsonl", "w") as out:
            for r in range(rows_per_file):
                words = " ".join(WORDS[(r + i) % len(WORDS)] for i in range(line_words))
                out.write(json.dumps({"text": f"doc {p}-{r} {words}", "n": total}) + "\n")
                total += 1
    return total


@processing_stage(name="normalize", output_columns={"word_count": "int64"})
def normalize(df):
    text = df["text"].str.lower().str.strip()
    return df.assign(text=text, word_count=text.str.count(" ").astype("int64") + 1)


def slow_model(seconds_per_row: float):
    @processing_stage(name="slow_model", resources=Resources(gpus=1),
                      output_columns={"score": "float64"})
    def model(df):
        time.sleep(len(df) * seconds_per_row)
        return df.assign(score=df["word_count"] / 100.0)

    return model


def _trim_memory() -> int:
    """Give freed memory back to the OS, so each run starts from a comparable RSS."""
    import ctypes
    import gc

    gc.collect()
    return ctypes.CDLL("libc.so.6").malloc_trim(0)


def one_run(client, executor_name: str, input_dir: Path, out_dir: Path, model,
            blocksize: str) -> dict:
    client.run(_trim_memory)
    pids = list(client.run(os.getpid).values())
    executor = (StreamingExecutor(progress=False) if executor_name == "streaming"
                else BatchExecutor(progress=False))
    pipeline = (Pipeline("bench")
                .add_stage(JsonlReader(str(input_dir), blocksize=blocksize))
                .add_stage(normalize)
                .add_stage(model)
                .add_stage(ParquetWriter(str(out_dir), mode="overwrite")))
    with RssSampler(pids) as memory:
        started = time.perf_counter()
        result = pipeline.run(executor)
        wall = time.perf_counter() - started
    slow = [r for r in result.records if r["stage"] == "slow_model"]
    busy = sum(r["seconds"] for r in slow)
    span = max(r["stop"] for r in slow) - min(r["start"] for r in slow)
    per_partition: dict[int, float] = {}
    for r in result.records:
        per_partition[r["index"]] = per_partition.get(r["index"], 0.0) + r["seconds"]
    latency = statistics.median(per_partition.values())
    return {
        "executor": executor_name, "partitions": result.partitions, "rows": result.rows,
        "wall_seconds": round(wall, 3),
        "time_to_first_output": round(result.time_to_first_output, 3),
        "partition_latency": round(latency, 3),
        "first_output_over_latency": round(result.time_to_first_output / latency, 2),
        "slow_stage_busy_fraction": round(busy / span, 3) if span > 0 else None,
        "peak_memory_mb": round(memory.peak / 1e6, 1),
        "baseline_memory_mb": round(memory.baseline / 1e6, 1),
        "peak_above_baseline_mb": round((memory.peak - memory.baseline) / 1e6, 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=6, help="partitions at 1x")
    parser.add_argument("--partition-mb", type=float, default=4.0)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--slow-seconds-per-partition", type=float, default=0.5)
    parser.add_argument("--cpu-workers", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    faulthandler.dump_traceback_later(
        int(os.environ.get("BENCH_DUMP_AFTER", "0")) or 10**6, exit=False
    )

    with tempfile.TemporaryDirectory(prefix="curator-bench-") as tmp:
        tmp = Path(tmp)
        rows_per_partition = None
        inputs = {}
        for scale in args.scales:
            n = make_corpus(tmp / f"in-{scale}x", args.partitions * scale, args.partition_mb)
            rows_per_partition = n // (args.partitions * scale)
            inputs[scale] = tmp / f"in-{scale}x"
        model = slow_model(args.slow_seconds_per_partition / rows_per_partition)
        blocksize = f"{int(args.partition_mb * 1.5 * 1e6)}B"  # one file per partition

        gpu = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, resources={"GPU": 1, "GPU_MEMORY_GB": 80},
                           silence_logs=logging.ERROR)
        add_cpu_workers(gpu, args.cpu_workers, silence_logs=logging.ERROR)
        runs = []
        with gpu, Client(gpu) as client:
            client.wait_for_workers(1 + args.cpu_workers)
            # Streaming runs first: memory a batch run leaves in worker allocators would
            # otherwise count against streaming.
            for name in ("streaming", "batch"):
                for scale in args.scales:
                    run = one_run(client, name, inputs[scale], tmp / f"out-{name}-{scale}",
                                  model, blocksize)
                    run["scale"] = scale
                    runs.append(run)
                    print(f"  {name} {scale}x: {run}", file=sys.stderr)

    by = {(r["executor"], r["scale"]): r for r in runs}
    lo, hi = min(args.scales), max(args.scales)
    targets = {
        "streaming_peak_ratio_8x_over_1x": round(
            by["streaming", hi]["peak_memory_mb"] / by["streaming", lo]["peak_memory_mb"], 3),
        "streaming_peak_above_baseline_ratio": round(
            by["streaming", hi]["peak_above_baseline_mb"]
            / max(by["streaming", lo]["peak_above_baseline_mb"], 1e-9), 3),
        "batch_peak_above_baseline_ratio": round(
            by["batch", hi]["peak_above_baseline_mb"]
            / max(by["batch", lo]["peak_above_baseline_mb"], 1e-9), 3),
        "streaming_first_output_over_latency": [by["streaming", s]["first_output_over_latency"]
                                                for s in args.scales],
        "streaming_slow_busy_fraction": [by["streaming", s]["slow_stage_busy_fraction"]
                                         for s in args.scales],
        "streaming_over_batch_wall": [round(by["streaming", s]["wall_seconds"]
                                            / by["batch", s]["wall_seconds"], 3)
                                      for s in args.scales],
    }
    header = ("executor", "scale", "parts", "wall s", "first out s", "latency s",
              "slow busy", "peak MB", "above base MB")
    rows = [(r["executor"], f"{r['scale']}x", str(r["partitions"]), f"{r['wall_seconds']:.2f}",
             f"{r['time_to_first_output']:.2f}", f"{r['partition_latency']:.2f}",
             f"{r['slow_stage_busy_fraction']:.2f}", f"{r['peak_memory_mb']:.0f}",
             f"{r['peak_above_baseline_mb']:.0f}") for r in runs]
    print_table(header, rows)
    print(json.dumps(targets, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "config": vars(args), "cpu_count": os.cpu_count(), "runs": runs, "targets": targets,
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
