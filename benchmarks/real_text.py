"""Real text, each row beside the peer a user would pick, in one run.

Two corpora (``--corpora sample,diverse``), each row run on each: the bundled Python-docs
sample replicated to ``--size-mb`` and ``--big-mb`` MB with different ids
(``benchmarks/corpus.py``: every copy has one word in five replaced from the sample's own
words, plus planted exact and near duplicates), and the first ``--size-mb`` /
``--big-mb`` MB of the benchmark corpus of distinct real documents at ``--diverse-dir``
(``benchmarks/diverse_corpus.py``), whose ground truth gives fuzzy dedup's precision and
recall. A replicated sample has a small vocabulary, so the same code runs faster on it:
both are reported.
Each row runs the API path a NeMo Curator user would write, on a local cluster of
``--workers`` processes with one thread each, started as each contender's user starts
one (``get_client`` for curator-dask; ``--workers`` threads for DuckDB), and
each contender runs in its own fresh process, taking turns with its peer ``--repeat``
times; the fastest wall time of each is reported, every time in the JSON.

Rows:

``fuzzy``
    ``FuzzyDeduplicationWorkflow`` defaults (char 24-grams, 20 bands x 13, automatic
    blocksize) on ``--size-mb``, and the API path ``FuzzyDuplicates().identify`` -> write
    -> ``remove`` -> write (its removals checked equal to the workflow's), beside
    datasketch (``MinHash(num_perm=260)`` over the same shingles,
    ``MinHashLSH(params=(20, 13))``, union-find) in one process.
``exact``
    ``ExactDeduplicationWorkflow`` (JSONL in, Parquet out) on ``--big-mb``, and the
    API path ``ExactDuplicates.identify`` -> write -> ``remove`` -> write, beside DuckDB
    (``read_json`` -> ``md5`` -> ``DISTINCT ON`` -> ``COPY ... TO`` Parquet).
``filters``
    ``Sequential([ScoreFilter(WordCountFilter()), ScoreFilter(RepeatingTopNGramsFilter(n=2)),
    ScoreFilter(NonAlphaNumericFilter())])`` on ``--size-mb`` read and persisted first,
    timed to the count of kept documents, beside the same code on NeMo Curator 0.9
    (run by ``--nemo-python``, or ``$CURATOR_DASK_NEMO_PYTHON``: a Python with
    ``nemo-curator==0.9.0`` in its own environment; the row says why when it is absent).
``heuristics``
    NeMo Curator's English heuristic set (27 ``ScoreFilter`` s) on ``--size-mb``
    persisted first, in documents per second per core (no peer: NeMo's own nightly
    benchmark asks 120-150 of its 24 filters).
``demo``
    ``curator-dask demo`` twice in fresh processes: first with an empty kernel cache
    (``NUMBA_CACHE_DIR`` a new directory), then warm.

    python benchmarks/real_text.py --rows filters,exact,fuzzy,demo
    python benchmarks/real_text.py --corpora sample,diverse --diverse-dir /data/corpus
    python benchmarks/real_text.py --rows exact --size-mb 20 --big-mb 50 --repeat 1

Prints one line per figure (``benchmarks/table.py``): curator-dask, its peer, the ratio,
the target and whether it is met; writes every turn to ``benchmarks/results/real_text.json``.
"""

from __future__ import annotations

import argparse
import datetime
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
RESULTS = HERE / "results" / "real_text.json"
NEMO_ENV = "CURATOR_DASK_NEMO_PYTHON"


# -- children: one contender, one process -------------------------------------------------------

def _cluster(workers: int, nemo: bool = False):
    """A local cluster as each contender's user starts it: ``get_client`` (ours), or
    distributed's ``LocalCluster`` (NeMo Curator 0.9's ``get_client`` starts one)."""
    if not nemo:
        from curator_dask import get_client

        client = get_client(n_workers=workers, threads_per_worker=1, dashboard_address=None,
                            silence_logs=logging.ERROR)
        return client.cluster, client
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR)
    return cluster, Client(cluster)


