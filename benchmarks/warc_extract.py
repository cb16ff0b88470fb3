"""WARC to text: curator-dask's read_warc + HtmlExtractor beside datatrove's WarcReader +
Trafilatura, on the same generated WARC files, in one run; and fastwarc beside warcio.

Generates ``--pages`` web-like pages (``curator_dask.testing.web``) into ``--files``
gzip WARC files, one member per record as Common Crawl ships them, then:

1. parses them with fastwarc and with warcio in this process (HTML responses, headers
   and payload), records per second: the measurement behind the choice of fastwarc;
2. reads and extracts them with Trafilatura at datatrove's settings
   (``favor_precision=True, include_comments=False, deduplicate=True``):
   curator-dask on a LocalCluster of ``--workers`` processes (with the per-page timeout,
   and without it), and datatrove's ``LocalPipelineExecutor`` with ``--workers``
   processes (its extractor always runs in a sandbox process with a timeout), and a
   plain loop in one process (fastwarc, decode, ``trafilatura.extract``): the floor.

Each pipeline runs ``--rounds`` times, interleaved, and keeps its best round.
curator-dask's workers are warmed up on one file first (imports, extraction children),
as in a long run; datatrove starts its process pool and sandboxes afresh for each run,
as it does for each job.

Per-core figures are documents per CPU-second of every process that did the work
(workers, their extraction children, datatrove's pool), so they do not depend on what
else the machine runs.

    python benchmarks/warc_extract.py --pages 4000 --files 8 --workers 2 --rounds 2
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import tempfile
import threading
import time
from pathlib import Path

import psutil
from table import print_table

TRAFILATURA = {"favor_precision": True, "include_comments": False, "deduplicate": True}


def generate(directory: Path, pages: int, files: int, seed: int = 0) -> list[Path]:
    from curator_dask.testing.web import synthetic_pages, write_warc

    directory.mkdir(parents=True, exist_ok=True)
    all_pages = synthetic_pages(pages, seed=seed, empty_every=25, non_html_every=20,
                                latin1_every=10)
    out = []
    for k in range(files):
        path = directory / f"bench-{k:03d}.warc.gz"
        write_warc(path, all_pages[k::files])
        out.append(path)
    return out


class TreeCpu:
    """CPU seconds spent by this process and its descendants inside a ``with`` block.

    Descendants are sampled every ``interval`` seconds (pool workers and extraction
    children come and go, and not every pool reaps its children, so the kernel's
    children totals miss some); a process that ends loses at most one interval.
    """

    def __init__(self, interval: float = 0.1):
        self.interval, self.seconds = interval, 0.0
        self._stop = threading.Event()
        self._last: dict[int, float] = {}
        self._base: dict[int, float] = {}

    def _sample(self, into: dict[int, float]) -> None:
        for proc in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                into[proc.pid] = sum(proc.cpu_times()[:2])

    def _run(self):
        while not self._stop.wait(self.interval):
            self._sample(self._last)

    def __enter__(self):
        self._sample(self._base)
        self._own = sum(psutil.Process().cpu_times()[:2])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._sample(self._last)
        self._stop.set()
        self._thread.join()
        own = sum(psutil.Process().cpu_times()[:2]) - self._own
        self.seconds = own + sum(v - self._base.get(pid, 0.0) for pid, v in self._last.items())


def parse_fastwarc(path: Path) -> int:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    n = 0
    with open(path, "rb") as handle:
        for record in ArchiveIterator(handle, record_types=WarcRecordType.response,
                                      auto_decode="all"):
            if record.http_content_type != "text/html":
                continue
            _ = (record.headers.get("WARC-Target-URI"), record.headers.get("WARC-Date"),
                 record.record_id, record.http_charset, record.reader.read())
            n += 1
    return n


def parse_warcio(path: Path) -> int:
    from warcio.archiveiterator import ArchiveIterator

    n = 0
    with open(path, "rb") as handle:
        for record in ArchiveIterator(handle):
            if record.rec_type != "response":
                continue
            if not (record.http_headers.get_header("Content-Type") or "").startswith("text/html"):
                continue
            headers = record.rec_headers
            _ = (headers.get_header("WARC-Target-URI"), headers.get_header("WARC-Date"),
                 headers.get_header("WARC-Record-ID"), record.content_stream().read())
            n += 1
    return n


def parsers(files: list[Path]) -> list[dict]:
    """Both parsers on the gzip files and on plain copies, best of three each."""
    plain = []
    for f in files:
        copy = f.with_suffix("")  # bench-000.warc
        copy.write_bytes(gzip.decompress(f.read_bytes()))
        plain.append(copy)
    rows = []
    for kind, paths in (("warc.gz", files), ("plain warc", plain)):
        timed = {}
        for name, fn in (("fastwarc", parse_fastwarc), ("warcio", parse_warcio)):
            best = None
            for _ in range(3):
                start = time.perf_counter()
                n = sum(fn(f) for f in paths)
                seconds = time.perf_counter() - start
                best = seconds if best is None else min(best, seconds)
            timed[name] = (n, best)
        for name, (n, best) in timed.items():
            rows.append({"parser": name, "files": kind, "records": n,
                         "seconds": round(best, 3), "records/s": round(n / best),
                         "fastwarc speed-up": round(best / timed["fastwarc"][1], 2)})
    for path in plain:
        path.unlink()
    return rows


def run_ours(files: list[Path], warmup: list[Path], workers: int,
             timeout: float | None) -> tuple[int, float, float]:
    from distributed import Client, LocalCluster

    from curator_dask import DocumentDataset
    from curator_dask.stages.extract import HtmlExtractor

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster, Client(cluster):
        stage = HtmlExtractor("trafilatura", timeout=timeout, options=TRAFILATURA)

        def count(paths):
            ds = DocumentDataset.read_warc([str(f) for f in paths], blocksize="4MiB")
            return int(stage(ds).df.map_partitions(len).compute().sum())

        # Warm up on other pages (Trafilatura's deduplicate would drop pages it has
        # seen): the workers import the extractor and, with a timeout, start their
        # child processes, as they do once in a long run.
        count(warmup)
        with TreeCpu() as cpu:
            start = time.perf_counter()
            docs = count(files)
            wall = time.perf_counter() - start
    return docs, wall, cpu.seconds


def run_datatrove(files: list[Path], workers: int, logs: Path) -> tuple[int, float, float]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.readers import WarcReader

    # A fresh directory each run: datatrove skips tasks its logging directory marks done.
    logs = Path(tempfile.mkdtemp(dir=logs))
    counts = logs / "counts"
    counts.mkdir(parents=True, exist_ok=True)

    def count(data, rank: int = 0, world_size: int = 1):
        n = 0
        for _ in data:
            n += 1
        (counts / f"{rank}.txt").write_text(str(n))
        return
        yield

    executor = LocalPipelineExecutor(
        pipeline=[WarcReader(str(files[0].parent), glob_pattern="*.warc.gz"),
                  Trafilatura(favour_precision=True, timeout=5.0, deduplicate=True), count],
        tasks=len(files), workers=workers, logging_dir=str(logs / "logs"))
    with TreeCpu() as cpu:
        start = time.perf_counter()
        executor.run()
        wall = time.perf_counter() - start
    return sum(int(p.read_text()) for p in counts.glob("*.txt")), wall, cpu.seconds


def run_loop(files: list[Path]) -> tuple[int, float, float]:
    """The floor: parse with fastwarc and extract in one process, nothing else."""
    import trafilatura
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    from curator_dask.stages.extract.charset import decode_html

    docs = 0
    with TreeCpu() as cpu:
        start = time.perf_counter()
        for path in files:
            with open(path, "rb") as handle:
                for record in ArchiveIterator(handle, record_types=WarcRecordType.response,
                                              auto_decode="all"):
                    if record.http_content_type != "text/html":
                        continue
                    html, _ = decode_html(record.reader.read(), record.http_charset)
                    text = trafilatura.extract(html, **TRAFILATURA)
                    docs += bool(text and text.strip())
        wall = time.perf_counter() - start
    return docs, wall, cpu.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=4000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default="benchmarks/results/warc_extract.json")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="warc-extract-"))
    files = generate(tmp / "warc", args.pages, args.files)
    warmup = generate(tmp / "warmup", 20 * args.workers, args.workers, seed=99)
    mb = sum(f.stat().st_size for f in files) / 1e6

    parse_rows = parsers(files)
    print(f"{args.pages} pages in {args.files} gzip WARC files ({mb:.1f} MB)")
    print_table(list(parse_rows[0]), [list(r.values()) for r in parse_rows])

    configs = {
        "curator-dask read_warc + HtmlExtractor (timeout 5 s)":
            lambda: run_ours(files, warmup, args.workers, 5.0),
        "curator-dask read_warc + HtmlExtractor (no timeout)":
            lambda: run_ours(files, warmup, args.workers, None),
        "datatrove WarcReader + Trafilatura (timeout 5 s)":
            lambda: run_datatrove(files, args.workers, tmp),
        "fastwarc + trafilatura.extract, plain loop, 1 process":
            lambda: run_loop(files),
    }
    # Rounds interleave the pipelines, and each keeps its best round: on a shared
    # machine, the least disturbed run is the closest to what the code costs.
    runs: dict[str, tuple[int, float, float]] = {}
    for _ in range(args.rounds):
        for name, run in configs.items():
            docs, wall, cpu = run()
            if name not in runs or docs / cpu > runs[name][0] / runs[name][2]:
                runs[name] = (docs, wall, cpu)
    peer = runs["datatrove WarcReader + Trafilatura (timeout 5 s)"]
    rows = []
    for name, (docs, wall, cpu) in runs.items():
        rows.append({"pipeline": name, "docs out": docs, "wall s": round(wall, 1),
                     "docs/s": round(docs / wall, 1), "docs per CPU-second": round(docs / cpu, 1),
                     "per-core vs datatrove": round((docs / cpu) / (peer[0] / peer[2]), 2)})
    print()
    print_table(list(rows[0]), [list(r.values()) for r in rows])
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(
        {"pages": args.pages, "files": args.files, "MB": round(mb, 1),
         "workers": args.workers, "parsers": parse_rows, "extract": rows}, indent=2))


if __name__ == "__main__":
    main()
