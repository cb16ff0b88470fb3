"""Semantic dedup benchmark: our k-means and tiled pairwise beside scikit-learn + numpy.

What it measures, on one set of generated embeddings (unit vectors around topic
directions, 384 dimensions like all-MiniLM-L6-v2, 5% of them near copies):

* **clustering, docs/s per core**: documents divided by the CPU seconds (user + system)
  of every process that worked. Ours: ``fit_kmeans`` (k-means++ on a sample, then Lloyd
  over blocks of embeddings) on a ``LocalCluster(n_workers=2, threads_per_worker=1)``,
  the embeddings spread over 8 partitions held by the workers; CPU seconds of the
  client (with the scheduler) and the worker processes, read with psutil. Twice: with
  the default ``block_bytes`` (a corpus up to 128 MiB is fitted in one task), and with
  one block per partition, so every Lloyd step is a round of 8 tasks (the distributed
  path, whatever the size). Baseline: scikit-learn ``KMeans(init="k-means++",
  n_init=1, algorithm="lloyd")`` on the whole array in this process, BLAS held to one
  thread. Each stops when the centroids stop moving (``tol=0``) or after ``max_iter``
  steps; the steps and the inertia of each are reported, so a faster but worse
  clustering would show. Each is run ``--repeat`` times (the same seed, so the same
  work); the table shows the mean.
* **pairwise, docs/s per core**: within every cluster of the same labels, each
  document's highest cosine similarity to one ranked before it. Ours:
  ``max_similarity_before`` in tiles of ``--block`` rows and columns; baseline: numpy,
  the cluster's whole similarity matrix, upper triangle masked, max per column (what
  NeMo Curator's unbatched path does). One thread, CPU seconds of this process. The
  two must agree (checked).
* **memory as the corpus grows 8x** at a fixed number of clusters (so each cluster
  grows 8x): the growth of this process's resident set over the pairwise step, for
  both, and the largest similarity matrix each computed (elements).

No GPU figures: this machine has none (the same kernels run on CUDA through torch; see
``docs/semantic_dedup.md``).

Run: ``python benchmarks/semantic_dedup.py [--docs 8000 --clusters 8]``; prints tables
and writes ``benchmarks/results/semantic_dedup.json``. ``--phases clustering`` leaves
out the pairwise phase and the growth (numpy's whole-cluster matrices do not fit in
memory at a few hundred thousand documents).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

# One BLAS thread everywhere (workers inherit this), so "per core" means one core.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import numpy as np  # noqa: E402
import psutil  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rss import RssSampler  # noqa: E402
from table import print_table  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "semantic_dedup.json"


def embeddings(n: int, dim: int, topics: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(topics, dim))
    base = n - n // 20
    x = centres[rng.integers(topics, size=base)] + 0.8 * rng.normal(size=(base, dim))
    copies = x[rng.choice(base, n - base, replace=False)] + 0.02 * rng.normal(size=(n - base, dim))
    x = np.concatenate([x, copies]).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def cpu_seconds(processes) -> float:
    total = 0.0
    for p in processes:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def clustering(x: np.ndarray, clusters: int, max_iter: int, seed: int, repeat: int,
               init_size: int | None) -> dict:
    import dask
    from distributed import Client, LocalCluster
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from curator_dask.dedup.semantic.kmeans import DEFAULT_BLOCK_BYTES, fit_kmeans

    partitions = np.array_split(x, 8)
    variants = {"ours": DEFAULT_BLOCK_BYTES, "ours_per_partition": partitions[0].nbytes}
    out = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        parts = [client.scatter(p) for p in partitions]
        workers = [psutil.Process(pid) for pid in client.run(os.getpid).values()]
        processes = [psutil.Process(), *workers]
        with dask.config.set(scheduler=client):
            for name, block_bytes in variants.items():
                # Warm up: numba compiles the kernels in each worker on first use.
                fit_kmeans(parts, clusters, max_iter=1, tol=0, random_state=seed,
                           block_bytes=block_bytes, init_size=init_size)
                # One window over every run: psutil counts CPU time in 10 ms ticks.
                before, start = cpu_seconds(processes), time.perf_counter()
                for _ in range(repeat):
                    fit = fit_kmeans(parts, clusters, max_iter=max_iter, tol=0,
                                     random_state=seed, block_bytes=block_bytes,
                                     init_size=init_size)
                used = (cpu_seconds(processes) - before) / repeat
                wall = (time.perf_counter() - start) / repeat
                out[name] = {"cpu_s": used, "wall_s": wall, "blocks": fit.blocks,
                             "block_bytes": block_bytes, "iterations": fit.iterations,
                             "sample_iterations": fit.sample_iterations,
                             "inertia": fit.inertia, "docs_per_core_s": len(x) / used}
    with threadpool_limits(1):
        start_cpu, start = time.process_time(), time.perf_counter()
        for _ in range(repeat):
            km = KMeans(clusters, init="k-means++", n_init=1, max_iter=max_iter, tol=0,
                        algorithm="lloyd", random_state=seed).fit(x)
        used = (time.process_time() - start_cpu) / repeat
        out["sklearn"] = {"cpu_s": used, "wall_s": (time.perf_counter() - start) / repeat,
                          "iterations": int(km.n_iter_), "inertia": float(km.inertia_),
                          "docs_per_core_s": len(x) / used}
    out["labels"] = km.labels_
    return out


def numpy_pairwise(x: np.ndarray, on_matrix=None):
    s = x @ x.T
    if on_matrix is not None:
        on_matrix(s.shape)
    s[np.tril_indices(len(x))] = -np.inf  # keep i < j: rows ranked before the column
    return s.max(axis=0), s.argmax(axis=0)


def pairwise(x: np.ndarray, labels: np.ndarray, block: int) -> dict:
    from threadpoolctl import threadpool_limits

    from curator_dask.dedup.semantic.kernels import NumpyOps, max_similarity_before

    groups = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    out = {}
    ops = NumpyOps()
    with threadpool_limits(1):
        for name in ("ours", "numpy"):
            largest = [0]

            def seen(shape, largest=largest):
                largest[0] = max(largest[0], shape[0] * shape[1])

            rss = RssSampler([os.getpid()], interval=0.01)
            start_cpu = time.process_time()
            with rss:
                results = []
                for rows in groups:
                    if name == "ours":
                        results.append(max_similarity_before(ops, x[rows], block, seen)[0])
                    else:
                        results.append(numpy_pairwise(x[rows], seen)[0])
            used = time.process_time() - start_cpu
            out[name] = {"cpu_s": used, "docs_per_core_s": len(x) / used,
                         "rss_growth_mb": (rss.peak - rss.baseline) / 2**20,
                         "largest_matrix": largest[0], "max_sim": results}
    for a, b in zip(out["ours"].pop("max_sim"), out["numpy"].pop("max_sim"), strict=True):
        assert np.allclose(a[1:], b[1:], atol=1e-5), "ours and numpy disagree"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=8000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=8)
    parser.add_argument("--max-iter", type=int, default=20)
    parser.add_argument("--block", type=int, default=512)
    parser.add_argument("--growth", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--init-size", type=int, default=None,
                        help="fit_kmeans init_size (default 40 x clusters)")
    parser.add_argument("--phases", default="clustering,pairwise",
                        help="comma-separated: clustering, pairwise (with the growth)")
    args = parser.parse_args()
    phases = set(args.phases.split(","))

    x = embeddings(args.docs, args.dim, 2 * args.clusters, args.seed)
    result = {"machine": platform.machine(), "cores": os.cpu_count(),
              "load_1min": os.getloadavg()[0], "args": vars(args),
              "date": time.strftime("%Y-%m-%d")}
    clusters = clustering(x, args.clusters, args.max_iter, args.seed, args.repeat,
                          args.init_size)
    labels = clusters.pop("labels")
    result["clustering"] = clusters
    c = result["clustering"]
    print(f"{args.docs:,} documents, {args.dim} dimensions, {args.clusters} clusters, "
          f"at most {args.max_iter} Lloyd steps, "
          f"init_size {args.init_size or 40 * args.clusters:,}, mean of {args.repeat} runs "
          f"(load {result['load_1min']:.1f})")
    ratio = c["sklearn"]["cpu_s"]
    print_table(("method", "docs/s per core", "vs scikit-learn", "CPU s", "wall s",
                 "Lloyd steps (sample + all)", "inertia"),
                [(f"curator-dask fit_kmeans, {c[name]['blocks']} block(s) of at most "
                  f"{c[name]['block_bytes'] / 2**20:.0f} MiB",
                  f"{c[name]['docs_per_core_s']:,.0f}", f"{ratio / c[name]['cpu_s']:.2f}x",
                  f"{c[name]['cpu_s']:.2f}", f"{c[name]['wall_s']:.2f}",
                  f"{c[name]['sample_iterations']} + {c[name]['iterations']}",
                  f"{c[name]['inertia']:.1f}") for name in ("ours", "ours_per_partition")]
                + [("scikit-learn KMeans (1 thread)", f"{c['sklearn']['docs_per_core_s']:,.0f}",
                    "1.00x", f"{c['sklearn']['cpu_s']:.2f}", f"{c['sklearn']['wall_s']:.2f}",
                    f"{c['sklearn']['iterations']}", f"{c['sklearn']['inertia']:.1f}")])
    if "pairwise" not in phases:
        write(result)
        return
    result["pairwise"] = pairwise(x, labels, args.block)

    growth = []
    size = args.docs
    while size <= args.docs * args.growth:
        xs = embeddings(size, args.dim, 2 * args.clusters, args.seed)
        rng = np.random.default_rng(args.seed)
        # Fixed cluster count, so the clusters grow with the corpus.
        labels = rng.integers(args.clusters, size=size)
        measured = pairwise(xs, labels, args.block)
        growth.append({"docs": size, "largest_cluster": int(np.bincount(labels).max()),
                       **{f"{k}_{m}": v[m] for k, v in measured.items()
                          for m in ("rss_growth_mb", "largest_matrix", "docs_per_core_s")}})
        size *= 2
    result["growth"] = growth

    p = result["pairwise"]
    print()
    print_table(("phase", "method", "docs/s per core", "vs baseline", "largest matrix"),
                [("pairwise", f"curator-dask tiles of {args.block}",
                  f"{p['ours']['docs_per_core_s']:,.0f}",
                  f"{p['ours']['docs_per_core_s'] / p['numpy']['docs_per_core_s']:.2f}x",
                  f"{p['ours']['largest_matrix']:,}"),
                 ("pairwise", "numpy, whole cluster matrix",
                  f"{p['numpy']['docs_per_core_s']:,.0f}", "1.00x",
                  f"{p['numpy']['largest_matrix']:,}")])
    print()
    print_table(("docs", "largest cluster", "ours: RSS growth MB", "ours: largest matrix",
                 "numpy: RSS growth MB", "numpy: largest matrix"),
                [(f"{g['docs']:,}", f"{g['largest_cluster']:,}",
                  f"{g['ours_rss_growth_mb']:.1f}", f"{g['ours_largest_matrix']:,}",
                  f"{g['numpy_rss_growth_mb']:.1f}", f"{g['numpy_largest_matrix']:,}")
                 for g in growth])
    write(result)


def write(result: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