def _cpu(pids) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def child_filters(data: str, workers: int, nemo: bool) -> dict:
    """The three filters over a persisted dataset, to the count of kept documents."""
    if nemo:
        from nemo_curator import ScoreFilter, Sequential
        from nemo_curator.datasets import DocumentDataset
        from nemo_curator.filters import (
            NonAlphaNumericFilter,
            RepeatingTopNGramsFilter,
            WordCountFilter,
        )
    else:
        from curator_dask import DocumentDataset, Sequential
        from curator_dask.stages.filters import (
            NonAlphaNumericFilter,
            RepeatingTopNGramsFilter,
            ScoreFilter,
            WordCountFilter,
        )
    cluster, client = _cluster(workers, nemo)
    with cluster, client:
        files = sorted(str(p) for p in Path(data).glob("*.jsonl"))
        if nemo:
            # NeMo Curator 0.9's reader; 1gb blocks would give one partition: use the
            # files, as many partitions as ours gets from its automatic blocksize.
            ds = DocumentDataset.read_json(files, backend="pandas", blocksize=None,
                                           files_per_partition=2)
        else:
            ds = DocumentDataset.read_jsonl(data)
        ds = DocumentDataset(ds.df.persist())
        npartitions = ds.df.npartitions
        len(ds.df)

        def pipeline():
            return Sequential([ScoreFilter(WordCountFilter(), text_field="text"),
                               ScoreFilter(RepeatingTopNGramsFilter(n=2), text_field="text"),
                               ScoreFilter(NonAlphaNumericFilter(), text_field="text")])

        # Warm up on one partition: imports and (ours) the kernel cache are not timed.
        small = DocumentDataset(ds.df.partitions[0])
        len(pipeline()(small).df)
        pids = [os.getpid(), *client.run(os.getpid).values()]
        cpu0, start = _cpu(pids), time.perf_counter()
        kept = len(pipeline()(ds).df)
        wall = time.perf_counter() - start
        return {"wall_s": wall, "cpu_s": _cpu(pids) - cpu0, "kept": kept,
                "partitions": npartitions}


#: Packages whose modules the exact row imports on every worker before it times.
WARM_PACKAGES = ("curator_dask", "dask", "distributed", "pyarrow", "pandas", "numpy")


def _import_all(names: list[str]) -> None:
    import contextlib
    import importlib

    for name in names:
        # An optional part the driver loaded lazily and failed to import: skipped.
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def child_exact(data: str, workers: int, work: str, path: str) -> dict:
    """Exact dedup, JSONL in and Parquet out, on a warmed-up cluster (``path``: the
    workflow, or the API path identify -> write -> remove -> write)."""
    from curator_dask import DocumentDataset
    from curator_dask.dedup import ExactDeduplicationWorkflow, ExactDuplicates

    work = Path(work)

    def once(source: str, root: Path) -> dict:
        shutil.rmtree(root, ignore_errors=True)
        start = time.perf_counter()
        if path == "workflow":
            result = ExactDeduplicationWorkflow(source, str(root / "out"),
                                                str(root / "cache")).run()
            kept, partitions = result.kept_documents, len(result.output.files)
        else:  # what a NeMo Curator user writes
            ds = DocumentDataset.read_jsonl(source)
            dedup = ExactDuplicates()
            dedup.identify(ds).to_parquet(str(root / "duplicates"))
            duplicates = DocumentDataset.read_parquet(str(root / "duplicates"), text_field=None)
            written = dedup.remove(ds, duplicates).to_parquet(str(root / "out"))
            kept, partitions = written.rows, ds.npartitions
        return {"wall_s": time.perf_counter() - start, "kept": kept, "partitions": partitions}

    cluster, client = _cluster(workers)
    with cluster, client:
        tiny = work / "tiny"
        shutil.rmtree(tiny, ignore_errors=True)
        (tiny / "in").mkdir(parents=True)
        (tiny / "in" / "a.jsonl").write_text(
            "".join(json.dumps({"id": i, "text": f"t{i % 50}"}) + "\n" for i in range(500)))
        once(str(tiny / "in"), tiny / "run")  # imports and P2P set-up, not timed
        # The tiny run's one partition ran on one worker: the others import what the
        # driver has imported now, so no worker imports while timed (DuckDB's import and
        # connection are not timed either).
        client.run(_import_all, sorted(name for name in sys.modules
                                       if name.partition(".")[0] in WARM_PACKAGES))
        pids = [os.getpid(), *client.run(os.getpid).values()]
        cpu0 = _cpu(pids)
        result = once(data, work / f"run-{path}")
        result["cpu_s"] = _cpu(pids) - cpu0
        return result


