"""Beyond memory and beyond one machine: every dedup workflow and a streaming pipeline on
corpora up to several times the cluster's memory, on real scheduler and worker processes.

The corpus is the benchmark corpus of distinct real documents
(``benchmarks/diverse_corpus.py``) at several sizes, each given as ``--corpus
NAME=DIRECTORY[:SHARDS]`` (its JSONL shards, or the first ``SHARDS`` of them). Each run
starts ``dask scheduler`` and ``--workers`` ``dask worker`` processes (one thread each) on
127.0.0.1, as a cluster of machines would, connects with ``get_client(scheduler_address=)``
and runs one row with defaults everywhere (the automatic blocksize, the executor's own
window):

``exact``       ``ExactDeduplicationWorkflow``, removal on, Parquet out
``fuzzy``       ``FuzzyDeduplicationWorkflow`` (char 24-grams, 20 bands x 13), removal on
``semantic``    ``SemanticDeduplicationWorkflow`` on *precomputed embeddings*: a unit vector
                of 64 dimensions drawn from each text's md5, so identical texts embed
                identically and distinct ones far apart (it measures the workflow's
                k-means, pairwise and removal, not a model: a model on 2 CPU cores would
                take days at this size); 100 clusters, removal on
``streaming``   ``JsonlReader -> ScoreFilter(WordCountFilter) ->
                ScoreFilter(RepeatingTopNGramsFilter(n=2)) ->
                ScoreFilter(NonAlphaNumericFilter) -> ParquetWriter`` on ``StreamingExecutor``

Workers run with ``ARROW_DEFAULT_MEMORY_POOL=system`` (see ``docs/scaling.md``). Each row
runs twice: with ``--memory-limit`` per worker, and without a limit (``memory_limit=0``),
whose output is the reference: the limited run's kept ids must be the same
(``--reference RESULTS.json`` takes the unlimited runs of an earlier results file of the
same corpora instead of running them again). Reported per
run: wall seconds, MB/s per core (input bytes / wall / workers), the peak resident memory
of each worker process and of all processes together (scheduler, workers, this driver),
the workers restarted for memory, and whether the output equals the unlimited run's;
for the dedup workflows that log their phases (``fuzzy``, ``semantic``), the peak of one
worker in each phase too.

    python benchmarks/scale.py --corpus 1x=/work/corpus/scale1 \\
        --corpus 4x=/work/corpus/scale16:24 --corpus 16x=/work/corpus/scale16 \\
        --workers 2 --memory-limit 700MiB --rows exact,fuzzy,semantic,streaming

Writes every run to ``benchmarks/results/scale.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from rss import RssSampler  # noqa: E402

RESULTS = HERE / "results" / "scale.json"
ROWS = ("exact", "fuzzy", "semantic", "streaming")
EMBEDDING_DIMENSIONS = 64
MB = 1_000_000


# -- the cluster: real processes ---------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ProcessCluster:
    """``dask scheduler`` and ``workers`` ``dask worker`` processes on 127.0.0.1."""

    def __init__(self, workers: int, memory_limit: str, directory: Path):
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        bin_dir = Path(sys.executable).parent
        # Arrow's default pool (mimalloc) keeps what a task freed: a 512 MiB worker held
        # 120 MB more after semantic dedup than with the system allocator, which the
        # nanny trims, and paused for good at 80% of its limit.
        quiet = {**os.environ, "PYTHONWARNINGS": "ignore", "ARROW_DEFAULT_MEMORY_POOL": "system"}
        # The cluster's processes write to it until the cluster is stopped.
        self.log = open(directory / "cluster.log", "ab")  # noqa: SIM115
        self.scheduler = subprocess.Popen(
            [str(bin_dir / "dask"), "scheduler", "--host", "127.0.0.1", "--port",
             str(self.port), "--dashboard-address", ":0", "--no-show"],
            stdout=self.log, stderr=self.log, env=quiet)
        self.workers = [subprocess.Popen(
            [str(bin_dir / "dask"), "worker", self.address, "--nthreads", "1",
             "--memory-limit", memory_limit, "--resources", "CPU=1",
             "--local-directory", str(directory / f"worker-{i}"), "--no-dashboard",
             "--name", f"worker-{i}"],
            stdout=self.log, stderr=self.log, env=quiet) for i in range(workers)]

    def worker_pids(self) -> list[int]:
        """The worker processes (each ``dask worker`` runs a nanny and its worker)."""
        import psutil

        pids = []
        for process in self.workers:
            with contextlib.suppress(psutil.Error):
                pids.extend(c.pid for c in psutil.Process(process.pid).children(recursive=True))
        return pids

    def all_pids(self) -> list[int]:
        return [os.getpid(), self.scheduler.pid, *(p.pid for p in self.workers),
                *self.worker_pids()]

    def close(self) -> None:
        for process in [*self.workers, self.scheduler]:
            process.terminate()
        for process in [*self.workers, self.scheduler]:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.log.close()


# -- the rows ---------------------------------------------------------------------------------

def _kept_ids_digest(path: Path, column: str = "id") -> tuple[int, str]:
    """Rows and a digest of the sorted ids of a Parquet output."""
    import numpy as np
    import pyarrow.parquet as pq

    files = sorted(path.rglob("*.parquet"))
    ids = np.sort(np.concatenate([pq.read_table(f, columns=[column])[column].to_numpy()
                                  for f in files])) if files else np.array([], np.int64)
    return len(ids), hashlib.sha256(ids.astype(np.int64).tobytes()).hexdigest()[:16]


def _run_row(row: str, data: Path, work: Path, client) -> dict:
    from curator_dask import Pipeline, StreamingExecutor
    from curator_dask.dedup import (
        ExactDeduplicationWorkflow,
        FuzzyDeduplicationWorkflow,
        SemanticDedupConfig,
        SemanticDeduplicationWorkflow,
    )
    from curator_dask.stages.filters import (
        NonAlphaNumericFilter,
        RepeatingTopNGramsFilter,
        ScoreFilter,
        WordCountFilter,
    )
    from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

    out, cache = work / "out", work / "cache"
    extra: dict = {}
    if row == "exact":
        result = ExactDeduplicationWorkflow(str(data), output_path=str(out),
                                            cache_path=str(cache), perform_removal=True).run()
        extra = {"documents_in": result.input_documents}
    elif row == "fuzzy":
        result = FuzzyDeduplicationWorkflow(str(data), cache_path=str(cache),
                                            output_path=str(out), perform_removal=True).run()
        extra = {"documents_in": result.input_documents,
                 "candidate_pairs": result.candidate_pairs, "phases": result.phase_seconds,
                 # every document in a group: the distinct ids of the edges
                 "grouped_documents": result.duplicate_documents + result.duplicate_groups}
    elif row == "semantic":
        config = SemanticDedupConfig(n_clusters=100, embedding_column="embeddings")
        result = SemanticDeduplicationWorkflow(str(data), cache_path=str(cache),
                                               output_path=str(out), perform_removal=True,
                                               input_filetype="parquet", config=config).run()
        extra = {"phases": getattr(result, "phase_seconds", None)}
    elif row == "streaming":
        pipeline = (Pipeline("scale").add_stage(JsonlReader(str(data)))
                    .add_stage(ScoreFilter(WordCountFilter()))
                    .add_stage(ScoreFilter(RepeatingTopNGramsFilter(n=2)))
                    .add_stage(ScoreFilter(NonAlphaNumericFilter()))
                    .add_stage(ParquetWriter(str(out))))
        result = pipeline.run(StreamingExecutor(client=client, progress=False))
        extra = {"partitions": result.partitions}
    else:
        raise ValueError(row)
    rows, digest = _kept_ids_digest(out)
    return {"kept": rows, "digest": digest, **extra}


class PhaseMarks(logging.Handler):
    """When each phase of a workflow started, from its ``"...: computing PHASE"`` lines."""

    PATTERN = re.compile(r": computing (\w+)$")

    def __init__(self):
        super().__init__(logging.INFO)
        self.marks: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = self.PATTERN.search(record.getMessage())
        if found:
            self.marks.append((record.created, found.group(1)))

    @contextlib.contextmanager
    def listening(self, logger_name: str = "curator_dask.dedup"):
        dedup = logging.getLogger(logger_name)
        level, propagate = dedup.level, dedup.propagate
        dedup.setLevel(logging.INFO)
        dedup.propagate = False  # the driver's own log stays at WARNING
        dedup.addHandler(self)
        try:
            yield self
        finally:
            dedup.removeHandler(self)
            dedup.setLevel(level)
            dedup.propagate = propagate


def _input_bytes(data: Path) -> int:
    return sum(f.stat().st_size for f in data.iterdir() if f.suffix in (".jsonl", ".parquet"))


def child(row: str, data: str, work: str, workers: int, memory_limit: str) -> dict:
    """One row on a fresh cluster of real processes."""
    from curator_dask import get_client
    from curator_dask.faults import MEMORY_EVENT

    work_dir = Path(work)
    work_dir.mkdir(parents=True, exist_ok=True)
    cluster = ProcessCluster(workers, memory_limit, work_dir)
    try:
        client = get_client(scheduler_address=cluster.address)
        client.wait_for_workers(workers, timeout=120)
        input_bytes = _input_bytes(Path(data))
        error = None
        with RssSampler(cluster.all_pids, interval=0.2) as memory, \
                RssSampler(cluster.worker_pids, interval=0.2, timeline=True) as workers_memory, \
                PhaseMarks().listening() as phases:
            start, started_at = time.perf_counter(), time.time()
            try:
                outcome = _run_row(row, Path(data), work_dir, client)
            except Exception as err:  # a run that fails is a figure too
                outcome, error = {}, f"{type(err).__name__}: {str(err)[:600]}"
            wall = time.perf_counter() - start
        # When each restart came, in seconds from the start: the phases' seconds say where.
        restarts = [round(at - started_at, 1) for at, _ in client.get_events(MEMORY_EVENT)]
        client.close()
    finally:
        cluster.close()
    return {"row": row, "workers": workers, "memory_limit": memory_limit,
            "input_bytes": input_bytes, "wall_seconds": round(wall, 2),
            "mb_per_s_per_core": round(input_bytes / MB / wall / workers, 2),
            "peak_worker_rss_mb": round(workers_memory.largest / MB),
            "peak_worker_rss_mb_by_phase": {
                name: round(rss / MB) for name, rss in workers_memory.peaks_between(
                    [(started_at, "start"), *phases.marks]).items()},
            "peak_total_rss_mb": round(memory.peak / MB),
            "memory_restarts": len(restarts), "restarts_at_seconds": restarts,
            "error": error, **outcome,
            "load": [round(x, 1) for x in os.getloadavg()]}


# -- inputs ----------------------------------------------------------------------------------

def corpus_files(spec: str) -> tuple[str, list[Path]]:
    """``NAME=DIRECTORY[:SHARDS]`` as its name and shard files."""
    name, _, where = spec.partition("=")
    directory, _, count = where.partition(":")
    files = sorted(Path(directory).glob("shard-*.jsonl"))
    return name, files[:int(count)] if count else files


def linked_input(files: list[Path], directory: Path) -> Path:
    """A directory of links to ``files`` (an input of just those shards)."""
    directory.mkdir(parents=True, exist_ok=True)
    for f in files:
        link = directory / f.name
        if not link.exists():
            link.symlink_to(f)
    return directory


def with_embeddings(files: list[Path], directory: Path) -> Path:
    """Parquet shards of ``files`` with an ``embeddings`` column (see the module's
    documentation), written once and reused."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    from curator_dask.dedup.exact import digests

    done = directory / "_done"
    if done.exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    golden = np.uint64(0x9E3779B97F4A7C15)
    for f in files:
        table = pj.read_json(f, read_options=pj.ReadOptions(block_size=1 << 26))
        text = table.column("text").combine_chunks()
        seeds = np.frombuffer(digests(text, "md5"), dtype=np.uint64).reshape(-1, 2)
        dims = np.arange(1, EMBEDDING_DIMENSIONS + 1, dtype=np.uint64) * golden
        with np.errstate(over="ignore"):
            h = (seeds[:, :1] ^ dims[None, :]) + seeds[:, 1:]
            h ^= h >> np.uint64(31)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(29)
        vectors = (h >> np.uint64(11)).astype(np.float64) / 2.0**53 - 0.5
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        flat = pa.array(vectors.astype(np.float32).reshape(-1))
        offsets = pa.array(np.arange(0, len(vectors) * EMBEDDING_DIMENSIONS + 1,
                                     EMBEDDING_DIMENSIONS, dtype=np.int32))
        pq.write_table(table.append_column("embeddings", pa.ListArray.from_arrays(offsets, flat)),
                       directory / (f.stem + ".parquet"), row_group_size=20_000)
    done.write_text("")
    return directory


