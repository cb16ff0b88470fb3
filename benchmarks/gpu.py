"""Semantic dedup on a dask-cuda GPU worker beside the same workflow on the machine's CPU cores.

One set of generated embeddings (unit vectors around ``--topics`` directions, ``--dim``
dimensions like all-MiniLM-L6-v2's 384, 5% of them near copies of another document),
written as ``--files`` Parquet files with ``id``, ``text`` and ``embeddings``. The same
``SemanticDeduplicationWorkflow`` (``--clusters`` k-means clusters, ``eps_to_extract``
0.01, removal on, Parquet out) runs twice, each on a fresh cluster made by
``get_client``:

``gpu``  ``get_client(cluster_type="gpu")``: dask-cuda's ``LocalCUDACluster``, one
         worker per GPU; ``device="cuda"`` (torch on the GPU for k-means and the pairwise
         similarities).
``mixed`` ``get_client(cluster_type="mixed", n_workers=--cpu-workers - 1)``: the GPU
         worker and CPU workers under one scheduler; ``device="cuda"`` (every worker on
         the machine sees the GPU, so the k-means and pairwise tasks use it wherever
         they run, and the reading, shuffling and writing spread over the processes).
``cpu``  ``get_client(n_workers=--cpu-workers)`` (default: one per core, one thread each);
         ``device="cpu"`` (numpy, one BLAS thread per worker).

Reported: wall seconds of the workflow (cluster start-up excluded), documents per
second, the phases' seconds, the kept documents, and how far the two runs agree (the
share of documents both keep or both drop; k-means on another device may place a few
border documents in another cluster). Run on a machine with an NVIDIA GPU and
dask-cuda::

    python benchmarks/gpu.py --docs 1000000       # prints a table, writes results/gpu.json
    python benchmarks/gpu.py --rows minhash --json results/gpu_minhash.json

``minhash`` MinHash signatures (the fuzzy dedup defaults: 260 hashes of 24-character
         shingles) of ``--minhash-mb`` MB of real text (``benchmarks/corpus.py``: the
         bundled Python-docs sample, replicated with word substitutions; or the JSONL
         files of ``--minhash-dir``), computed by the torch kernel on the GPU
         (``minhash32_torch``, one call per 64 MB batch, host to device and back
         included; with its Triton kernels, and with torch alone) and by the numba
         kernel on all the machine's cores (one thread per core over 2 MB slices; the
         kernel releases the GIL). Reported: MB/s of text each, the ratio, the CPU
         seconds of the CPU run, the GPU's peak memory, and whether the signatures are
         identical to the CPU's. One run each, after a warm-up that compiles the numba
         kernel and starts CUDA.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

# One BLAS thread per CPU worker process (workers inherit this): the CPU run uses the
# cores through its worker processes, as a user's cluster would.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.json as pj  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from table import print_table  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "gpu.json"
MB = 1_000_000


def write_embeddings(directory: Path, docs: int, dim: int, topics: int, files: int,
                     seed: int) -> int:
    """Unit vectors around ``topics`` directions, 5% near copies; returns the copies."""
    rng = np.random.default_rng(seed)
    copies = docs // 20
    centres = rng.normal(size=(topics, dim)).astype(np.float32)
    vectors = centres[rng.integers(0, topics, docs - copies)]
    vectors += 0.6 * rng.normal(size=vectors.shape).astype(np.float32)
    sources = rng.choice(len(vectors), copies, replace=False)
    vectors = np.concatenate([vectors, vectors[sources] + 0.005 * rng.normal(
        size=(copies, dim)).astype(np.float32)])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    directory.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(np.array_split(rng.permutation(docs), files)):
        flat = pa.array(vectors[rows].reshape(-1))
        offsets = pa.array(np.arange(0, len(rows) * dim + 1, dim, dtype=np.int32))
        table = pa.table({
            "id": pa.array(rows.astype(np.int64)),
            "text": pa.array([f"document {r}" for r in rows]),
            "embeddings": pa.ListArray.from_arrays(offsets, flat),
        })
        pq.write_table(table, directory / f"part-{i:04d}.parquet")
    return copies


def run_workflow(raw: Path, work: Path, device: str, clusters: int) -> dict:
    from curator_dask.dedup import SemanticDedupConfig, SemanticDeduplicationWorkflow

    config = SemanticDedupConfig(n_clusters=clusters, embedding_column="embeddings",
                                 eps_thresholds=[0.01], eps_to_extract=0.01, device=device)
    start = time.perf_counter()
    result = SemanticDeduplicationWorkflow(
        str(raw), cache_path=str(work / "cache"), output_path=str(work / "out"),
        perform_removal=True, input_filetype="parquet", config=config).run()
    wall = time.perf_counter() - start
    kept = pq.read_table(work / "out", columns=["id"]).column("id").to_numpy()
    return {"wall_s": wall, "kept": len(kept), "kept_ids": kept,
            "duplicates": int(result.duplicate_documents),
            "phases": getattr(result, "phase_seconds", None)}


def text_slices(directory: Path, slice_bytes: int) -> list[pa.Array]:
    """The ``text`` of every JSONL file in ``directory``, cut into slices of about
    ``slice_bytes`` bytes at document boundaries."""
    texts = pa.concat_arrays([
        chunk for path in sorted(directory.glob("*.jsonl"))
        for chunk in pj.read_json(path).column("text").chunks])
    sizes = np.cumsum(pc.binary_length(texts).to_numpy(zero_copy_only=False))
    cuts = np.searchsorted(sizes, np.arange(slice_bytes, sizes[-1], slice_bytes))
    bounds = [0, *np.unique(cuts + 1).tolist(), len(texts)]
    return [texts[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)
            if bounds[i + 1] > bounds[i]]


def run_minhash(slices: list[pa.Array], cpu_threads: int, gpu_batch_slices: int) -> dict:
    """MinHash signatures of ``slices`` on the GPU (torch) and on ``cpu_threads`` cores
    (numba), timed, and whether they are identical."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from curator_dask.dedup.fuzzy.minhash_kernel import generate_permutations, minhash32
    from curator_dask.dedup.fuzzy.minhash_torch import minhash32_torch, minhash_triton

    a, b = generate_permutations(42, 260)
    seed, width = int(a[0]), 24
    text_bytes = sum(pc.sum(pc.binary_length(s)).as_py() for s in slices)

    def cpu(texts):
        return minhash32(texts, a, b, seed, width)

    def gpu(texts, fused):
        return minhash32_torch(texts, a, b, seed, width, device="cuda", fused=fused)

    cpu(slices[0][:100])   # compiles (or loads) the numba kernel
    batches = [pa.concat_arrays(slices[i:i + gpu_batch_slices])
               for i in range(0, len(slices), gpu_batch_slices)]
    gpu_runs = {}
    for fused in ([True, False] if minhash_triton is not None else [False]):
        gpu(slices[0][:100], fused)   # starts CUDA, compiles the Triton kernels
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        signatures = np.concatenate([gpu(batch, fused) for batch in batches])
        gpu_runs["triton" if fused else "torch"] = {
            "s": time.perf_counter() - start, "signatures": signatures,
            "peak_memory_mb": torch.cuda.max_memory_allocated() / MB}
    start, cpu_start = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(cpu_threads) as pool:
        on_cpu = np.concatenate(list(pool.map(cpu, slices)))
    cpu_s, cpu_cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    gpu_record = {kernel: {"s": r["s"], "mb_s": text_bytes / MB / r["s"],
                           "speed_over_cpu": cpu_s / r["s"],
                           "peak_memory_mb": r["peak_memory_mb"],
                           "identical": bool(np.array_equal(r["signatures"], on_cpu))}
                  for kernel, r in gpu_runs.items()}
    return {"text_mb": text_bytes / MB, "documents": int(sum(len(s) for s in slices)),
            "gpu_batches": len(batches), "cpu_slices": len(slices), "gpu": gpu_record,
            "cpu_threads": cpu_threads, "cpu_s": cpu_s, "cpu_mb_s": text_bytes / MB / cpu_s,
            "cpu_process_s": cpu_cpu_s}


