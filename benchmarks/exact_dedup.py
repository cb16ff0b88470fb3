"""Benchmark: exact deduplication of JSONL into Parquet, curator-dask beside its peers.

One run generates a JSONL corpus with 10% exact duplicates (cached under --data-dir),
then does the same job four ways and prints a table:

* ``curator-dask``: ExactDeduplicationWorkflow on a LocalCluster (2 worker processes,
  1 thread each): read, assign ids, hash, P2P shuffle of (id, hash, row), remove, write.
* ``duckdb``: one process, ``threads`` = the cluster's cores: read_json, md5(text),
  keep one row per hash (``DISTINCT ON``; which one is unspecified, an advantage to
  DuckDB), COPY to Parquet.
* ``pandas``: one process: read_json (pyarrow engine), hashlib md5 per text,
  drop_duplicates on the hash, to_parquet.
* ``curator-dask 4x``: ours again on 4x the data, for peak memory at 4x vs 1x.

Each contender runs --repeat times, taking turns (ours on one cluster, warmed up by a tiny
run; each peer in a fresh process); the fastest wall time is reported, all in the JSON.
Wall time is the job alone (not cluster or interpreter start-up); CPU time (user +
system, all threads; ours: workers + client/scheduler, lowest of the repeats) is reported
beside it, since it is far less disturbed by other load on a shared machine. Peak memory, the
highest over the repeats, is sampled every 20 ms: the sum of worker RSS for curator-dask
(and, separately, the client + scheduler process), the process RSS for the peers.
Results go to benchmarks/results/exact_dedup.json.

    python benchmarks/exact_dedup.py --size-mb 100     # a quick run
    python benchmarks/exact_dedup.py                   # ~1 GB
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from rss import RssSampler

DUPLICATE_FRACTION = 0.10
MB = 1_000_000
RESULTS = Path(__file__).resolve().parent / "results" / "exact_dedup.json"


# -- data -------------------------------------------------------------------------------

def generate(directory: Path, size_mb: int, seed: int = 0, file_mb: int = 64) -> dict:
    """JSONL files of ~size_mb MB; 10% of documents are exact copies of earlier ones.

    A document is a unique first line (its number and a few words) and 1-12 paragraphs
    drawn from a pool of random-word paragraphs: ~2.4 KB on average, like web text.
    """
    manifest_path = directory / "_manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("size_mb") == size_mb and manifest.get("seed") == seed:
            return manifest
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = np.array(["".join(rng.choice(letters, size=int(k)))
                           for k in rng.integers(2, 11, 20000)], dtype=object)
    pool = [" ".join(vocabulary[rng.integers(0, len(vocabulary), int(k))]) + "."
            for k in rng.integers(10, 60, 50000)]
    written = documents = duplicates = 0
    recent: list[str] = []
    file_index, out, file_bytes = 0, None, 0
    target = size_mb * MB
    while written < target:
        if out is None or file_bytes >= file_mb * MB:
            if out is not None:
                out.close()
            out = open(directory / f"shard-{file_index:04d}.jsonl", "w",  # noqa: SIM115 (rotated)
                       encoding="utf-8")
            file_index, file_bytes = file_index + 1, 0
        batch = 1000
        paragraphs = rng.integers(0, len(pool), (batch, 12))
        counts = rng.integers(1, 13, batch)
        copies = rng.random(batch) < DUPLICATE_FRACTION
        lines = []
        for i in range(batch):
            if recent and copies[i]:
                text = recent[int(rng.integers(len(recent)))]
                duplicates += 1
            else:
                title = vocabulary[paragraphs[i, :3] % len(vocabulary)]
                head = f"Document {documents} " + " ".join(title)
                body = (pool[j] for j in paragraphs[i, :counts[i]])
                text = "\n\n".join([head, *body])
                recent.append(text)
                if len(recent) > 5000:
                    recent[int(rng.integers(len(recent)))] = recent.pop()
            lines.append(json.dumps({"url": f"https://example.org/doc/{documents}",
                                     "text": text}))
            documents += 1
        chunk = "\n".join(lines) + "\n"
        out.write(chunk)
        file_bytes += len(chunk)
        written += len(chunk)
    out.close()
    manifest = {"size_mb": size_mb, "seed": seed, "bytes": written, "documents": documents,
                "duplicates_written": duplicates, "files": file_index}
    manifest_path.write_text(json.dumps(manifest))
    return manifest


# -- memory sampling: rss.RssSampler ----------------------------------------------------

def cpu_seconds(pids) -> float:
    """User + system CPU time used so far by these processes (all their threads)."""
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


# -- curator-dask -----------------------------------------------------------------------

class OurCluster:
    """A LocalCluster of ``workers`` single-threaded processes, warmed up by a tiny run."""

    def __init__(self, work: Path, workers: int, blocksize: str, hash_method: str):
        self.work, self.workers = work, workers
        self.blocksize, self.hash_method = blocksize, hash_method

    def __enter__(self):
        from distributed import Client, LocalCluster

        self.cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1,
                                    processes=True, dashboard_address=None,
                                    silence_logs=logging.ERROR)
        self.client = Client(self.cluster)
        self.worker_pids = list(self.client.run(os.getpid).values())
        self._warm_up()
        self.idle_rss = sum(psutil.Process(p).memory_info().rss for p in self.worker_pids)
        return self

    def __exit__(self, *exc):
        self.client.close()
        self.cluster.close()

    def _workflow(self, data: Path, work: Path, blocksize):
        from curator_dask.dedup import ExactDeduplicationWorkflow

        for sub in ("out", "cache"):
            shutil.rmtree(work / sub, ignore_errors=True)
        return ExactDeduplicationWorkflow(str(data), str(work / "out"), str(work / "cache"),
                                          input_blocksize=blocksize,
                                          hash_method=self.hash_method)

    def _warm_up(self) -> None:
        # Imports and P2P set-up on the workers are not what we time.
        tiny = self.work / "warmup"
        shutil.rmtree(tiny, ignore_errors=True)
        (tiny / "in").mkdir(parents=True)
        with open(tiny / "in" / "a.jsonl", "w") as out:
            out.writelines(json.dumps({"url": str(i), "text": f"t{i % 50}"}) + "\n"
                           for i in range(200))
        self._workflow(tiny / "in", tiny, 1000).run()

    def run(self, data: Path) -> dict:
        """One run of ExactDeduplicationWorkflow.run(), timed and memory-sampled."""
        workflow = self._workflow(data, self.work, self.blocksize)
        me = os.getpid()
        cpu_before = cpu_seconds([*self.worker_pids, me])
        own_cpu_before = cpu_seconds([me])
        with RssSampler(lambda: self.worker_pids) as workers_rss, \
                RssSampler(lambda: [me]) as own:
            start = time.perf_counter()
            result = workflow.run()
            wall = time.perf_counter() - start
        return {
            "wall_s": wall, "cpu_s": cpu_seconds([*self.worker_pids, me]) - cpu_before,
            "client_scheduler_cpu_s": cpu_seconds([me]) - own_cpu_before,
            "identify_s": result.identify_seconds,
            "remove_write_s": result.remove_seconds, "peak_rss_bytes": workers_rss.peak,
            "idle_workers_rss_bytes": self.idle_rss,
            "client_scheduler_peak_rss_bytes": own.peak, "kept": result.kept_documents,
            "removed": result.duplicate_documents, "groups": result.duplicate_groups,
            "partitions": len(result.output.files),
        }


# -- peers (each in its own process) -------------------------------------------------------

def peer_duckdb(data: Path, out: Path, threads: int) -> dict:
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute(f"SET temp_directory = '{out.parent / 'duckdb-tmp'}'")
    start, cpu = time.perf_counter(), time.process_time()
    con.execute(f"""
        COPY (
            SELECT DISTINCT ON (h) * EXCLUDE (h)
            FROM (SELECT *, md5(text) AS h FROM read_json('{data}/*.jsonl',
                  format = 'newline_delimited', columns = {{url: 'VARCHAR', text: 'VARCHAR'}}))
        ) TO '{out}' (FORMAT parquet)
    """)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    kept = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0]
    return {"wall_s": wall, "cpu_s": cpu, "kept": kept}


def peer_pandas(data: Path, out: Path) -> dict:
    import hashlib

    import pandas as pd

    start, cpu = time.perf_counter(), time.process_time()
    frames = [pd.read_json(f, lines=True, engine="pyarrow") for f in sorted(data.glob("*.jsonl"))]
    df = pd.concat(frames, ignore_index=True)
    del frames
    df["_hash"] = [hashlib.md5(t.encode("utf-8")).hexdigest() for t in df["text"]]
    df = df.drop_duplicates("_hash").drop(columns="_hash")
    df.to_parquet(out, index=False)
    return {"wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu,
            "kept": len(df)}


def run_peer(name: str, data: Path, work: Path, threads: int) -> dict:
    """One run of a peer in a fresh process, its RSS sampled from here."""
    out = work / f"{name}.parquet"
    out.unlink(missing_ok=True)
    shutil.rmtree(work / "duckdb-tmp", ignore_errors=True)
    result_file = work / f"{name}.json"
    cmd = [sys.executable, __file__, "--peer", name, "--data-dir", str(data),
           "--peer-out", str(out), "--peer-result", str(result_file), "--workers", str(threads)]
    proc = subprocess.Popen(cmd)
    with RssSampler(lambda: [proc.pid]) as rss:
        proc.wait()
    if proc.returncode:
        raise RuntimeError(f"{name} peer failed with exit code {proc.returncode}")
    return {**json.loads(result_file.read_text()), "peak_rss_bytes": rss.peak}


def best_of(runs: list[dict]) -> dict:
    """The fastest run, with every wall time and the highest peak memory of all runs."""
    best = min(runs, key=lambda r: r["wall_s"])
    return {**best, "all_wall_s": [round(r["wall_s"], 3) for r in runs],
            "all_cpu_s": [round(r["cpu_s"], 3) for r in runs],
            "min_cpu_s": min(r["cpu_s"] for r in runs),
            "peak_rss_bytes": max(r["peak_rss_bytes"] for r in runs)}


# -- report -------------------------------------------------------------------------------

def table(rows: list[tuple[str, dict, int]]) -> str:
    lines = [f"{'run':<18}{'input MB':>9}{'wall s':>8}{'MB/s':>7}{'CPU s':>8}"
             f"{'peak RSS MB':>13}{'kept docs':>11}"]
    for name, r, nbytes in rows:
        lines.append(f"{name:<18}{nbytes / MB:>9.0f}{r['wall_s']:>8.2f}"
                     f"{nbytes / MB / r['wall_s']:>7.1f}{r['min_cpu_s']:>8.1f}"
                     f"{r['peak_rss_bytes'] / MB:>13.0f}{r['kept']:>11}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="input size (default 1024)")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(),
                                                           "curator-dask-bench"))
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes for ours, threads for DuckDB (default 2)")
    parser.add_argument("--blocksize", default="32MiB", help="curator-dask partition size")
    parser.add_argument("--hash-method", default="md5", choices=["md5", "xxh3_128"])
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each contender, interleaved; the fastest is reported")
    parser.add_argument("--no-scale", action="store_true", help="skip the 4x run")
    parser.add_argument("--no-peers", action="store_true", help="skip DuckDB and pandas")
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--peer", choices=["duckdb", "pandas"], help=argparse.SUPPRESS)
    parser.add_argument("--peer-out", help=argparse.SUPPRESS)
    parser.add_argument("--peer-result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.peer:  # child process of run_peer
        data, out = Path(args.data_dir), Path(args.peer_out)
        result = (peer_duckdb(data, out, args.workers) if args.peer == "duckdb"
                  else peer_pandas(data, out))
        Path(args.peer_result).write_text(json.dumps(result))
        return 0

    root = Path(args.data_dir)
    data = root / f"jsonl-{args.size_mb}mb"
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    print(f"generating {args.size_mb} MB of JSONL in {data} ...", flush=True)
    manifest = generate(data, args.size_mb)
    nbytes = manifest["bytes"]
    load_before = os.getloadavg()

    # Contenders take turns, so a neighbour's load on the machine hits them alike.
    peers = [] if args.no_peers else ["duckdb", "pandas"]
    runs: dict[str, list[dict]] = {name: [] for name in ["curator_dask", *peers]}
    with OurCluster(work, args.workers, args.blocksize, args.hash_method) as ours:
        for i in range(args.repeat):
            print(f"round {i + 1}/{args.repeat}: curator-dask", flush=True)
            runs["curator_dask"].append(ours.run(data))
            for name in peers:
                print(f"round {i + 1}/{args.repeat}: {name}", flush=True)
                runs[name].append(run_peer(name, data, work, args.workers))
    results = {"input": manifest, **{name: best_of(r) for name, r in runs.items()}}
    rows = [(name.replace("_", "-"), results[name], nbytes) for name in runs]

    if not args.no_scale:
        big = root / f"jsonl-{4 * args.size_mb}mb"
        print(f"generating {4 * args.size_mb} MB ...", flush=True)
        results["input_4x"] = generate(big, 4 * args.size_mb, seed=1)
        with OurCluster(work, args.workers, args.blocksize, args.hash_method) as ours:
            scaled = []
            for i in range(args.repeat):
                print(f"round {i + 1}/{args.repeat}: curator-dask 4x", flush=True)
                scaled.append(ours.run(big))
        results["curator_dask_4x"] = best_of(scaled)
        rows.append(("curator-dask 4x", results["curator_dask_4x"],
                     results["input_4x"]["bytes"]))

    mine = results["curator_dask"]
    summary = {}
    if "duckdb" in results:
        summary["wall_vs_duckdb"] = mine["wall_s"] / results["duckdb"]["wall_s"]
        summary["cpu_vs_duckdb"] = mine["min_cpu_s"] / results["duckdb"]["min_cpu_s"]
        summary["same_kept_as_duckdb"] = mine["kept"] == results["duckdb"]["kept"]
    if "pandas" in results:
        summary["wall_vs_pandas"] = mine["wall_s"] / results["pandas"]["wall_s"]
        summary["same_kept_as_pandas"] = mine["kept"] == results["pandas"]["kept"]
    if "curator_dask_4x" in results:
        summary["peak_4x_vs_1x"] = (results["curator_dask_4x"]["peak_rss_bytes"]
                                    / mine["peak_rss_bytes"])
    results["summary"] = summary
    results["settings"] = {"workers": args.workers, "threads_per_worker": 1,
                           "repeat": args.repeat, "blocksize": args.blocksize,
                           "hash_method": args.hash_method, "cpus": os.cpu_count(),
                           "python": platform.python_version(),
                           "load_average_before": load_before,
                           "load_average_after": os.getloadavg()}

    print()
    print(table(rows))
    print(f"\ncurator-dask: identify {mine['identify_s']:.2f} s, remove+write "
          f"{mine['remove_write_s']:.2f} s, {mine['partitions']} partitions; idle workers "
          f"{mine['idle_workers_rss_bytes'] / MB:.0f} MB; client+scheduler peak "
          f"{mine['client_scheduler_peak_rss_bytes'] / MB:.0f} MB")
    for key, value in summary.items():
        print(f"{key}: {value:.2f}" if isinstance(value, float) else f"{key}: {value}")
    print(f"load average before/after: {load_before[0]:.1f} / {os.getloadavg()[0]:.1f}")
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"\nwrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