def child_duckdb(data: str, workers: int, work: str) -> dict:
    import duckdb

    out = Path(work) / "duckdb.parquet"
    out.unlink(missing_ok=True)
    con = duckdb.connect()
    con.execute(f"SET threads = {workers}")
    start, cpu = time.perf_counter(), time.process_time()
    con.execute(f"""
        COPY (SELECT DISTINCT ON (h) * EXCLUDE (h)
              FROM (SELECT *, md5(text) AS h FROM read_json('{data}/*.jsonl',
                    format = 'newline_delimited',
                    columns = {{id: 'BIGINT', source: 'VARCHAR', text: 'VARCHAR'}})))
        TO '{out}' (FORMAT parquet)""")
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    kept = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0]
    return {"wall_s": wall, "cpu_s": cpu, "kept": kept}


def child_fuzzy(data: str, workers: int, work: str, path: str | None = None) -> dict:
    """FuzzyDeduplicationWorkflow with its defaults, removal included; or (``path`` "api")
    what a NeMo Curator user writes: ``FuzzyDuplicates()`` on a dataset read with
    ``read_jsonl``, its ``remove``, the result written as Parquet."""
    from curator_dask import DocumentDataset
    from curator_dask.dedup import FuzzyDeduplicationWorkflow, FuzzyDuplicates

    work = Path(work)
    cluster, client = _cluster(workers)
    with cluster, client:
        tiny = work / "fuzzy-tiny"
        shutil.rmtree(tiny, ignore_errors=True)
        (tiny / "in").mkdir(parents=True)
        (tiny / "in" / "a.jsonl").write_text("".join(
            json.dumps({"text": f"warm up document {i % 30} " * 5}) + "\n" for i in range(300)))
        FuzzyDeduplicationWorkflow(str(tiny / "in"), str(tiny / "cache"), str(tiny / "out"),
                                   perform_removal=True).run()
        root = work / "fuzzy"
        shutil.rmtree(root, ignore_errors=True)
        import pandas as pd

        if path == "api":
            def api(source: str, into: Path):
                ds = DocumentDataset.read_jsonl(source)
                dedup = FuzzyDuplicates()
                groups = dedup.identify(ds)
                groups.to_parquet(str(into / "groups"))
                written = dedup.remove(ds, groups).to_parquet(str(into / "out"))
                return written, pd.read_parquet(into / "groups")

            (tiny / "ids").mkdir()
            (tiny / "ids" / "a.jsonl").write_text("".join(
                json.dumps({"id": i, "text": f"warm up document {i % 30} " * 5}) + "\n"
                for i in range(300)))
            api(str(tiny / "ids"), tiny / "api")  # warm: the API path's own tasks
            pids = [os.getpid(), *client.run(os.getpid).values()]
            cpu0, start = _cpu(pids), time.perf_counter()
            written, groups = api(data, root)
            wall, cpu = time.perf_counter() - start, _cpu(pids) - cpu0
            removed = groups.loc[groups["id"] != groups["group"], "id"]
            return {"wall_s": wall, "cpu_s": cpu, "kept": written.rows,
                    "removed": len(removed), "removed_ids": sorted(removed.tolist())}
        pids = [os.getpid(), *client.run(os.getpid).values()]
        cpu0, start = _cpu(pids), time.perf_counter()
        result = FuzzyDeduplicationWorkflow(data, str(root / "cache"), str(root / "out"),
                                            perform_removal=True).run()
        wall, cpu = time.perf_counter() - start, _cpu(pids) - cpu0
        groups = pd.read_parquet(result.groups_path)
        return {"wall_s": wall, "cpu_s": cpu,
                "kept": result.kept_documents, "removed": result.duplicate_documents,
                "candidate_pairs": result.candidate_pairs,
                "removed_ids": sorted(groups.loc[groups["id"] != groups["group"], "id"].tolist())}