def minhash_table(r: dict, gpu_name: str) -> None:
    print(f"MinHash signatures of {r['text_mb']:,.0f} MB ({r['documents']:,} documents)")
    rows = [[f"gpu: {gpu_name} ({kernel})", f"{g['s']:.2f}", f"{g['mb_s']:,.0f}", "",
             f"{g['speed_over_cpu']:.2f}x", f"{g['peak_memory_mb']:,.0f}",
             str(g["identical"])] for kernel, g in r["gpu"].items()]
    rows.append([f"cpu: numba, {r['cpu_threads']} threads", f"{r['cpu_s']:.2f}",
                 f"{r['cpu_mb_s']:,.0f}", f"{r['cpu_process_s']:.1f}", "1x", "", ""])
    print_table(["run", "wall s", "MB/s", "CPU s", "speed", "GPU peak MB",
                 "identical to cpu"], rows)


def minhash_row(args, gpu_name: str) -> dict:
    """The ``minhash`` row: build or read the text, run both kernels, print the table."""
    with tempfile.TemporaryDirectory(prefix="gpu-minhash-") as tmp:
        text = Path(args.minhash_dir or Path(tmp) / "text")
        if args.minhash_dir is None:
            import corpus

            start = time.perf_counter()
            corpus.build(text, args.minhash_mb, args.seed)
            print(f"{args.minhash_mb} MB of real text written in "
                  f"{time.perf_counter() - start:.1f} s")
        result = run_minhash(text_slices(text, 2 * MB), os.cpu_count(), gpu_batch_slices=32)
    minhash_table(result, gpu_name)
    return result


