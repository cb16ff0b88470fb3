"""Read throughput: curator-dask's JSONL reader beside dask.dataframe.read_json and pyarrow.

Generates JSONL (``--size-mb``, default ~1 GB) of web-like documents, then reads it into
partitions three ways in one run and reports MB/s, MB/s per core and the ratios:

- curator-dask ``DocumentDataset.read_jsonl`` on a LocalCluster (``--workers`` processes,
  one thread each);
- ``dask.dataframe.read_json(lines=True, blocksize=...)`` on the same cluster;
- ``pyarrow.json.read_json`` in this single process, one file after another, with one
  thread (per-core baseline) and with all threads.

Each reader materialises every partition on the workers (a row count is all that comes
back), so the figures measure parsing, not transfer to the client.

    python benchmarks/io_read.py --size-mb 1000 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import tempfile
import time
from pathlib import Path

import dask.dataframe as dd
import psutil
import pyarrow.json as pajson
from distributed import Client, LocalCluster
from table import print_table

from curator_dask import DocumentDataset

WORDS = [
    "".join(random.Random(i).choices(string.ascii_lowercase, k=random.Random(-i).randint(2, 10)))
    for i in range(5000)
]


def generate(directory: Path, size_mb: int, n_files: int = 8) -> int:
    """Write ``n_files`` JSONL files totalling about ``size_mb`` MB; returns bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    per_file = size_mb * 1_000_000 // n_files
    total = 0
    doc_id = 0
    for f in range(n_files):
        written = 0
        with open(directory / f"shard-{f:03d}.jsonl", "w") as out:
            lines = []
            while written < per_file:
                text = " ".join(rng.choices(WORDS, k=rng.randint(50, 600)))
                line = json.dumps({"id": doc_id, "url": f"https://example.com/{doc_id}",
                                   "text": text, "score": rng.random()}) + "\n"
                lines.append(line)
                written += len(line)
                doc_id += 1
                if len(lines) >= 1000:
                    out.write("".join(lines))
                    lines = []
            out.write("".join(lines))
        total += written
    return total


def _worker_cpu_seconds() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system


def timed(fn, client=None):
    """Wall seconds, rows, and CPU seconds spent (by the workers, or by this process).

    CPU seconds make the per-core figure independent of what else the machine runs:
    MB per CPU-second is what one core achieves, whatever the wall clock says.
    """
    def cpu():
        if client is None:
            return _worker_cpu_seconds()
        return sum(client.run(_worker_cpu_seconds).values())

    cpu_start, start = cpu(), time.perf_counter()
    rows = fn()
    wall = time.perf_counter() - start
    return wall, rows, cpu() - cpu_start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--blocksize", default="64MiB")
    parser.add_argument("--data", help="directory for the generated data (default: a temp dir)")
    parser.add_argument("--json", default="benchmarks/results/io_read.json")
    args = parser.parse_args()

    data = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="io-read-"))
    nbytes = sum(p.stat().st_size for p in data.glob("*.jsonl")) if data.exists() else 0
    if nbytes < args.size_mb * 900_000:
        nbytes = generate(data, args.size_mb)
    mb = nbytes / 1e6
    files = sorted(str(p) for p in data.glob("*.jsonl"))

    results = {}
    with (LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                       host="127.0.0.1", dashboard_address=None) as cluster,
          Client(cluster) as client):
        ours = lambda: int(DocumentDataset.read_jsonl(str(data), blocksize=args.blocksize)  # noqa: E731
                           .df.map_partitions(len).compute().sum())
        theirs = lambda: int(dd.read_json(files, lines=True, blocksize=args.blocksize)  # noqa: E731
                             .map_partitions(len).compute().sum())
        ours()  # warm the workers' imports and the page cache
        results["curator-dask read_jsonl"] = (*timed(ours, client), args.workers)
        results["dask.dataframe.read_json"] = (*timed(theirs, client), args.workers)

    def pyarrow_single(use_threads: bool):
        def run():
            rows = 0
            for f in files:
                table = pajson.read_json(f, read_options=pajson.ReadOptions(
                    use_threads=use_threads, block_size=16 << 20))
                rows += table.num_rows
            return rows
        return run

    results["pyarrow.json, 1 thread"] = (*timed(pyarrow_single(False)), 1)
    results[f"pyarrow.json, {os.cpu_count()} threads"] = (
        *timed(pyarrow_single(True)),
        os.cpu_count(),
    )

    rows = {name: r[1] for name, r in results.items()}
    if len(set(rows.values())) != 1:
        raise SystemExit(f"readers disagree on the row count: {rows}")
    ours_rate = mb / results["curator-dask read_jsonl"][0]
    table = []
    for name, (seconds, n_rows, cpu_seconds, cores) in results.items():
        rate = mb / seconds
        table.append({"reader": name, "seconds": round(seconds, 2), "rows": n_rows,
                      "cores": cores, "MB/s": round(rate, 1),
                      "MB per CPU-second": round(mb / cpu_seconds, 1),
                      "curator-dask speed-up": round(ours_rate / rate, 2)})
    per_core_pyarrow = table[2]["MB per CPU-second"]
    summary = {
        "data_MB": round(mb, 1), "files": len(files), "blocksize": args.blocksize,
        "workers": args.workers, "results": table,
        "x_dask_read_json": round(ours_rate / (mb / results["dask.dataframe.read_json"][0]), 2),
        "per_core_vs_pyarrow_1_thread": round(table[0]["MB per CPU-second"] / per_core_pyarrow, 2),
    }
    print(f"{mb:.0f} MB of JSONL in {len(files)} files, blocksize {args.blocksize}")
    print_table(list(table[0]), [list(r.values()) for r in table])
    print(f"curator-dask vs dask.dataframe.read_json: {summary['x_dask_read_json']}x wall; "
          f"per core (MB per CPU-second) vs single-thread pyarrow: "
          f"{summary['per_core_vs_pyarrow_1_thread']}x")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