def child_datasketch(data: str) -> dict:
    """datasketch in one process: MinHash(num_perm=260) of the same char 24-gram shingles,
    MinHashLSH(params=(20, 13)), candidates joined with union-find, lowest id kept."""
    import numpy as np
    import pandas as pd
    from datasketch import MinHash, MinHashLSH

    from curator_dask.dedup.fuzzy.components import union_find_components

    docs = pd.concat(pd.read_json(p, lines=True) for p in sorted(Path(data).glob("*.jsonl")))
    start, cpu = time.perf_counter(), time.process_time()
    lsh = MinHashLSH(num_perm=260, params=(20, 13))
    signatures = {}
    for doc_id, text in zip(docs["id"].tolist(), docs["text"].tolist(), strict=True):
        m = MinHash(num_perm=260, seed=42)
        grams = {text} if len(text) <= 24 else {text[i:i + 24]
                                                 for i in range(len(text) - 24 + 1)}
        m.update_batch([g.encode("utf-8") for g in grams])
        signatures[doc_id] = m
        lsh.insert(doc_id, m)
    pairs = [(a, b) for a, m in signatures.items() for b in lsh.query(m) if b != a]
    removed_ids = []
    if pairs:
        x, y = np.array(pairs, dtype=np.int64).T
        ids, groups = union_find_components(x, y)
        removed_ids = sorted(ids[ids != groups].tolist())
    return {"wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu,
            "kept": len(docs) - len(removed_ids), "removed": len(removed_ids),
            "removed_ids": removed_ids}


def child_heuristics(data: str, workers: int, nemo: bool = False) -> dict:
    """NeMo Curator's English heuristic set (``heuristic_filter_en.yaml``: 27 filters),
    each a ``ScoreFilter``, over a persisted dataset, to the count of kept documents."""
    from working_sets import heuristic_filters

    from curator_dask import DocumentDataset, Sequential
    from curator_dask.stages.filters import ScoreFilter

    cluster, client = _cluster(workers)
    with cluster, client:
        ds = DocumentDataset.read_jsonl(data)
        ds = DocumentDataset(ds.df.persist())
        documents = len(ds.df)

        def pipeline():
            return Sequential([ScoreFilter(f, text_field="text") for f in heuristic_filters()])

        len(pipeline()(DocumentDataset(ds.df.partitions[0])).df)  # warm-up, not timed
        pids = [os.getpid(), *client.run(os.getpid).values()]
        cpu0, start = _cpu(pids), time.perf_counter()
        kept = len(pipeline()(ds).df)
        wall = time.perf_counter() - start
        return {"wall_s": wall, "cpu_s": _cpu(pids) - cpu0, "kept": kept,
                "documents": documents,
                "docs_per_s_per_core": documents / wall / workers}


CHILDREN = {"filters": child_filters, "heuristics": child_heuristics}