def save_results(args, gpu_name: str | None, runs: list, minhash: dict | None) -> None:
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({
        "gpu": gpu_name, "cpus": os.cpu_count(), "machine": platform.platform(),
        "args": vars(args), "runs": runs, "minhash": minhash}, indent=2, default=str))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--topics", type=int, default=500)
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--files", type=int, default=32)
    parser.add_argument("--cpu-workers", type=int, default=os.cpu_count())
    parser.add_argument("--rows", default="gpu,mixed,cpu",
                        help="semantic dedup rows gpu, mixed, cpu; and minhash")
    parser.add_argument("--minhash-mb", type=int, default=256,
                        help="MB of real text generated for the minhash row")
    parser.add_argument("--minhash-dir", default=None,
                        help="JSONL files with a text field for the minhash row instead")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args()

    import torch

    from curator_dask import get_client

    gpu_name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    rows = [r for r in args.rows.split(",") if r]
    if {"gpu", "mixed"} & set(rows) and gpu_name is None:
        parser.error("the gpu and mixed rows need a CUDA GPU (torch sees none); use --rows cpu")
    if importlib.util.find_spec("cudf") is None:
        print("cuDF is not installed: MinHash on the GPU (backend='cudf') is not measured")
    minhash = None
    if "minhash" in rows:
        if gpu_name is None:
            parser.error("the minhash row needs a CUDA GPU (torch sees none)")
        rows.remove("minhash")
        minhash = minhash_row(args, gpu_name)
        if not rows:
            save_results(args, gpu_name, [], minhash)
            return

    results = {}
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        raw = Path(tmp) / "raw"
        start = time.perf_counter()
        copies = write_embeddings(raw, args.docs, args.dim, args.topics, args.files, args.seed)
        print(f"{args.docs:,} embeddings of {args.dim} dimensions ({copies:,} near copies) "
              f"written in {time.perf_counter() - start:.1f} s")
        for row in rows:
            if row == "gpu":
                client = get_client(cluster_type="gpu", dashboard_address=None)
            elif row == "mixed":
                client = get_client(cluster_type="mixed", n_workers=args.cpu_workers - 1,
                                    dashboard_address=None)
            else:
                client = get_client(n_workers=args.cpu_workers, dashboard_address=None)
            with client:
                results[row] = run_workflow(raw, Path(tmp) / row, "cpu" if row == "cpu"
                                            else "cuda", args.clusters)
            print(f"{row}: {results[row]['wall_s']:.1f} s, phases {results[row]['phases']}",
                  flush=True)

    table, record = [], []
    for row, r in results.items():
        agree = None
        if row != rows[0]:
            first = results[rows[0]]
            both = np.intersect1d(first["kept_ids"], r["kept_ids"]).size
            dropped_both = args.docs - np.union1d(first["kept_ids"], r["kept_ids"]).size
            agree = (both + dropped_both) / args.docs
        label = {"gpu": f"gpu: {gpu_name}",
                 "mixed": f"mixed: the GPU + {args.cpu_workers - 1} CPU workers"}.get(
                     row, f"cpu: {args.cpu_workers} workers")
        table.append([label, f"{r['wall_s']:.1f}", f"{args.docs / r['wall_s']:,.0f}",
                      f"{r['kept']:,}", "" if agree is None else f"{agree:.4%}"])
        record.append({k: v for k, v in r.items() if k != "kept_ids"} | {
            "row": row, "agreement": agree})
    print_table(["run", "wall s", "docs/s", "kept", "agrees with first"], table)
    cpu = results.get("cpu")
    for row in ("gpu", "mixed"):
        if cpu and row in results:
            print(f"{row}: {cpu['wall_s'] / results[row]['wall_s']:.2f}x the speed of "
                  f"{args.cpu_workers} CPU workers")
    save_results(args, gpu_name, record, minhash)


if __name__ == "__main__":
    main()
