"""Dedup that remembers: an index of the base corpus against dedup of everything again;
line dedup beside datatrove's.

Two parts, each printed as a table and written to ``benchmarks/results/incremental.json``.

**Incremental dedup.** A base corpus (``benchmarks/corpus.py``: the bundled sample
replicated, with exact and near duplicates planted) and a new batch of a tenth of its
size: fresh documents, exact copies of base documents (5% of the batch) and near
duplicates of base documents (5%, one word in 60 edited), ids after the base's. For
exact and fuzzy dedup (defaults: md5; 20 bands x 13, char 24), on one
``LocalCluster(n_workers=2, threads_per_worker=1)``:

* **from scratch**: the workflow (``ExactDeduplicationWorkflow`` /
  ``FuzzyDeduplicationWorkflow``) over base and batch together, JSONL in, Parquet out;
* **incremental**: the index of the base (built once, timed apart), then the batch
  queried against it, its kept documents written as Parquet, and the batch appended.

Wall seconds, and CPU seconds of every process (this one, the scheduler in it, the
workers), for each; the incremental run's share of the from-scratch cost; and whether
the batch documents removed are the same (they must be).

**Line dedup.** The bundled sample replicated (``benchmarks/corpus.py``) with shared
boilerplate: every document gets one to three header lines and one to three footer
lines from a pool of 40 (menus, cookie notices, copyright lines). ``LineDedup`` (lines,
keep the first) on the cluster above, against datatrove's sentence dedup set to lines
(``SentDedupConfig(split_sentences=False, n_sentences=1)``, its three steps in one
process, ``LocalPipelineExecutor``), on the corpus and on it made 8 times larger. MB of
text per CPU-second (datatrove writes uncompressed JSONL, we write Parquet), and the
peak resident memory of the largest worker and of both, at 1x and 8x with the same
blocksize.

Every operation runs once on a small corpus first, so imports and compiled kernels load
outside the measurements. Run: ``python benchmarks/incremental.py [--base-mb 200]
[--lines-mb 20]``. With ``/work/corpus/scale1`` present (JSONL shards of real diverse
text), one more row deduplicates a tenth of it against the rest.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
from fuzzy_dedup import (
    _maxrss_mb,
    _start_measuring,
    _tree_cpu,
    encode_datatrove_hashes,
)
from table import print_table

RESULTS = Path(__file__).resolve().parent / "results" / "incremental.json"
SCALE1 = Path("/work/corpus/scale1")
BLOCKSIZE = "16MiB"
BOILERPLATE = [f"{kind} {i}" for i, kind in enumerate(
    ["Home | Products | About us | Contact", "Accept all cookies to continue browsing",
     "Copyright 2026 Example Media Group. All rights reserved.", "Share on social media",
     "Sign up for our newsletter", "Privacy policy | Terms of use | Cookie settings",
     "Skip to main content", "Related articles", "Follow us", "Back to top"] * 4)]


# -- corpora ----------------------------------------------------------------------------------

def _read_jsonl(directory: Path) -> pd.DataFrame:
    return pd.concat([pd.read_json(f, lines=True) for f in sorted(directory.glob("*.jsonl"))],
                     ignore_index=True)


def _write_shards(df: pd.DataFrame, directory: Path, shard_docs: int = 4000) -> None:
    shutil.rmtree(directory, ignore_errors=True)  # an earlier run's shards
    directory.mkdir(parents=True)
    for i, start in enumerate(range(0, len(df), shard_docs)):
        df.iloc[start:start + shard_docs].to_json(directory / f"shard-{i:04d}.jsonl",
                                                  orient="records", lines=True,
                                                  force_ascii=False)


def make_batch(base: pd.DataFrame, fresh: pd.DataFrame, fraction: float,
               seed: int) -> pd.DataFrame:
    """A tenth of the base's size: fresh documents, exact copies and near duplicates of
    base documents, shuffled, ids after the base's."""
    rng = np.random.default_rng(seed)
    size = int(len(base) * fraction)
    copies = base.sample(n=int(size * 0.05), random_state=seed)
    near = base.sample(n=int(size * 0.05), random_state=seed + 1)
    near = near.assign(text=[corpus._near_duplicate(t.split(" "), rng) for t in near["text"]])
    fresh = fresh.iloc[:size - len(copies) - len(near)]
    batch = pd.concat([fresh, copies, near], ignore_index=True)
    batch = batch.iloc[rng.permutation(len(batch))].reset_index(drop=True)
    return batch.assign(id=np.arange(len(batch), dtype=np.int64) + int(base["id"].max()) + 1)