def run_child(python: str, row: str, data: Path, workers: int, extra: list[str] = (),
              env: dict | None = None, timeout: int = 3600) -> dict:
    """One contender in a fresh process; its JSON result (the last line it prints)."""
    cmd = [python, str(Path(__file__).resolve()), "--child", row, "--data", str(data),
           "--workers", str(workers), *extra]
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(HERE.parent), full_env.get("PYTHONPATH", "")] if p)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout,
                          check=False)
    if proc.returncode:
        raise RuntimeError(f"{row} ({python}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best(runs: list[dict]) -> dict:
    fastest = min(runs, key=lambda r: r["wall_s"])
    return {**fastest, "all_wall_s": [round(r["wall_s"], 2) for r in runs],
            "all_cpu_s": [round(r.get("cpu_s", 0.0), 2) for r in runs]}


# -- rows -----------------------------------------------------------------------------------------

def row_filters(args, data: Path) -> dict:
    nemo = args.nemo_python or os.environ.get(NEMO_ENV)
    reason = None
    if not nemo:
        reason = f"no NeMo Curator 0.9 Python given (--nemo-python or ${NEMO_ENV})"
    elif not Path(nemo).exists():
        reason = f"{nemo} does not exist"
    ours, theirs = [], []
    for _ in range(args.repeat):
        ours.append(run_child(sys.executable, "filters", data, args.workers))
        if reason is None:
            theirs.append(run_child(nemo, "filters", data, args.workers, ["--nemo"]))
    out = {"curator_dask": best(ours)}
    if reason is None:
        out["nemo_curator_0_9"] = best(theirs)
        out["ratio"] = out["nemo_curator_0_9"]["wall_s"] / out["curator_dask"]["wall_s"]
        out["same_kept"] = out["nemo_curator_0_9"]["kept"] == out["curator_dask"]["kept"]
    else:
        out["peer_skipped"] = reason
    return out


def row_exact(args, data: Path) -> dict:
    work = Path(args.data_dir) / "work"
    work.mkdir(parents=True, exist_ok=True)
    runs = {"workflow": [], "identify_remove": [], "duckdb": []}
    for _ in range(args.repeat):
        for path in ("workflow", "identify_remove"):
            runs[path].append(run_child(sys.executable, "exact", data, args.workers,
                                        ["--work", str(work), "--path", path]))
        runs["duckdb"].append(run_child(sys.executable, "duckdb", data, args.workers,
                                        ["--work", str(work)]))
    out = {name: best(r) for name, r in runs.items()}
    for path in ("workflow", "identify_remove"):
        out[f"{path}_vs_duckdb"] = out[path]["wall_s"] / out["duckdb"]["wall_s"]
        out[f"{path}_same_kept"] = out[path]["kept"] == out["duckdb"]["kept"]
    return out


def row_fuzzy(args, data: Path) -> dict:
    work = Path(args.data_dir) / "work"
    work.mkdir(parents=True, exist_ok=True)
    ours, api, theirs = [], [], []
    for i in range(args.repeat):
        ours.append(run_child(sys.executable, "fuzzy", data, args.workers,
                              ["--work", str(work)]))
        api.append(run_child(sys.executable, "fuzzy", data, args.workers,
                             ["--work", str(work), "--path", "api"]))
        if i == 0 or not args.datasketch_once:
            theirs.append(run_child(sys.executable, "datasketch", data, 1))
    out = {"curator_dask": best(ours), "api": best(api), "datasketch": best(theirs)}
    out["ratio"] = out["datasketch"]["wall_s"] / out["curator_dask"]["wall_s"]
    size = sum(f.stat().st_size for f in data.glob("*.jsonl"))
    out["mb_per_s_per_core"] = size / 1e6 / out["curator_dask"]["wall_s"] / args.workers
    out["api_mb_per_s_per_core"] = size / 1e6 / out["api"]["wall_s"] / args.workers
    # Beside the wall: what the work costs, whatever else the machine runs.
    out["mb_per_cpu_s"] = size / 1e6 / out["curator_dask"]["cpu_s"]
    out["api_mb_per_cpu_s"] = size / 1e6 / out["api"]["cpu_s"]
    out["api_same_removed"] = out["api"]["removed_ids"] == out["curator_dask"]["removed_ids"]
    truth = _truth_path(data)
    if truth.exists():  # the diverse corpus knows its planted duplicates
        ids = _corpus_ids(data)
        for name in ("curator_dask", "api", "datasketch"):
            out[name].update(precision_recall(out[name]["removed_ids"],
                                              json.loads(truth.read_text()), ids))
    for name in ("curator_dask", "api", "datasketch"):
        out[name]["removed_ids"] = len(out[name]["removed_ids"])
    return out


def _truth_path(data: Path) -> Path:
    return data.parent / f"{data.name}.ground_truth.json"


def _corpus_ids(data: Path) -> set[int]:
    import pandas as pd

    return set(pd.concat(pd.read_json(p, lines=True)["id"]
                         for p in sorted(data.glob("*.jsonl"))).tolist())


def precision_recall(removed: list[int], truth: dict, ids: set[int]) -> dict:
    """Removed documents against the planted ones: each planted group (an exact group,
    near pairs joined) of the documents present keeps its lowest id; the others are
    the duplicates to remove."""
    import numpy as np

    from curator_dask.dedup.fuzzy.components import union_find_components

    edges = [(g[0], other) for g in truth["exact_groups"] for other in g[1:]]
    edges += [tuple(pair) for pair in truth["near_pairs"]]
    edges = [(a, b) for a, b in edges if a in ids and b in ids]
    planted: set[int] = set()
    if edges:
        x, y = np.array(edges, dtype=np.int64).T
        members, groups = union_find_components(x, y)
        planted = set(members[members != groups].tolist())
    found = set(removed)
    hits = len(found & planted)
    return {"precision": hits / len(found) if found else 1.0,
            "recall": hits / len(planted) if planted else 1.0,
            "planted_duplicates": len(planted)}


def row_heuristics(args, data: Path) -> dict:
    runs = [run_child(sys.executable, "heuristics", data, args.workers)
            for _ in range(args.repeat)]
    return {"curator_dask": best(runs)}


def _demo_run(work: Path, cache: Path) -> dict:
    out = work / "demo"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(HERE.parent),
                                                    env.get("PYTHONPATH", "")] if p)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "curator_dask.cli.main", "demo",
                           "--output", str(out)], capture_output=True, text=True, env=env,
                          timeout=1800, check=False)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"demo failed:\n{proc.stderr[-3000:]}")
    stages = {}
    for line in proc.stdout.splitlines():  # the stage table: name ... seconds last
        parts = line.split()
        if len(parts) > 3 and parts[0] in ("word_count", "exact_dedup", "fuzzy_dedup"):
            stages[parts[0]] = parts[-1]
    return {"wall_s": wall, "stage_seconds": stages,
            "summary": [line for line in proc.stdout.splitlines() if "documents written" in line]}