# -- the driver ------------------------------------------------------------------------------

def _write(args, runs: list[dict]) -> None:
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(), "arguments": vars(args), "runs": runs}, indent=1) + "\n")


def _reference_run(known: list[dict], corpus: str, row: str, data: Path) -> dict | None:
    """The unlimited run of ``corpus`` and ``row`` among ``known`` (an earlier results
    file's), if it read an input of the size of ``data``'s."""
    for run in known:
        if (run["corpus"], run["row"], run["memory_limit"], run["input_bytes"]) == (
                corpus, row, "0", _input_bytes(data)) and run.get("digest"):
            return run
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", default=[],
                        help="NAME=DIRECTORY[:SHARDS], smallest first; repeat")
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="700MiB", help="per worker, limited runs")
    parser.add_argument("--no-unlimited", action="store_true",
                        help="skip the unlimited reference runs")
    parser.add_argument("--reference", default=None,
                        help="an earlier results file: its unlimited runs of the same corpus "
                             "name, row and input size are the reference, and are not run again")
    parser.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    parser.add_argument("--json", default=str(RESULTS))
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.child:
        row, data, work, workers, limit = args.child
        print(json.dumps(child(row, data, work, int(workers), limit)))
        return 0
    from table import print_table

    scratch = Path(args.work or tempfile.mkdtemp(prefix="curator-scale-"))
    known = (json.loads(Path(args.reference).read_text())["runs"] if args.reference else [])
    runs = []
    for spec in args.corpus:
        name, files = corpus_files(spec)
        jsonl = linked_input(files, scratch / "inputs" / name)
        for row in args.rows.split(","):
            data = (with_embeddings(files, scratch / "inputs" / f"{name}-embedded")
                    if row == "semantic" else jsonl)
            reference = _reference_run(known, name, row, data)
            if reference is not None:
                runs.append({**reference, "reference": args.reference})
            for limit in ([args.memory_limit] if args.no_unlimited or reference else
                          [args.memory_limit, "0"]):
                work = scratch / "runs" / f"{name}-{row}-{limit}"
                shutil.rmtree(work, ignore_errors=True)
                out = subprocess.run([sys.executable, __file__, "--child", row, str(data),
                                      str(work), str(args.workers), limit],
                                     capture_output=True, text=True, check=False)
                if out.returncode:
                    print(out.stderr[-3000:], file=sys.stderr)
                    continue
                run = {"corpus": name, **json.loads(out.stdout.strip().splitlines()[-1])}
                runs.append(run)
                print(json.dumps(run), file=sys.stderr, flush=True)
                shutil.rmtree(work, ignore_errors=True)
                _write(args, runs)  # what is done survives an interrupted benchmark
    for run in runs:
        same = [r for r in runs if r["corpus"] == run["corpus"] and r["row"] == run["row"]
                and r["memory_limit"] == "0"]
        run["same_as_unlimited"] = (run["digest"] == same[0]["digest"]
                                    if same and run.get("digest") else None)
    print_table(("corpus", "row", "limit", "MB", "wall s", "MB/s/core", "peak/worker MB",
                 "peak total MB", "restarts", "kept", "same", "error"),
                [(r["corpus"], r["row"], r["memory_limit"], round(r["input_bytes"] / MB),
                  r["wall_seconds"], r["mb_per_s_per_core"], r["peak_worker_rss_mb"],
                  r["peak_total_rss_mb"], r["memory_restarts"], r.get("kept", ""),
                  r["same_as_unlimited"], (r["error"] or "")[:40]) for r in runs])
    _write(args, runs)
    if args.work is None:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