def make_incremental_corpora(work: Path, base_mb: int) -> tuple[Path, Path, pd.DataFrame]:
    corpus.build(work / "base", base_mb, seed=0)
    corpus.build(work / "fresh", max(1, base_mb // 8), seed=1)
    base = _read_jsonl(work / "base")
    batch = make_batch(base, _read_jsonl(work / "fresh"), 0.1, seed=2)
    _write_shards(batch, work / "batch")
    return work / "base", work / "batch", batch


def make_line_corpus(directory: Path, size_mb: int, seed: int = 0) -> float:
    """The replicated sample with shared boilerplate; returns its MB of text."""
    raw = directory.with_name(directory.name + "-raw")
    corpus.build(raw, size_mb, seed=seed)
    docs = _read_jsonl(raw)
    rng = np.random.default_rng(seed)
    pool = np.array(BOILERPLATE, dtype=object)
    heads = ["\n".join(pool[rng.integers(0, len(pool), rng.integers(1, 4))])
             for _ in range(len(docs))]
    feet = ["\n".join(pool[rng.integers(0, len(pool), rng.integers(1, 4))])
            for _ in range(len(docs))]
    docs["text"] = [f"{h}\n{t}\n{f}" for h, t, f in zip(heads, docs["text"], feet, strict=True)]
    _write_shards(docs[["id", "text"]], directory)
    return docs["text"].str.len().sum() / 1e6


# -- measurements -----------------------------------------------------------------------------

def _peaks(client) -> dict:
    """Peak resident MB since the measurement began: the largest worker, all workers, and
    this process (which made the corpora, so holds their pages)."""
    workers = client.run(_maxrss_mb)
    return {"max_worker_mb": round(max(workers.values()), 1),
            "sum_workers_mb": round(sum(workers.values()), 1), "client_mb": round(_maxrss_mb(), 1)}


def _measured(client, run) -> dict:
    cpu, wall = _start_measuring(client)
    value = run()
    return {"wall_seconds": round(time.perf_counter() - wall, 2),
            "cpu_seconds": round(_tree_cpu() - cpu, 2), "peak_rss": _peaks(client),
            "value": value}


def incremental_rows(client, base: Path, batch_dir: Path, batch: pd.DataFrame,
                     work: Path, label: str, kinds=("exact", "fuzzy")) -> list[dict]:
    from curator_dask import DocumentDataset
    from curator_dask.dedup import (
        ExactDedupIndex,
        ExactDeduplicationWorkflow,
        FuzzyDedupIndex,
        FuzzyDeduplicationWorkflow,
    )

    batch_ids = set(batch["id"].tolist())
    rows = []
    for kind, workflow, index_class in (("exact", ExactDeduplicationWorkflow, ExactDedupIndex),
                                        ("fuzzy", FuzzyDeduplicationWorkflow, FuzzyDedupIndex)):
        if kind not in kinds:
            continue
        out = work / f"{label}-{kind}"
        shutil.rmtree(out, ignore_errors=True)  # what an earlier run of the benchmark left

        # Each closure binds this iteration's values: it runs before the loop moves on.
        def scratch(kind=kind, workflow=workflow, out=out):
            options = {"perform_removal": True} if kind == "fuzzy" else {}
            workflow(input_path=[str(base), str(batch_dir)], output_path=str(out / "scratch"),
                     cache_path=str(out / "cache"), input_blocksize=BLOCKSIZE, **options).run()
            kept = set(pd.read_parquet(out / "scratch", columns=["id"])["id"].tolist())
            return sorted(batch_ids - kept)

        def build(index_class=index_class, out=out):
            index = index_class(str(out / "index"))
            ds = DocumentDataset.read_jsonl(str(base), blocksize=BLOCKSIZE)
            index.query(ds).append()
            return index.keys

        def incremental(index_class=index_class, out=out):
            index = index_class(str(out / "index"))
            query = index.query(DocumentDataset.read_jsonl(str(batch_dir), blocksize=BLOCKSIZE))
            query.kept.to_parquet(str(out / "incremental"))
            query.append()
            kept = set(pd.read_parquet(out / "incremental", columns=["id"])["id"].tolist())
            return {"removed": sorted(batch_ids - kept), "by_reason": query.removed}

        if label == "warm-up":  # imports and compiled kernels, outside any measurement
            scratch(), build(), incremental()
            continue
        from_scratch = _measured(client, scratch)
        built = _measured(client, build)
        step = _measured(client, incremental)
        same = step["value"]["removed"] == from_scratch["value"]
        rows.append({"corpus": label, "kind": kind, "from_scratch": from_scratch,
                     "index_build": built, "incremental": step,
                     "identical_removals": same,
                     "batch_removed": len(step["value"]["removed"]),
                     "wall_share": round(step["wall_seconds"] / from_scratch["wall_seconds"], 3),
                     "cpu_share": round(step["cpu_seconds"] / from_scratch["cpu_seconds"], 3)})
    return rows


def line_rows(client, work: Path, size_mb: int) -> list[dict]:
    from curator_dask import DocumentDataset
    from curator_dask.dedup import LineDedup

    rows = []
    warm = work / "lines-warm-up"
    make_line_corpus(warm, 1)
    LineDedup()(DocumentDataset.read_jsonl(str(warm))).df.compute()  # outside measurements
    for scale in (1, 8):
        directory = work / f"lines-{scale}x"
        megabytes = make_line_corpus(directory, size_mb * scale)

        def run(directory=directory, scale=scale):
            stage = LineDedup()
            ds = DocumentDataset.read_jsonl(str(directory), blocksize=BLOCKSIZE)
            written = stage(ds).to_parquet(str(work / f"lines-out-{scale}x"), mode="overwrite")
            return {"removed_lines": written.counters.get(stage.counter, 0),
                    "emptied": written.dropped.get(stage.reason, 0)}

        measured = _measured(client, run)
        rows.append({"method": f"curator-dask LineDedup {scale}x", "mb": round(megabytes, 1),
                     **measured,
                     "mb_per_cpu_second": round(megabytes / measured["cpu_seconds"], 2)})
        rows.append(datatrove_lines(directory, work / "datatrove", megabytes, scale))
    return rows


def datatrove_lines(directory: Path, work: Path, megabytes: float, scale: int) -> dict:
    """datatrove's sentence dedup on lines, its three steps in this process."""
    try:
        from datatrove.executor import LocalPipelineExecutor
        from datatrove.pipeline.dedup.sentence_dedup import (
            SentDedupConfig,
            SentenceDedupFilter,
            SentenceDedupSignature,
            SentenceFindDedups,
        )
        from datatrove.pipeline.readers import JsonlReader
        from datatrove.pipeline.writers import JsonlWriter
    except ImportError as err:
        return {"method": f"datatrove sentence dedup (lines) {scale}x", "error": str(err)}
    encode_datatrove_hashes()
    config = SentDedupConfig(n_sentences=1, split_sentences=False, min_doc_words=0,
                             min_num_sentences=0)
    shutil.rmtree(work, ignore_errors=True)
    start_cpu, start = _tree_cpu(), time.perf_counter()
    steps = [
        [JsonlReader(str(directory), glob_pattern="*.jsonl", id_key="id"),
         SentenceDedupSignature(output_folder=str(work / "sigs"), config=config)],
        [SentenceFindDedups(data_folder=str(work / "sigs"), output_folder=str(work / "dups"),
                            config=config)],
        [JsonlReader(str(directory), glob_pattern="*.jsonl", id_key="id"),
         SentenceDedupFilter(data_folder=str(work / "dups"), config=config),
         JsonlWriter(str(work / "out"), compression=None)],
    ]
    for pipeline in steps:
        LocalPipelineExecutor(pipeline=pipeline, tasks=1, workers=1,
                              logging_dir=str(work / "logs"), skip_completed=False).run()
    cpu = _tree_cpu() - start_cpu
    return {"method": f"datatrove sentence dedup (lines) {scale}x", "mb": round(megabytes, 1),
            "wall_seconds": round(time.perf_counter() - start, 2), "cpu_seconds": round(cpu, 2),
            "mb_per_cpu_second": round(megabytes / cpu, 2)}


# -- main -------------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-mb", type=int, default=200)
    parser.add_argument("--lines-mb", type=int, default=20)
    parser.add_argument("--skip", choices=("incremental", "lines"), action="append",
                        default=[])
    parser.add_argument("--kinds", default="exact,fuzzy",
                        help="the incremental rows to run (default: %(default)s)")
    parser.add_argument("--label", default="generated",
                        help="the generated corpus's name in the table (default: %(default)s)")
    parser.add_argument("--work", default=None, help="scratch directory (default: a new one)")
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    work = Path(args.work or tempfile.mkdtemp(prefix="incremental-bench-"))
    # A run of one part keeps the other part's last figures.
    results: dict = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results.update({"machine": platform.platform(), "date": time.strftime("%Y-%m-%d")})
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        if "incremental" not in args.skip:
            kinds = tuple(args.kinds.split(","))
            incremental_rows(client, *make_incremental_corpora(work / "warm-up", 2),
                             work, "warm-up", kinds)
            base, batch_dir, batch = make_incremental_corpora(work, args.base_mb)
            rows = incremental_rows(client, base, batch_dir, batch, work, args.label, kinds)
            if len(list(SCALE1.glob("*.jsonl"))) >= 2:  # once the corpus is written
                rows += incremental_rows(client, *_split_real(SCALE1, work), work, "scale1",
                                         kinds)
            # Rows of other sizes or kinds from earlier runs stay beside these.
            rows = [*[r for r in results.get("incremental", [])
                      if (r["corpus"], r["kind"]) not in {(n["corpus"], n["kind"])
                                                          for n in rows}], *rows]
            results["incremental"] = rows
            print_table(("corpus", "kind", "scratch wall s", "scratch CPU s", "incr. wall s",
                         "incr. CPU s", "wall share", "CPU share", "index build s",
                         "batch removed", "identical"),
                        [(r["corpus"], r["kind"], r["from_scratch"]["wall_seconds"],
                          r["from_scratch"]["cpu_seconds"], r["incremental"]["wall_seconds"],
                          r["incremental"]["cpu_seconds"], r["wall_share"], r["cpu_share"],
                          r["index_build"]["wall_seconds"], r["batch_removed"],
                          r["identical_removals"]) for r in rows])
        if "lines" not in args.skip:
            rows = line_rows(client, work, args.lines_mb)
            results["lines"] = rows
            print_table(("method", "MB", "wall s", "CPU s", "MB per CPU-s",
                         "peak MB (largest worker)", "peak MB (workers)"),
                        [(r["method"], r.get("mb"), r.get("wall_seconds"), r.get("cpu_seconds"),
                          r.get("mb_per_cpu_second"),
                          r.get("peak_rss", {}).get("max_worker_mb", ""),
                          r.get("peak_rss", {}).get("sum_workers_mb", "")) for r in rows])
    RESULTS.parent.mkdir(exist_ok=True)
    for row in results.get("incremental", []):  # the id lists are for the check only
        for part in ("from_scratch", "incremental"):
            row[part].pop("value", None)
    RESULTS.write_text(json.dumps(results, indent=1, default=str))
    return 0


def _split_real(directory: Path, work: Path) -> tuple[Path, Path, pd.DataFrame]:
    """The real corpus as base (its first nine tenths of documents) and batch (the last
    tenth), with ids in that order."""
    docs = pd.concat([pd.read_json(f, lines=True) for f in sorted(directory.glob("*.jsonl"))],
                     ignore_index=True)[["text"]]
    docs = docs.assign(id=np.arange(len(docs), dtype=np.int64))[["id", "text"]]
    cut = len(docs) - len(docs) // 10
    _write_shards(docs.iloc[:cut], work / "scale1-base")
    _write_shards(docs.iloc[cut:], work / "scale1-batch")
    return work / "scale1-base", work / "scale1-batch", docs.iloc[cut:]


if __name__ == "__main__":
    sys.exit(main())