def row_demo(args, data: Path) -> dict:
    work = Path(args.data_dir) / "work"
    work.mkdir(parents=True, exist_ok=True)
    firsts, warms = [], []
    for _i in range(args.repeat):
        cache = Path(tempfile.mkdtemp(prefix="numba-cold-"))
        try:
            firsts.append(_demo_run(work, cache))  # an empty kernel cache
            warms.append(_demo_run(work, cache))   # the same cache, now filled
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    out = {"first_run": best(firsts), "warm_run": best(warms)}
    out["first_vs_warm"] = out["first_run"]["wall_s"] / out["warm_run"]["wall_s"]
    return out


ROWS = {"filters": row_filters, "exact": row_exact, "fuzzy": row_fuzzy, "demo": row_demo,
        "heuristics": row_heuristics}


def _faster(peer_s: float, ours_s: float) -> str:
    ratio = peer_s / ours_s
    return f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"


def table_rows(results: dict, corpus: dict, label: str) -> list[tuple]:
    """One line per figure of one corpus: work, curator-dask, peer, ratio, target, met."""
    rows = []
    if "fuzzy" in results:
        r = results["fuzzy"]
        ours, peer = r["curator_dask"]["wall_s"], r["datasketch"]["wall_s"]
        size = f"{corpus['small']['bytes'] / 1e6:.0f} MB"
        rows.append((f"{label}: fuzzy dedup, defaults, {size}", f"{ours:.1f} s",
                     f"datasketch {peer:.1f} s", _faster(peer, ours), "", ""))
        rate = r["mb_per_s_per_core"]
        rows.append((f"{label}: fuzzy dedup end to end, MB/s per core",
                     f"{rate:.1f} ({r['mb_per_cpu_s']:.1f} per CPU-s)", "", "",
                     ">= 20", "yes" if rate >= 20 else "no"))
        if "api" in r:
            rate = r["api_mb_per_s_per_core"]
            same = "the workflow's removals" if r["api_same_removed"] else "OTHER removals"
            rows.append((f"{label}: fuzzy, identify -> write -> remove -> write, MB/s per core",
                         f"{rate:.1f} ({r['api_mb_per_cpu_s']:.1f} per CPU-s)", same, "",
                         ">= 20", "yes" if rate >= 20 and r["api_same_removed"] else "no"))
        if "precision" in r["curator_dask"]:
            a, b = r["curator_dask"], r["datasketch"]
            rows.append((f"{label}: fuzzy precision / recall (planted)",
                         f"{a['precision']:.3f} / {a['recall']:.3f}",
                         f"datasketch {b['precision']:.3f} / {b['recall']:.3f}", "",
                         ">= datasketch's",
                         "yes" if a["precision"] >= b["precision"] - 0.005
                         and a["recall"] >= b["recall"] - 0.005 else "no"))
    if "exact" in results:
        r = results["exact"]
        peer = r["duckdb"]["wall_s"]
        for path, name in (("workflow", "workflow"),
                           ("identify_remove", "identify -> write -> remove -> write")):
            ours = r[path]["wall_s"]
            rows.append((f"{label}: exact dedup, {name}, {corpus['big']['bytes'] / 1e6:.0f} MB",
                         f"{ours:.1f} s", f"DuckDB {peer:.1f} s", _faster(peer, ours),
                         "<= 1.2x DuckDB", "yes" if ours / peer <= 1.2 else "no"))
    if "filters" in results:
        r = results["filters"]
        ours = r["curator_dask"]["wall_s"]
        if "nemo_curator_0_9" in r:
            peer = r["nemo_curator_0_9"]["wall_s"]
            rows.append((f"{label}: 3 NeMo filters", f"{ours:.1f} s",
                         f"NeMo Curator 0.9 {peer:.1f} s", _faster(peer, ours),
                         ">= 10x faster", "yes" if peer / ours >= 10 else "no"))
        else:
            rows.append((f"{label}: 3 NeMo filters", f"{ours:.1f} s", r["peer_skipped"], "",
                         "", ""))
    if "heuristics" in results:
        r = results["heuristics"]["curator_dask"]
        rate = r["docs_per_s_per_core"]
        rows.append((f"{label}: NeMo heuristic set (27 filters), docs/s per core",
                     f"{rate:.0f}", "", "", ">= 1,500", "yes" if rate >= 1500 else "no"))
    if "demo" in results:
        r = results["demo"]
        first, warm = r["first_run"]["wall_s"], r["warm_run"]["wall_s"]
        rows.append(("demo, first run (empty kernel cache) vs warm", f"{first:.1f} s",
                     f"warm {warm:.1f} s", f"{first / warm:.2f}x", "<= 1.2x",
                     "yes" if first / warm <= 1.2 else "no"))
    return rows


def diverse_slice(source: Path, size_mb: int, directory: Path) -> dict:
    """The first ``size_mb`` MB (whole lines) of the benchmark corpus at ``source``
    (``benchmarks/diverse_corpus.py``), with its ground truth; reused when present."""
    manifest = directory / "_manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("size_mb") == size_mb:
        return json.loads(manifest.read_text())
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    written = documents = 0
    with open(directory / "shard-0000.jsonl", "wb") as out:
        for shard in sorted(source.glob("shard-*.jsonl")):
            with open(shard, "rb") as f:
                for line in f:
                    if written >= size_mb * 1e6:
                        break
                    out.write(line)
                    written += len(line)
                    documents += 1
    # Beside the data, not in it: the readers take .json files as JSON lines.
    shutil.copy(source / "ground_truth.json", _truth_path(directory))
    info = {"size_mb": size_mb, "bytes": written, "documents": documents,
            "source": str(source)}
    manifest.write_text(json.dumps(info))
    return info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="filters,heuristics,exact,fuzzy,demo")
    parser.add_argument("--corpora", default="sample",
                        help="sample (the bundled sample replicated), diverse, or both")
    parser.add_argument("--diverse-dir", help="the benchmark corpus, for --corpora diverse")
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--big-mb", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(),
                                                           "curator-dask-real-text"))
    parser.add_argument("--nemo-python", help=f"a Python with nemo-curator==0.9.0 "
                                              f"(default: ${NEMO_ENV})")
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--nemo", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--datasketch-once", action="store_true",
                        help="run datasketch once, not --repeat times (it is the slow one)")
    args = parser.parse_args(argv)
    if args.child == "exact":
        result = child_exact(args.data, args.workers, args.work, args.path)
    elif args.child == "duckdb":
        result = child_duckdb(args.data, args.workers, args.work)
    elif args.child == "fuzzy":
        result = child_fuzzy(args.data, args.workers, args.work, args.path)
    elif args.child == "datasketch":
        result = child_datasketch(args.data)
    elif args.child:
        result = CHILDREN[args.child](args.data, args.workers, args.nemo)
    if args.child:
        print(json.dumps(result))
        return 0

    from corpus import build
    from table import print_table

    root = Path(args.data_dir)
    results = {"date": datetime.date.today().isoformat(),
               "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "processor": platform.processor() or platform.machine()},
               "settings": {"workers": args.workers, "threads_per_worker": 1,
                            "repeat": args.repeat},
               "load_average_before": os.getloadavg(), "corpus": {}}
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    table = []
    for kind in [k.strip() for k in args.corpora.split(",") if k.strip()]:
        if kind == "sample":
            def make(size):
                return root / f"real-{size}mb", build(root / f"real-{size}mb", size)
        elif kind == "diverse":
            if not args.diverse_dir:
                raise SystemExit("--corpora diverse needs --diverse-dir (a directory written "
                                 "by benchmarks/diverse_corpus.py)")

            def make(size):
                where = root / f"diverse-{size}mb"
                return where, diverse_slice(Path(args.diverse_dir), size, where)
        else:
            raise SystemExit(f"unknown corpus {kind!r}: sample or diverse")
        small, small_info = make(args.size_mb)
        corpus = {"small": small_info}
        big = None
        if "exact" in rows:
            big, corpus["big"] = make(args.big_mb)
        results["corpus"][kind] = corpus
        results[kind] = {}
        for row in rows:
            print(f"{kind}: row {row} ...", flush=True)
            results[kind][row] = ROWS[row](args, big if row == "exact" else small)
        table += table_rows(results[kind], corpus, kind)
    results["load_average_after"] = os.getloadavg()
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
    print_table(("work", "curator-dask", "peer, same run", "ratio", "target", "met"), table)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
