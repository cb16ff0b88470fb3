"""The data-safety catalog as scenarios: nothing lost, nothing duplicated, nothing destroyed.

Each case builds its input in a fresh temporary directory, runs one scenario (bad input,
an output that overlaps the input, repeated ids in dedup, a killed worker or driver, a
scaled-down or recycled cluster, ...) and reports what happened:

- ``ok``: the run finished, and every input document is in the output exactly once or in
  a drop count;
- ``refused``: the run stopped before anything was lost, with an error that names what is
  wrong (both paths, the stage and the resource, the repeated ids, ...);
- ``error-with-file-and-line``: bad input stopped the run with an error that names the
  file, where in it (the line, or the column for a whole file) and the fix;
- ``counted-skip``: bad input was skipped where the user asked for it, and counted;
- ``FAIL``: anything else; ``detail`` says what.

Beside the outcome: documents lost (input documents that are neither in the output, nor
in a drop count, nor left in the input), documents duplicated (written more than once),
bytes of input files changed, removed or added, and for bad input the seconds from the
start of the run to the error.

Most cases run on one local cluster of 3 worker processes (1 thread each); a case that
kills a worker adds one more (``dask worker`` without a nanny) and kills that one.
Cases that need a cluster of their own
(adapt, worker lifetimes) or a driver to kill run in a child process of this script, so
a stalled run is stopped at a deadline and reported rather than hanging the catalog.

Add a case by writing a function of a :class:`Context` that returns an
:class:`Outcome`, decorated with ``@case``. Results go to benchmarks/results/faults.json.

Usage::

    python benchmarks/faults.py                 # every case, a few minutes
    python benchmarks/faults.py --list
    python benchmarks/faults.py malformed_json_error worker_sigkill_streaming
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import glob
import gzip
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
from table import print_table

from curator_dask import DocumentDataset, Resources, processing_stage
from curator_dask.cluster import get_client
from curator_dask.dropped import record_dropped
from curator_dask.executors import BatchExecutor, StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.base import ProcessingStage
from curator_dask.stages.io_stages import JsonlReader, JsonlWriter, ParquetReader, ParquetWriter

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results" / "faults.json"
WORKERS = 3
OUTCOMES = ("ok", "refused", "error-with-file-and-line", "counted-skip", "FAIL")
BAD_LINE = "reader.bad_json_line"

logger = logging.getLogger("faults")


# -- what a case returns, and the registry ---------------------------------------------

@dataclass
class Outcome:
    """What one case found: one of ``OUTCOMES``, the documents lost and duplicated, a
    short ``detail``, and for an error the seconds from the start of the run to it."""

    outcome: str
    lost: int = 0
    duplicated: int = 0
    detail: str = ""
    seconds_to_error: float | None = None

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")


@dataclass
class Case:
    """A registered case: its function, and the first paragraph of its docstring."""

    name: str
    theme: str
    doc: str
    run: Callable


CASES: list[Case] = []


def case(theme: str):
    """Register a case: a function of a :class:`Context` returning an :class:`Outcome`."""
    def register(fn):
        summary = " ".join((fn.__doc__ or "").split("\n\n")[0].split())
        CASES.append(Case(fn.__name__, theme, summary, fn))
        return fn
    return register


# -- inputs ------------------------------------------------------------------------------

def document(i: int) -> dict:
    return {"id": i, "text": f"document {i} " + "word " * (i % 7)}


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")


def snapshot_bytes(root: Path) -> dict[str, tuple[str, int]]:
    """(sha256, size) of every file under ``root``, by relative path."""
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(),
                                             p.stat().st_size)
            for p in sorted(root.rglob("*")) if p.is_file()}


def bytes_changed(before: Mapping, after: Mapping) -> int:
    """Bytes of files changed (the larger size), removed or added."""
    total = 0
    for name in before.keys() | after.keys():
        old, new = before.get(name), after.get(name)
        if old != new:
            total += max(old[1] if old else 0, new[1] if new else 0)
    return total


@dataclass
class Corpus:
    path: Path
    ids: list[int]
    files: list[Path]
    snapshot: dict = field(default_factory=dict)

    def resnapshot(self) -> None:
        """Take the files as they are now as the input (after breaking one on purpose)."""
        self.snapshot = snapshot_bytes(self.path)

    def replace_line(self, file: int, line: int, text: bytes) -> None:
        lines = self.files[file].read_bytes().split(b"\n")
        lines[line - 1] = text
        self.files[file].write_bytes(b"\n".join(lines))
        self.resnapshot()


@dataclass
class Context:
    """What a case gets: an empty directory, the shared cluster's client and address."""

    root: Path
    client: object
    address: str
    inputs: list[Corpus] = field(default_factory=list)

    def corpus(self, name: str = "in", n_docs: int = 300, n_files: int = 3,
               fmt: str = "jsonl") -> Corpus:
        """``n_docs`` documents with unique ids ``0..n_docs-1`` in ``n_files`` files."""
        directory = self.root / name
        directory.mkdir(parents=True)
        ids = list(range(n_docs))
        per_file = -(-n_docs // n_files)
        files = []
        for k in range(n_files):
            rows = [document(i) for i in ids[k * per_file:(k + 1) * per_file]]
            path = directory / f"f{k:02d}.{fmt}"
            if fmt == "jsonl":
                write_jsonl(path, rows)
            else:
                pd.DataFrame(rows, columns=["id", "text"]).to_parquet(path, index=False)
            files.append(path)
        corpus = Corpus(directory, ids, files)
        corpus.resnapshot()
        self.inputs.append(corpus)
        return corpus

    def input_bytes_changed(self) -> int:
        return sum(bytes_changed(c.snapshot, snapshot_bytes(c.path)) for c in self.inputs)


# -- reading outputs and counting --------------------------------------------------------

def read_rows(path: Path) -> pd.DataFrame:
    """Every visible data file under ``path`` (Parquet or JSONL, compressed or not)."""
    if not path.exists():
        return pd.DataFrame()
    frames = []
    for p in sorted(path.rglob("*")):
        if not p.is_file() or any(s.startswith(".") for s in p.relative_to(path).parts):
            continue
        if p.suffix in (".parquet", ".pq"):
            frames.append(pd.read_parquet(p))
        elif ".jsonl" in p.name and p.stat().st_size:
            try:
                frames.append(pd.read_json(p, lines=True, dtype=False))
            except ValueError:  # a part broken by the scenario itself: no rows of it
                continue
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def ids_of(path: Path, id_field: str = "id") -> list:
    rows = read_rows(path)
    return rows[id_field].tolist() if id_field in rows.columns else []


def tally(input_ids: Iterable, output_ids: Iterable, dropped: Mapping | None = None,
          left_in_input: Iterable = ()) -> tuple[int, int, str]:
    """(lost, duplicated, detail): lost are input ids neither written, nor counted as
    dropped, nor still in the input; duplicated are extra copies of written ids."""
    input_ids = set(input_ids)
    written = Counter(output_ids)
    duplicated = sum(c - 1 for c in written.values() if c > 1)
    strangers = set(written) - input_ids
    missing = input_ids - set(written) - set(left_in_input)
    counted = sum((dropped or {}).values())
    lost = max(len(missing) - counted, 0)
    detail = []
    if strangers:
        detail.append(f"{len(strangers)} ids not in the input")
    if counted > len(missing):
        detail.append(f"drop counts say {counted}, {len(missing)} missing")
    return lost, duplicated, "; ".join(detail)


def exactly_once(input_ids, output_ids, dropped=None, ok: str = "ok",
                 detail: str = "") -> Outcome:
    lost, duplicated, problems = tally(input_ids, output_ids, dropped)
    good = not lost and not duplicated and not problems
    return Outcome(ok if good else "FAIL", lost, duplicated,
                   "; ".join(d for d in (detail, problems) if d))


def short(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}".replace("\n", " ")


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def expect_error(run: Callable, *, names: Iterable[str], outcome: str, where: str = "",
                 fix: str = "") -> Outcome:
    """Run ``run()``; ``outcome`` if it raises an error whose message holds every string
    of ``names``, ``where`` (any of ``|``-separated alternatives) and ``fix``."""
    started = time.perf_counter()
    try:
        run()
    except Exception as err:  # any error is judged by its message
        seconds = round(time.perf_counter() - started, 2)
        message = str(err)
        missing = [n for n in names if n not in message]
        if where and not any(w in message for w in where.split("|")):
            missing.append(where)
        if fix and fix not in message:
            missing.append(f"fix ({fix})")
        if missing:
            return Outcome("FAIL", detail=f"{short(err)} (does not name {missing})",
                           seconds_to_error=seconds)
        return Outcome(outcome, detail=short(err), seconds_to_error=seconds)
    return Outcome("FAIL", detail="no error", seconds_to_error=None)


def upper(df):
    return df.assign(text=df["text"].str.upper())


@processing_stage(name="slow_upper")
def slow_upper(df):
    time.sleep(0.15)
    return upper(df)


def pipeline(reader, *stages, writer) -> Pipeline:
    p = Pipeline("faults").add_stage(reader)
    for stage in stages:
        p.add_stage(stage)
    return p.add_stage(writer)


def completed_parts(out: Path) -> int:
    return sum(1 for n in os.listdir(out) if n.endswith(".done")) if out.is_dir() else 0


def wait_until(condition, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.time() + timeout
    while not condition() and time.time() < deadline:
        time.sleep(interval)
    return condition()


# -- child processes: a driver to kill, clusters of their own ---------------------------

CHILDREN: dict[str, Callable] = {}


def child(fn):
    """A scenario that runs in a child process (``faults.py --child NAME ARGS``)."""
    CHILDREN[fn.__name__] = fn
    return fn


def spawn_child(name: str, **kwargs) -> subprocess.Popen:
    """Start ``name`` in a child process; its output goes to ``<report>.log``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    with open(f"{kwargs['report']}.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, __file__, "--child", name, json.dumps(kwargs)], env=env,
            stdout=log, stderr=log,
            start_new_session=True)  # its own process group: its cluster dies with it


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_child(name: str, timeout: float, **kwargs) -> dict | None:
    """The child's report (what it wrote to ``report``), or None if it ran past
    ``timeout`` seconds (then it is killed, with its cluster)."""
    report = Path(kwargs["report"])
    proc = spawn_child(name, **kwargs)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(proc)
        return None
    finally:
        # Workers of a child's LocalCluster are in its process group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    if not report.exists():
        log = Path(f"{report}.log").read_text(errors="replace").strip().splitlines()
        return {"error": f"the child exited with {proc.returncode}: {log[-1] if log else ''}"}
    return json.loads(report.read_text())


def _report(path: str, **values) -> None:
    Path(path).write_text(json.dumps(values))


def _run_summary(result) -> dict:
    return {"rows": result.rows, "dropped": result.dropped, "partitions": result.partitions,
            "skipped": result.partitions_skipped}


@child
def streaming_run(address: str, source: str, out: str, resume: bool, report: str) -> None:
    """A driver: read, slow_upper, write Parquet, on the cluster at ``address``."""
    get_client(scheduler_address=address)
    result = pipeline(JsonlReader(source, blocksize="1KiB"), slow_upper,
                      writer=ParquetWriter(out)).run(
        StreamingExecutor(max_in_flight=3, resume=resume, progress=False))
    _report(report, **_run_summary(result))


@child
def adaptive_run(source: str, out: str, report: str) -> None:
    """Adapt retires two of three workers mid-run (its maximum lowered to one)."""
    fast = {"interval": "500ms", "wait_count": 1}
    client = get_client(n_workers=3, adaptive={"minimum": 1, "maximum": 3, **fast},
                        dashboard_address=None, silence_logs=logging.CRITICAL)
    client.wait_for_workers(3)
    lowered = []

    def lower():
        wait_until(lambda: completed_parts(Path(out)) >= 4, timeout=120)
        lowered.append(time.time())
        client.cluster.adapt(minimum=1, maximum=1, **fast)

    thread = threading.Thread(target=lower, daemon=True)
    thread.start()
    result = pipeline(JsonlReader(source, blocksize="1KiB"), slow_upper,
                      writer=ParquetWriter(out)).run(StreamingExecutor(progress=False))
    ended = time.time()
    retired = any(r["status"] == "down" for _, r in client.cluster._adaptive.log)
    _report(report, **_run_summary(result),
            retired_mid_run=bool(lowered and lowered[0] < ended and retired))


@child
def lifetime_run(source: str, out: str, lifetime: str, stagger: str | None,
                 report: str) -> None:
    """Two workers recycled by ``worker_lifetime`` during a streaming run."""
    @processing_stage(name="slower_upper")
    def slower_upper(df):
        time.sleep(0.5)
        return upper(df)

    client = get_client(n_workers=2, worker_lifetime=lifetime, worker_lifetime_stagger=stagger,
                        dashboard_address=None, silence_logs=logging.CRITICAL)
    first = set(client.scheduler_info(n_workers=-1)["workers"])
    try:
        result = pipeline(JsonlReader(source, blocksize="1KiB"), slower_upper,
                          writer=ParquetWriter(out)).run(StreamingExecutor(progress=False))
    except Exception as err:  # reported to the parent
        _report(report, error=short(err))
        return
    # Recycled: an original worker handed its data over and left during the run (its
    # replacement may not have started in time to run tasks on a busy machine).
    now = set(client.scheduler_info(n_workers=-1)["workers"])
    _report(report, **_run_summary(result), recycled=bool(first - now))


# == the cases ===========================================================================
# Bad input ---------------------------------------------------------------------------

def _read_and_write(corpus: Corpus, out: Path, blocksize: str | None = "1KiB",
                    **reader_options):
    return pipeline(JsonlReader(str(corpus.path), blocksize=blocksize, **reader_options),
                    writer=ParquetWriter(str(out))).run(StreamingExecutor(progress=False))


@case("bad input")
def malformed_json_error(ctx: Context) -> Outcome:
    """A line that is not JSON: an error naming the file, the line and on_bad_lines."""
    corpus = ctx.corpus()
    corpus.replace_line(1, 3, b'{"id": 102, "text": broken}')
    return expect_error(lambda: _read_and_write(corpus, ctx.root / "out"),
                        names=["f01.jsonl"], where="line 3", fix="on_bad_lines",
                        outcome="error-with-file-and-line")


@case("bad input")
def malformed_json_skip(ctx: Context) -> Outcome:
    """Two lines that are not JSON, read with on_bad_lines='skip': skipped and counted."""
    corpus = ctx.corpus()
    corpus.replace_line(0, 2, b"[1, 2]")
    corpus.replace_line(2, 4, b"not json")
    result = _read_and_write(corpus, ctx.root / "out", on_bad_lines="skip")
    outcome = exactly_once(corpus.ids, ids_of(ctx.root / "out"), result.dropped,
                           ok="counted-skip", detail=f"dropped {result.dropped}")
    if result.dropped != {BAD_LINE: 2}:
        outcome.outcome = "FAIL"
    return outcome


@case("bad input")
def bad_utf8_error(ctx: Context) -> Outcome:
    """A Latin-1 byte: an error naming the file, the line and encoding_errors."""
    corpus = ctx.corpus()
    corpus.replace_line(0, 6, b'{"id": 5, "text": "caf\xe9"}')
    return expect_error(lambda: _read_and_write(corpus, ctx.root / "out"),
                        names=["f00.jsonl"], where="line 6", fix="encoding_errors",
                        outcome="error-with-file-and-line")


@case("bad input")
def bad_utf8_replace(ctx: Context) -> Outcome:
    """A Latin-1 byte read with encoding_errors='replace': the document is kept."""
    corpus = ctx.corpus()
    corpus.replace_line(0, 6, b'{"id": 5, "text": "caf\xe9"}')
    result = _read_and_write(corpus, ctx.root / "out", encoding_errors="replace")
    rows = read_rows(ctx.root / "out")
    outcome = exactly_once(corpus.ids, rows["id"], result.dropped)
    if rows.set_index("id").loc[5, "text"] != "caf\ufffd":
        outcome.outcome, outcome.detail = "FAIL", "the bad byte was not replaced"
    return outcome


@case("bad input")
def missing_text_column(ctx: Context) -> Outcome:
    """A file without the text column: an error naming the column, the file and text_field."""
    corpus = ctx.corpus()
    write_jsonl(corpus.path / "f03.jsonl", [{"id": 300, "content": "x"}])
    corpus.resnapshot()
    return expect_error(lambda: _read_and_write(corpus, ctx.root / "out"),
                        names=["f03.jsonl"], where="'text'", fix="text_field=",
                        outcome="error-with-file-and-line")


@case("bad input")
def empty_file(ctx: Context) -> Outcome:
    """An empty file beside others: an empty partition, nothing lost."""
    corpus = ctx.corpus()
    (corpus.path / "f03.jsonl").write_bytes(b"")
    corpus.resnapshot()
    result = _read_and_write(corpus, ctx.root / "out")
    return exactly_once(corpus.ids, ids_of(ctx.root / "out"), result.dropped)


@case("bad input")
def no_input_files(ctx: Context) -> Outcome:
    """A directory with no JSONL files: an error naming the directory and the extensions."""
    directory = ctx.root / "in"
    directory.mkdir()
    (directory / "notes.csv").write_text("x")

    def run():
        pipeline(JsonlReader(str(directory)), writer=ParquetWriter(str(ctx.root / "out"))).run(
            StreamingExecutor(progress=False))

    return expect_error(run, names=[str(directory)], where=".jsonl",
                        outcome="error-with-file-and-line")


@case("bad input")
def first_line_50mb(ctx: Context) -> Outcome:
    """A file whose first document is 50 MB: every column is read, none silently dropped."""
    corpus = ctx.corpus(n_docs=100, n_files=1)
    lines = corpus.files[0].read_bytes().split(b"\n")
    lines[0] = json.dumps({"id": 0, "text": "x" * 50_000_000}).encode()
    corpus.files[0].write_bytes(b"\n".join(lines))
    corpus.resnapshot()
    result = _read_and_write(corpus, ctx.root / "out", blocksize=None)
    rows = read_rows(ctx.root / "out")
    if "id" not in rows.columns:
        return Outcome("FAIL", lost=len(corpus.ids),
                       detail=f"the id column was not read (columns: {list(rows.columns)})")
    return exactly_once(corpus.ids, rows["id"], result.dropped)


def _type_change(ctx: Context) -> Corpus:
    """``meta`` is a string, except on line 5 of f01.jsonl, where it is a number."""
    corpus = ctx.corpus(n_docs=60)
    for k, f in enumerate(corpus.files):
        rows = [dict(json.loads(line), meta="m") for line in f.read_text().splitlines()]
        if k == 1:
            rows[4]["meta"] = 5
        write_jsonl(f, rows)
    corpus.resnapshot()
    return corpus


@case("bad input")
def type_change_error(ctx: Context) -> Outcome:
    """A column that turns from string to number on line 5: an error naming file and line."""
    corpus = _type_change(ctx)
    return expect_error(lambda: _read_and_write(corpus, ctx.root / "out"),
                        names=["f01.jsonl", "meta"], where="line 5",
                        outcome="error-with-file-and-line")


@case("bad input")
def type_change_skip(ctx: Context) -> Outcome:
    """The same with on_bad_lines='skip': that one line skipped and counted."""
    corpus = _type_change(ctx)
    try:
        result = _read_and_write(corpus, ctx.root / "out", on_bad_lines="skip")
    except Exception as err:
        return Outcome("FAIL", detail=short(err))
    outcome = exactly_once(corpus.ids, ids_of(ctx.root / "out"), result.dropped,
                           ok="counted-skip", detail=f"dropped {result.dropped}")
    if sum(result.dropped.values()) != 1:
        outcome.outcome = "FAIL"
    return outcome


def _truncated_gzip(ctx: Context) -> tuple[Corpus, list[int]]:
    """f01 gzipped and cut at 60% of its bytes; returns the ids of the lines before the
    break (whole lines that still decompress)."""
    corpus = ctx.corpus()
    raw = corpus.files[1].read_bytes()
    packed = gzip.compress(raw)[: int(len(gzip.compress(raw)) * 0.6)]
    corpus.files[1].unlink()
    corpus.files[1] = corpus.path / "f01.jsonl.gz"
    corpus.files[1].write_bytes(packed)
    corpus.resnapshot()
    readable = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(packed)
    whole = readable[: readable.rfind(b"\n") + 1].decode().splitlines()
    broken = {json.loads(line)["id"] for line in raw.decode().splitlines()} - {
        json.loads(line)["id"] for line in whole}
    return corpus, sorted(set(corpus.ids) - broken)


@case("bad input")
def truncated_gzip_error(ctx: Context) -> Outcome:
    """A gzip file cut short: an error naming the file and where it breaks."""
    corpus, _ = _truncated_gzip(ctx)
    return expect_error(lambda: _read_and_write(corpus, ctx.root / "out"),
                        names=["f01.jsonl.gz"], where="line|byte|offset",
                        outcome="error-with-file-and-line")


@case("bad input")
def truncated_gzip_skip(ctx: Context) -> Outcome:
    """The same with on_bad_lines='skip': the lines before the break kept, the rest counted."""
    corpus, readable = _truncated_gzip(ctx)
    try:
        result = _read_and_write(corpus, ctx.root / "out", on_bad_lines="skip")
    except Exception as err:
        return Outcome("FAIL", detail=short(err))
    written = ids_of(ctx.root / "out")
    lost, duplicated, problems = tally(readable, written)
    good = not (lost or duplicated or problems) and sum(result.dropped.values()) > 0
    return Outcome("counted-skip" if good else "FAIL", lost, duplicated,
                   f"dropped {result.dropped}" + (f"; {problems}" if problems else ""))


@case("bad input")
def numeric_text_column(ctx: Context) -> Outcome:
    """A file whose text column holds numbers: an error naming the file and the column."""
    corpus = ctx.corpus(n_docs=60)
    write_jsonl(corpus.files[1], [{"id": i, "text": i * 7} for i in range(20, 40)])
    corpus.resnapshot()
    outcome = expect_error(lambda: _read_and_write(corpus, ctx.root / "out"),
                           names=["f01.jsonl", "text"], outcome="error-with-file-and-line")
    if outcome.detail == "no error":
        outcome.detail = "the numbers were cast to strings without a word"
    return outcome


@case("bad input")
def empty_parquet_file(ctx: Context) -> Outcome:
    """A 0-byte .parquet file beside good ones: an error naming the file."""
    corpus = ctx.corpus(n_docs=30, fmt="parquet")
    (corpus.path / "f03.parquet").write_bytes(b"")
    corpus.resnapshot()

    def run():
        pipeline(ParquetReader(str(corpus.path)), writer=ParquetWriter(str(ctx.root / "out"))
                 ).run(StreamingExecutor(progress=False))

    return expect_error(run, names=["f03.parquet"], outcome="error-with-file-and-line")


@case("bad input")
def surrogate_escape_error(ctx: Context) -> Outcome:
    """A "\\ud800" escape in the first lines: an error naming the file and line."""
    corpus = ctx.corpus()
    corpus.replace_line(0, 2, b'{"id": 1, "text": "\\ud800"}')
    return expect_error(lambda: _read_and_write(corpus, ctx.root / "out"),
                        names=["f00.jsonl"], where="line 2", outcome="error-with-file-and-line")


@case("bad input")
def list_type_change_skip(ctx: Context) -> Outcome:
    """A list whose items change type ([1] then [1, {"k": 2}]) in the first lines, read
    with on_bad_lines='skip': the line is skipped and counted."""
    corpus = ctx.corpus()
    corpus.replace_line(0, 1, b'{"id": 0, "text": "a", "l": [1]}')
    corpus.replace_line(0, 2, b'{"id": 1, "text": "b", "l": [1, {"k": 2}]}')
    result = _read_and_write(corpus, ctx.root / "out", on_bad_lines="skip")
    return exactly_once(corpus.ids, ids_of(ctx.root / "out"), result.dropped,
                        ok="counted-skip", detail=f"dropped {result.dropped}")


@case("bad input")
def blocksize_infinite_in_pipeline_file(ctx: Context) -> Outcome:
    """blocksize: 1e400 in a pipeline file: exit 2 at --dry-run naming file, line and
    parameter."""
    corpus = ctx.corpus(n_docs=3, n_files=1)
    config = ctx.root / "p.yaml"
    config.write_text(f"reader:\n  type: jsonl\n  path: {corpus.path}\n  blocksize: 1e400\n"
                      "stages: []\n")
    started = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).parent / "curator-dask"), "run",
                           str(config), "--dry-run"], capture_output=True, text=True,
                          check=False)
    seconds = round(time.perf_counter() - started, 2)
    named = all(w in done.stderr for w in ("p.yaml, line 4", "blocksize"))
    return Outcome("refused" if done.returncode == 2 and named else "FAIL",
                   detail=done.stderr.strip()[-200:], seconds_to_error=seconds)


@case("values")
def integers_with_a_null_round_trip(ctx: Context) -> Outcome:
    """Integers and a null (2**53 + 1, null, 5) through JSONL in and out: every digit,
    and 5 stays 5."""
    rows = [{"id": 0, "text": "a", "n": 2**53 + 1}, {"id": 1, "text": "b", "n": None},
            {"id": 2, "text": "c", "n": 5}]
    source = ctx.root / "in"
    write_jsonl(source / "a.jsonl", rows)
    corpus = Corpus(source, [0, 1, 2], [source / "a.jsonl"])
    corpus.resnapshot()
    ctx.inputs.append(corpus)
    pipeline(JsonlReader(str(source)), writer=JsonlWriter(str(ctx.root / "out"))).run(
        StreamingExecutor(progress=False))
    written = [json.loads(line) for p in sorted((ctx.root / "out").glob("part-*"))
               for line in p.read_text().splitlines()]
    outcome = exactly_once(corpus.ids, [r["id"] for r in written])
    if sorted(written, key=lambda r: r["id"]) != rows:
        return Outcome("FAIL", detail=f"values changed: {written}")
    return outcome


@case("values")
def literal_path_with_brackets(ctx: Context) -> Outcome:
    """JsonlReader("in/part[1].jsonl") beside in/part1.jsonl: the bracketed file is read."""
    corpus = ctx.corpus(n_docs=10, n_files=1)
    bracketed = corpus.path / "part[1].jsonl"
    corpus.files[0].rename(bracketed)
    write_jsonl(corpus.path / "part1.jsonl", [document(99)])
    corpus.resnapshot()
    corpus.files[0] = bracketed
    pipeline(JsonlReader(str(bracketed)), writer=ParquetWriter(str(ctx.root / "out"))).run(
        StreamingExecutor(progress=False))
    return exactly_once(corpus.ids, ids_of(ctx.root / "out"))


# Refused before running ----------------------------------------------------------------

@case("refused")
def output_name_escapes(ctx: Context) -> Outcome:
    """write_to_filename with a name '../x': refused naming it, nothing written outside."""
    corpus = ctx.corpus()

    @processing_stage(name="rename")
    def rename(df):
        return df.assign(file_name="../escape.jsonl")

    work = ctx.root / "work"
    outcome = expect_error(
        lambda: pipeline(JsonlReader(str(corpus.path), add_filename=True, files_per_partition=1),
                         rename, writer=JsonlWriter(str(work / "out"), write_to_filename=True)
                         ).run(StreamingExecutor(progress=False)),
        names=["'../escape.jsonl'", "outside the output directory"], outcome="refused")
    if (work / "escape.jsonl").exists():
        return Outcome("FAIL", detail="a file was written outside the output")
    return outcome


@case("refused")
def gpu_stage_on_cpu_cluster(ctx: Context) -> Outcome:
    """A stage asking for a GPU on CPU workers: refused before any task runs."""
    corpus = ctx.corpus()
    ran = ctx.root / "ran"
    ran.mkdir()

    @processing_stage(name="classify", resources=Resources(gpus=1))
    def classify(df):
        (ran / str(os.getpid())).touch()
        return df

    out = ctx.root / "out"
    outcome = expect_error(
        lambda: pipeline(JsonlReader(str(corpus.path)), classify,
                         writer=ParquetWriter(str(out))).run(StreamingExecutor(progress=False)),
        names=["'classify'", "GPU=1", "cpu_fallback"], outcome="refused")
    if out.exists() or os.listdir(ran):
        return Outcome("FAIL", detail="something ran or was written before the refusal")
    return outcome


@case("refused")
def broken_model_directory(ctx: Context) -> Outcome:
    """A model directory whose weights file is truncated: refused naming it."""
    try:
        from curator_dask.stages.models import ClassifierStage
        from curator_dask.testing.models import save_tiny_classifier
    except ImportError as err:
        return Outcome("FAIL", detail=f"cannot run without the models extra ({err})")
    model = Path(save_tiny_classifier(ctx.root / "model", ["a", "b"]))
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    before = snapshot_bytes(model)
    outcome = expect_error(lambda: ClassifierStage(model), outcome="refused",
                           names=[str(model), "model.safetensors is truncated"])
    if snapshot_bytes(model) != before:
        return Outcome("FAIL", detail="the model directory was modified")
    return outcome


# Output safety --------------------------------------------------------------------------

def _left_in_input(corpus: Corpus) -> list[int]:
    return ids_of(corpus.path) if corpus.path.exists() else []


def _overlap(ctx: Context, corpus: Corpus, out: Path, run: Callable) -> Outcome:
    """Refused naming the input and the output, or FAIL with what was destroyed."""
    outcome = expect_error(run, names=[str(corpus.path), str(out)], outcome="refused")
    if outcome.outcome == "refused" and not ctx.input_bytes_changed():
        return outcome
    lost, duplicated, _ = tally(corpus.ids, ids_of(out), left_in_input=_left_in_input(corpus))
    outcome.outcome, outcome.lost, outcome.duplicated = "FAIL", lost, duplicated
    outcome.seconds_to_error = None
    return outcome


@case("output safety")
def output_equals_input(ctx: Context) -> Outcome:
    """A pipeline writing over its own input (mode='overwrite'): refused naming both."""
    corpus = ctx.corpus()
    return _overlap(ctx, corpus, corpus.path, lambda: pipeline(
        JsonlReader(str(corpus.path)), writer=JsonlWriter(str(corpus.path), mode="overwrite")
    ).run(StreamingExecutor(progress=False)))


@case("output safety")
def output_equals_input_dedup(ctx: Context) -> Outcome:
    """`dedup exact` with --output equal to --input and --output-mode overwrite: refused."""
    from curator_dask.dedup import ExactDeduplicationWorkflow

    corpus = ctx.corpus()
    return _overlap(ctx, corpus, corpus.path, lambda: ExactDeduplicationWorkflow(
        str(corpus.path), str(corpus.path), str(ctx.root / "cache"), output_mode="overwrite"
    ).run())


def _inside(ctx: Context, mode: str) -> Outcome:
    corpus = ctx.corpus()
    out = corpus.path / "out"

    def write(mode):
        return pipeline(JsonlReader(str(corpus.path)), writer=JsonlWriter(str(out), mode=mode)
                        ).run(StreamingExecutor(progress=False))

    first = expect_error(lambda: write("error"), names=[str(corpus.path), str(out)],
                         outcome="refused")
    if first.outcome == "refused" and not ctx.input_bytes_changed():
        return first
    if first.detail != "no error":  # failed for another reason
        return first
    try:
        write(mode)  # the rerun of a user who did not notice
        detail = f"mode={mode!r} rerun wrote {len(read_rows(out))} rows from {len(corpus.ids)}"
    except Exception as err:
        detail = f"mode={mode!r} rerun: {short(err)}"
    lost, duplicated, _ = tally(corpus.ids, ids_of(out), left_in_input=ids_of(corpus.path))
    return Outcome("FAIL", lost, duplicated, "not refused; " + detail)


@case("output safety")
def output_inside_input_overwrite(ctx: Context) -> Outcome:
    """An output directory inside the input, rerun with mode='overwrite': refused."""
    return _inside(ctx, "overwrite")


@case("output safety")
def output_inside_input_append(ctx: Context) -> Outcome:
    """An output directory inside the input, rerun with mode='append': refused."""
    return _inside(ctx, "append")


# Dedup with repeated ids ----------------------------------------------------------------

# Seven documents, five distinct texts; ids repeat across different texts.
REPEATED_IDS = [(1, "a"), (2, "b"), (3, "a"), (3, "c"), (4, "d"), (5, "e"), (5, "b")]


def _repeated_ids(ctx: Context, stage, text_of) -> Outcome:
    directory = ctx.root / "in"
    write_jsonl(directory / "docs.jsonl", [{"id": i, "text": text_of(t)} for i, t in REPEATED_IDS])
    ctx.inputs.append(Corpus(directory, [], [directory / "docs.jsonl"]))
    ctx.inputs[-1].resnapshot()
    out = ctx.root / "out"
    started = time.perf_counter()
    try:
        result = pipeline(JsonlReader(str(directory)), stage, writer=ParquetWriter(str(out))
                          ).run(StreamingExecutor(progress=False))
    except Exception as err:
        message = str(err)
        if ("AddId" in message and any(w in message for w in ("repeat", "unique", "duplicate"))):
            return Outcome("refused", detail=short(err),
                           seconds_to_error=round(time.perf_counter() - started, 2))
        return Outcome("FAIL", detail=short(err))
    kept = Counter(read_rows(out)["text"])
    texts = {text_of(t) for _, t in REPEATED_IDS}
    lost = sum(1 for t in texts if kept[t] == 0)
    duplicated = sum(c - 1 for c in kept.values() if c > 1)
    good = not lost and not duplicated
    return Outcome("ok" if good else "FAIL", lost, duplicated,
                   f"kept {sum(kept.values())} of 5 distinct texts; dropped {result.dropped}")


@case("dedup")
def exact_dedup_repeated_ids(ctx: Context) -> Outcome:
    """ExactDedup over ids that repeat: refused (use AddId), or one copy of each text kept."""
    from curator_dask.dedup.stages import ExactDedup

    return _repeated_ids(ctx, ExactDedup(), lambda t: f"text {t}")


@case("dedup")
def fuzzy_dedup_repeated_ids(ctx: Context) -> Outcome:
    """FuzzyDedup over ids that repeat: refused (use AddId), or one copy of each text kept."""
    from curator_dask.dedup.stages import FuzzyDedup

    words = {t: " ".join(f"{t}{k} word{k * 7 % 13}" for k in range(40)) for t in "abcde"}
    return _repeated_ids(ctx, FuzzyDedup(char_ngrams=5, num_bands=10, minhashes_per_band=4),
                         lambda t: words[t])


# Workers and drivers lost ---------------------------------------------------------------

def _victim_worker(ctx: Context) -> subprocess.Popen:
    """One more worker for a case to kill: a ``dask worker`` without a nanny, so it stays
    dead, while the shared workers stay up for the next case."""
    dask = str(Path(sys.executable).parent / "dask")
    proc = subprocess.Popen(
        [dask, "worker", ctx.address, "--nthreads", "1", "--resources", "CPU=1",
         "--no-nanny", "--host", "127.0.0.1", "--no-dashboard", "--memory-limit", "1GiB"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ctx.client.wait_for_workers(WORKERS + 1, timeout=120)
    return proc


def _sigkill(ctx: Context, executor) -> Outcome:
    corpus = ctx.corpus(n_docs=600, n_files=6)
    out = ctx.root / "out"
    marks = ctx.root / "marks"
    marks.mkdir()

    @processing_stage(name="slow_mark")
    def slow_mark(df):
        time.sleep(0.15)
        (marks / f"{os.getpid()}-{df['id'].iloc[0]}").touch()
        return upper(df)

    victim = _victim_worker(ctx)
    killed_at = []

    def kill_when_it_has_worked():
        # Killed once it has processed partitions: it holds results and running tasks.
        if wait_until(lambda: sum(n.startswith(f"{victim.pid}-") for n in os.listdir(marks))
                      >= 2, timeout=120, interval=0.02):
            victim.kill()
            killed_at.append(time.time())

    thread = threading.Thread(target=kill_when_it_has_worked, daemon=True)
    thread.start()
    try:
        result = pipeline(JsonlReader(str(corpus.path), blocksize="1KiB"), slow_mark,
                          writer=ParquetWriter(str(out))).run(executor)
        ended = time.time()
        thread.join()
    finally:
        stop(victim)
    if not killed_at or killed_at[0] > ended:
        return Outcome("FAIL", detail="no worker was killed mid-run")
    return exactly_once(corpus.ids, ids_of(out), result.dropped,
                        detail=f"{result.partitions} partitions, a worker killed mid-run")


@case("worker loss")
def worker_sigkill_streaming(ctx: Context) -> Outcome:
    """A worker killed with SIGKILL mid-run, streaming executor: every document once."""
    return _sigkill(ctx, StreamingExecutor(max_in_flight=6, progress=False))


@case("worker loss")
def worker_sigkill_batch(ctx: Context) -> Outcome:
    """A worker killed with SIGKILL mid-run, batch executor: every document once."""
    return _sigkill(ctx, BatchExecutor(progress=False))


@case("driver loss")
def driver_kill_resume(ctx: Context) -> Outcome:
    """The driver killed after some parts, rerun with resume=True: every document once,
    finished parts kept as they were."""
    corpus = ctx.corpus(n_docs=600, n_files=6)
    out = ctx.root / "out"
    args = dict(address=ctx.address, source=str(corpus.path), out=str(out))
    driver = spawn_child("streaming_run", **args, resume=False, report=str(ctx.root / "r1"))
    wait_until(lambda: completed_parts(out) >= 4 or driver.poll() is not None, timeout=120)
    stop(driver)
    if not _idle(ctx.client):
        return Outcome("FAIL", detail="the dead driver's tasks did not end")
    finished = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*")
                if (out / f".{p.name.split('.')[0]}.done").exists()}
    report = run_child("streaming_run", timeout=120, **args, resume=True,
                       report=str(ctx.root / "r2"))
    if report is None or "error" in report:
        return Outcome("FAIL", detail=f"the resumed run: {report and report['error']}")
    outcome = exactly_once(corpus.ids, ids_of(out), report["dropped"],
                           detail=f"{len(finished)} of {report['partitions']} parts kept")
    if {n: (out / n).stat().st_mtime_ns for n in finished} != finished:
        outcome.outcome, outcome.detail = "FAIL", "finished parts were rewritten"
    if not 0 < len(finished) < report["partitions"]:
        outcome.outcome, outcome.detail = "FAIL", "the driver was not killed mid-run"
    return outcome


ACTIVE = ("waiting", "queued", "no-worker", "processing")


def _busy_keys(dask_scheduler) -> int:
    return sum(ts.state in ACTIVE for ts in dask_scheduler.tasks.values())


def _idle(client, timeout: float = 60) -> bool:
    """No task waiting or processing on the scheduler and none running on a worker.

    Keys held in memory or as errors do not count: a failed run may still hold some (see
    leftover_futures_after_failure), and they run nothing.
    """
    def idle():
        busy = client.run_on_scheduler(_busy_keys)
        running = client.run(lambda dask_worker: len(dask_worker.active_threads))
        return not busy and not sum(running.values())

    return wait_until(idle, timeout=timeout, interval=0.1)


@case("worker loss")
def adaptive_scale_down(ctx: Context) -> Outcome:
    """Adapt retires two of three workers mid-run: every document once."""
    corpus = ctx.corpus(n_docs=600, n_files=6)
    out = ctx.root / "out"
    report = run_child("adaptive_run", timeout=180, source=str(corpus.path), out=str(out),
                       report=str(ctx.root / "report"))
    if report is None or "error" in report:
        return Outcome("FAIL", detail=f"{(report and report['error']) or 'stalled'}")
    outcome = exactly_once(corpus.ids, ids_of(out), report["dropped"])
    if not report["retired_mid_run"]:
        outcome.outcome, outcome.detail = "FAIL", "no worker was retired mid-run"
    return outcome


def _lifetimes(ctx: Context, lifetime: str, stagger: str | None, n_docs: int,
               timeout: float) -> Outcome:
    corpus = ctx.corpus(n_docs=n_docs, n_files=6)
    out = ctx.root / "out"
    started = time.perf_counter()
    report = run_child("lifetime_run", timeout=timeout, source=str(corpus.path), out=str(out),
                       lifetime=lifetime, stagger=stagger, report=str(ctx.root / "report"))
    if report is None:
        return Outcome("FAIL", detail=f"stalled: no result or error within {timeout:.0f} s "
                                      f"({completed_parts(out)} parts written)")
    if "error" in report:
        seconds = round(time.perf_counter() - started, 1)
        if "NoWorkerError" in report["error"] or "lifetime" in report["error"]:
            return Outcome("refused", detail=report["error"], seconds_to_error=seconds)
        return Outcome("FAIL", detail=report["error"])
    outcome = exactly_once(corpus.ids, ids_of(out), report["dropped"])
    if not report["recycled"]:
        outcome.outcome, outcome.detail = "FAIL", "no worker was recycled mid-run"
    return outcome


@case("worker loss")
def worker_recycling(ctx: Context) -> Outcome:
    """worker_lifetime='5s' staggered by 1 s, streaming: workers recycled, every document once."""
    return _lifetimes(ctx, "5s", "1s", n_docs=600, timeout=120)


@case("worker loss")
def short_worker_lifetimes(ctx: Context) -> Outcome:
    """get_client(worker_lifetime='8s') and the default stagger: every document once, or
    NoWorkerError naming the cause; never a silent stall."""
    return _lifetimes(ctx, "8s", None, n_docs=1200, timeout=120)


# Resume ---------------------------------------------------------------------------------

@processing_stage(name="drop_thirds")
def drop_thirds(df):
    keep = df["id"] % 3 != 0
    return record_dropped(df[keep], "drop_thirds", int((~keep).sum()))


def crash_while(flag: Path, doc_id: int):
    """A stage that fails on the partition holding ``doc_id`` while ``flag`` exists."""
    @processing_stage(name="crash_while_flagged")
    def crash(df):
        if flag.exists() and (df["id"] == doc_id).any():
            raise RuntimeError(f"crash on the partition of document {doc_id}")
        return df

    return crash


@case("resume")
def resume_after_changed_pipeline(ctx: Context) -> Outcome:
    """A run stopped part way, resumed with a filter removed: refused naming what changed."""
    corpus = ctx.corpus(n_docs=600, n_files=6)
    out = ctx.root / "out"
    flag = ctx.root / "crash"
    flag.touch()
    crash = crash_while(flag, corpus.ids[-1])
    def run(*stages, resume):
        return pipeline(JsonlReader(str(corpus.path), blocksize="1KiB"), *stages,
                        writer=ParquetWriter(str(out))).run(
            StreamingExecutor(max_in_flight=3, resume=resume, progress=False))

    try:
        run(drop_thirds, crash, resume=False)
        return Outcome("FAIL", detail="the first run was meant to stop part way")
    except RuntimeError as err:
        if "crash on the partition" not in str(err):
            raise
    flag.unlink()
    kept_before = completed_parts(out)
    started = time.perf_counter()
    try:
        result = run(crash, resume=True)
    except Exception as err:  # judged by its message
        seconds = round(time.perf_counter() - started, 2)
        if "resume" in str(err) and "drop_thirds" in str(err):
            return Outcome("refused", detail=short(err), seconds_to_error=seconds)
        return Outcome("FAIL", detail=short(err), seconds_to_error=seconds)
    written = ids_of(out)
    missing = set(corpus.ids) - set(written)
    duplicated = len(written) - len(set(written))
    return Outcome("FAIL", lost=len(missing), duplicated=duplicated,
                   detail=f"resumed {kept_before} parts of the old pipeline: {len(missing)} "
                          f"documents missing, counted as {result.dropped}")


# Leftovers ------------------------------------------------------------------------------

@case("cleanup")
def leftover_temporary_part(ctx: Context) -> Outcome:
    """A part killed mid-write (its .tmp file left, no marker), then resume: every
    document once, and the temporary file removed."""
    corpus = ctx.corpus()
    out = ctx.root / "out"

    def run(resume):
        return pipeline(JsonlReader(str(corpus.path), blocksize="1KiB"),
                        processing_stage(name="upper")(upper),
                        writer=ParquetWriter(str(out))).run(
            StreamingExecutor(resume=resume, progress=False))

    run(False)
    (out / "part-00002.parquet").unlink()
    (out / ".part-00002.done").unlink()
    # Named as the writer names it (a uuid4 hex), as a write killed before its rename
    # leaves it.
    (out / f".part-00002.parquet.tmp-{uuid.uuid4().hex}").write_bytes(b"")
    result = run(True)
    outcome = exactly_once(corpus.ids, ids_of(out), result.dropped)
    left = [p.name for p in out.iterdir() if ".tmp-" in p.name]
    if left:
        outcome.outcome, outcome.detail = "FAIL", f"left behind: {left}"
    return outcome


class _NodeSetupProbe(ProcessingStage):
    name = "node_setup_probe"

    def setup_on_node(self) -> None:
        pass

    def process(self, df):
        return df


@case("cleanup")
def leftover_node_setup_markers(ctx: Context) -> Outcome:
    """A stage with setup_on_node: no marker file of it is left in TMPDIR after the run."""
    corpus = ctx.corpus()
    stage = _NodeSetupProbe()
    result = pipeline(JsonlReader(str(corpus.path)), stage,
                      writer=ParquetWriter(str(ctx.root / "out"))).run(
        StreamingExecutor(progress=False))
    tmp = tempfile.gettempdir()
    left = (glob.glob(os.path.join(tmp, f"*{stage.stage_id}*"))
            + glob.glob(os.path.join(tmp, "*", f"*{stage.stage_id}*")))
    outcome = exactly_once(corpus.ids, ids_of(ctx.root / "out"), result.dropped)
    if left:
        outcome.outcome = "FAIL"
        outcome.detail = f"{len(left)} marker(s) left: {sorted(os.path.basename(p) for p in left)}"
    return outcome


def _keys_of_run(dask_scheduler, prefix: str) -> int:
    """Keys the scheduler holds from the run whose tasks of stage ``prefix`` it knows."""
    tokens = {key.split("-")[1] for key in map(str, dask_scheduler.tasks)
              if key.startswith(prefix + "-")}
    return sum(any(f"-{t}-" in str(key) for t in tokens) for key in dask_scheduler.tasks)


def _futures_after_failure(ctx: Context, executor) -> Outcome:
    corpus = ctx.corpus()
    flag = ctx.root / "crash"
    flag.touch()
    failed = False
    try:
        pipeline(JsonlReader(str(corpus.path), blocksize="1KiB"), crash_while(flag, 150),
                 writer=ParquetWriter(str(ctx.root / "out"))).run(executor)
    except RuntimeError:
        failed = True
    if not failed:
        return Outcome("FAIL", detail="the run was meant to fail")

    def held():
        return ctx.client.run_on_scheduler(_keys_of_run, prefix="crash_while_flagged")

    if not wait_until(lambda: held() == 0, timeout=5, interval=0.1):
        return Outcome("FAIL", detail=f"{held()} keys of the run still held 5 s after the "
                                      "error")
    return Outcome("ok", detail="every key of the run released")


@case("cleanup")
def leftover_futures_after_failure_batch(ctx: Context) -> Outcome:
    """A batch run that fails: its keys are released by the time the error reaches the
    user, without gc.collect()."""
    return _futures_after_failure(ctx, BatchExecutor(progress=False))


@case("cleanup")
def leftover_futures_after_failure_streaming(ctx: Context) -> Outcome:
    """A streaming run that fails: its keys are released by the time the error reaches
    the user, without gc.collect()."""
    return _futures_after_failure(ctx, StreamingExecutor(progress=False))


# Side outputs, one writer, content identity -----------------------------------------------

def _pipeline_file(ctx: Context, corpus: Corpus, out: Path, **extra) -> Path:
    """A pipeline file reading ``corpus`` and writing ``out`` (local executor)."""
    path = ctx.root / "p.yaml"
    lines = "".join(f"{key}: {value}\n" for key, value in extra.items())
    path.write_text(f"executor: {{type: local, progress: false}}\n"
                    f"reader: {{type: jsonl, path: {corpus.path}}}\nstages: []\n"
                    f"writer: {{type: parquet, path: {out}, mode: overwrite}}\n" + lines)
    return path


def _cli(*args: str) -> tuple[int, str, float]:
    """Run the curator-dask command in this process: exit code, stderr, seconds."""
    import contextlib
    import io

    from curator_dask.cli.main import main as cli

    err = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli(list(args))
    return code, err.getvalue().strip(), round(time.perf_counter() - started, 2)


def _refused_by_cli(code: int, err: str, seconds: float, names: Iterable[str]) -> Outcome:
    missing = [n for n in names if repr(n) not in err]
    if code != 2 or missing:
        return Outcome("FAIL", detail=f"exit {code}, does not name {missing}: {err}")
    return Outcome("refused", detail=err.split("error: ", 1)[-1], seconds_to_error=seconds)


@case("side outputs")
def report_on_input_file(ctx: Context) -> Outcome:
    """`report: in/f00.jsonl` in a pipeline file: exit 2 naming both, before anything runs."""
    corpus = ctx.corpus()
    report = corpus.files[0]
    code, err, seconds = _cli("run", str(_pipeline_file(ctx, corpus, ctx.root / "out",
                                                         report=report)))
    outcome = _refused_by_cli(code, err, seconds, [str(report), str(corpus.path)])
    if (ctx.root / "out").exists():
        outcome.outcome, outcome.detail = "FAIL", "the run started: out/ was written"
    return outcome


@case("side outputs")
def report_on_finished_part(ctx: Context) -> Outcome:
    """`report: out/part-00000.parquet` after a finished run: exit 2, the part and its
    marker kept as they were."""
    corpus = ctx.corpus()
    out = ctx.root / "out"
    code, err, _ = _cli("run", str(_pipeline_file(ctx, corpus, out)))
    if code:
        return Outcome("FAIL", detail=f"the first run: exit {code}: {err}")
    written = snapshot_bytes(out)
    part = out / "part-00000.parquet"
    outcome = _refused_by_cli(*_cli("run", str(_pipeline_file(ctx, corpus, out, report=part))),
                              [str(part), str(out)])
    if snapshot_bytes(out) != written:
        outcome.outcome, outcome.detail = "FAIL", "the output was modified"
    lost, duplicated, problems = tally(corpus.ids, ids_of(out))
    if lost or duplicated or problems:
        outcome.outcome, outcome.lost, outcome.duplicated = "FAIL", lost, duplicated
    return outcome


@case("side outputs")
def performance_report_inside_output(ctx: Context) -> Outcome:
    """`Pipeline.run(report=out/dask.html)` writing into `out/`: refused naming both."""
    corpus = ctx.corpus()
    out = ctx.root / "out"
    outcome = expect_error(lambda: pipeline(
        JsonlReader(str(corpus.path)), writer=ParquetWriter(str(out))).run(
        StreamingExecutor(progress=False), report=str(out / "dask.html")),
        names=[str(out), str(out / "dask.html")], outcome="refused")
    if out.exists():
        outcome.outcome, outcome.detail = "FAIL", "out/ was written"
    return outcome


@case("side outputs")
def cache_inside_output(ctx: Context) -> Outcome:
    """A barrier's cache inside the output directory: refused naming both."""
    from curator_dask.dedup.stages import ExactDedup

    corpus = ctx.corpus()
    out = ctx.root / "out"
    return expect_error(lambda: pipeline(
        JsonlReader(str(corpus.path)), ExactDedup(), writer=ParquetWriter(str(out))).run(
        StreamingExecutor(cache_path=str(out / "cache"), progress=False)),
        names=[str(out), str(out / "cache")], outcome="refused")


@case("one writer")
def second_run_while_writing(ctx: Context) -> Outcome:
    """A `mode='overwrite'` write while a driver (another process) writes the same
    output: refused naming the first run; the first run's output complete and unmixed."""
    from curator_dask.io import OutputInUseError

    corpus, other = ctx.corpus(), ctx.corpus("other", n_docs=60)
    out = ctx.root / "out"
    args = dict(address=ctx.address, source=str(corpus.path), out=str(out), resume=False,
                report=str(ctx.root / "first"))
    first = spawn_child("streaming_run", **args)
    wait_until(lambda: completed_parts(out) >= 2 or first.poll() is not None, timeout=120)
    if first.poll() is not None:
        return Outcome("FAIL", detail="the first run ended before the second started")
    started = time.perf_counter()
    try:
        DocumentDataset.read_jsonl(str(other.path)).to_parquet(str(out), mode="overwrite")
        refusal = None
    except OutputInUseError as err:
        refusal, seconds = short(err), round(time.perf_counter() - started, 2)
    first.wait(timeout=120)
    report = json.loads(Path(args["report"]).read_text()) if first.returncode == 0 else None
    if refusal is None or f"pid {first.pid}" not in refusal:
        return Outcome("FAIL", detail=f"the second run was not refused naming the first "
                                      f"({refusal})")
    if report is None:
        return Outcome("FAIL", detail=f"the first run failed (exit {first.returncode})")
    outcome = exactly_once(corpus.ids, ids_of(out), report["dropped"], ok="refused",
                           detail=refusal)
    outcome.seconds_to_error = seconds
    return outcome


@case("one writer")
def stale_lease_taken_with_force(ctx: Context) -> Outcome:
    """A lease from another host without a heartbeat for minutes: refused, then taken
    over with force=True; every document once."""
    import socket

    import fsspec

    from curator_dask.io import OutputInUseError, atomic
    from curator_dask.io.lease import LEASE, LeaseHolder

    corpus = ctx.corpus()
    out = ctx.root / "out"
    out.mkdir()
    past = time.time() - 600
    holder = LeaseHolder("e" * 32, f"not-{socket.gethostname()}", 4242, past, past, past)
    atomic.create_exclusive(fsspec.filesystem("file"), str(out / LEASE), holder.to_bytes())
    ds = DocumentDataset.read_jsonl(str(corpus.path))
    refused = expect_error(lambda: ds.to_parquet(str(out)), outcome="refused",
                           names=[str(out), "no heartbeat", "force=True"])
    if refused.outcome != "refused":
        return refused
    try:
        written = ds.to_parquet(str(out), force=True)
    except OutputInUseError as err:
        return Outcome("FAIL", detail=f"force did not take the stale lease: {short(err)}")
    return exactly_once(corpus.ids, ids_of(out), written.dropped,
                        detail="refused, then taken over with force=True")


def _shared_text_corpus(ctx: Context) -> tuple[Corpus, str]:
    """300 documents; 250 (in f02) has the text of 10 (in f00). Returns the text."""
    corpus = ctx.corpus()
    shared = document(10)["text"]
    corpus.replace_line(2, 51, json.dumps({"id": 250, "text": shared}).encode())
    return corpus, shared


def _edit_in_place(path: Path, old: str, new: str) -> None:
    """Overwrite ``old`` with ``new`` (same length) in ``path``, and put its
    modification time back: only the content says that it changed."""
    stat = path.stat()
    data = path.read_bytes()
    offset = data.index(old.encode())
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(new.encode())
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@case("content identity")
def exact_dedup_same_size_edit(ctx: Context) -> Outcome:
    """Exact dedup twice on one cache, a duplicate edited in between to another text of
    the same length (modification time put back): the cache is not reused, the document
    that is unique now is kept."""
    from curator_dask.dedup import ExactDeduplicationWorkflow

    corpus, shared = _shared_text_corpus(ctx)
    out, cache = ctx.root / "out", ctx.root / "cache"
    ExactDeduplicationWorkflow(str(corpus.path), str(out), str(cache)).run()
    _edit_in_place(corpus.files[2], shared, shared.upper())
    corpus.resnapshot()
    result = ExactDeduplicationWorkflow(str(corpus.path), str(out), str(cache),
                                        output_mode="overwrite").run()
    outcome = exactly_once(corpus.ids, ids_of(out), result.output.dropped,
                           detail=f"identify_from_cache={result.identify_from_cache}")
    if result.identify_from_cache or result.duplicate_documents:
        outcome.outcome = "FAIL"
    return outcome


@case("content identity")
def fuzzy_dedup_same_size_edit(ctx: Context) -> Outcome:
    """Fuzzy dedup twice on one cache, the same edit in between: every phase computed
    again, nothing removed that is unique now."""
    from curator_dask.dedup import FuzzyDeduplicationWorkflow

    corpus, shared = _shared_text_corpus(ctx)
    out, cache = ctx.root / "out", ctx.root / "cache"

    def run(**options):
        return FuzzyDeduplicationWorkflow(str(corpus.path), str(cache), str(out),
                                          perform_removal=True, **options).run()

    first = run()
    _edit_in_place(corpus.files[2], shared, shared.upper())
    corpus.resnapshot()
    second = run(output_mode="overwrite")
    outcome = exactly_once(corpus.ids, ids_of(out), second.output.dropped,
                           detail=f"from cache: {second.phases_from_cache}; removed "
                                  f"{first.duplicate_documents}, then "
                                  f"{second.duplicate_documents}")
    if second.phases_from_cache or second.duplicate_documents >= first.duplicate_documents:
        outcome.outcome = "FAIL"
    return outcome


@case("content identity")
def resume_after_same_size_edit(ctx: Context) -> Outcome:
    """A run stopped part way, an input edited in place to the same size (modification
    time put back), then resume=True: refused, naming the file and that its content
    changed."""
    corpus, shared = _shared_text_corpus(ctx)
    out = ctx.root / "out"

    def run(resume: bool):
        return pipeline(JsonlReader(str(corpus.path), blocksize="1KiB"),
                        writer=ParquetWriter(str(out))).run(
            StreamingExecutor(resume=resume, progress=False))

    run(False)
    for marker in sorted(out.glob(".part-*.done"))[3:]:
        marker.unlink()
    _edit_in_place(corpus.files[2], shared, shared.upper())
    corpus.resnapshot()
    written = snapshot_bytes(out)
    outcome = expect_error(lambda: run(True), outcome="refused",
                           names=[str(corpus.files[2]), "content changed"])
    if snapshot_bytes(out) != written:
        outcome.outcome, outcome.detail = "FAIL", "the output was modified"
    return outcome


# == running the catalog ===================================================================

def run_case(item: Case, client, address: str, scratch: Path) -> dict:
    root = scratch / item.name
    root.mkdir()
    ctx = Context(root, client, address)
    gc.collect()  # what earlier cases' errors left in cycles is not this case's
    started = time.perf_counter()
    try:
        outcome = item.run(ctx)
    except Exception as err:  # an unexpected error is the case's outcome
        logger.exception("case %s", item.name)
        outcome = Outcome("FAIL", detail=short(err))
    outcome.detail = outcome.detail.replace(str(root) + "/", "")
    changed = ctx.input_bytes_changed()
    if changed and outcome.outcome != "FAIL":
        outcome.outcome = "FAIL"
        outcome.detail = f"the input was modified; {outcome.detail}"
    row = {"case": item.name, "theme": item.theme, "description": item.doc,
           **asdict(outcome), "input_bytes_changed": changed,
           "seconds": round(time.perf_counter() - started, 1)}
    try:
        client.wait_for_workers(WORKERS, timeout=120)
    except Exception:  # the next cases will say what that cost
        logger.warning("after %s: fewer than %d workers", item.name, WORKERS)
    shutil.rmtree(root, ignore_errors=True)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    if args.child:  # a scenario in a child process; its one argument is JSON
        CHILDREN[args.child](**json.loads(args.cases[0]))
        return 0
    if args.list:
        print_table(("case", "theme", "what it checks"),
                    [(c.name, c.theme, c.doc) for c in CASES])
        return 0
    unknown = set(args.cases) - {c.name for c in CASES}
    if unknown:
        parser.error(f"unknown case(s): {sorted(unknown)}; see --list")
    chosen = [c for c in CASES if not args.cases or c.name in args.cases]

    rows = []
    with tempfile.TemporaryDirectory(prefix="curator-faults-") as scratch:
        client = get_client(n_workers=WORKERS, threads_per_worker=1, dashboard_address=None,
                            silence_logs=logging.CRITICAL)
        with client:
            client.wait_for_workers(WORKERS)
            address = client.scheduler.address
            for item in chosen:
                row = run_case(item, client, address, Path(scratch))
                print(f"  {row['case']}: {row['outcome']} ({row['seconds']} s) "
                      f"{clip(row['detail'], 200)}", file=sys.stderr)
                rows.append(row)

    header = ("case", "outcome", "lost", "duplicated", "input bytes changed", "s to error",
              "detail")
    print_table(header, [(r["case"], r["outcome"], r["lost"], r["duplicated"],
                          r["input_bytes_changed"],
                          "-" if r["seconds_to_error"] is None else f"{r['seconds_to_error']:.2f}",
                          clip(r["detail"], 80)) for r in rows])
    totals = {
        "cases": len(rows),
        "failed": [r["case"] for r in rows if r["outcome"] == "FAIL"],
        "documents_lost": sum(r["lost"] for r in rows),
        "documents_duplicated": sum(r["duplicated"] for r in rows),
        "input_bytes_changed": sum(r["input_bytes_changed"] for r in rows),
        "max_seconds_to_error": max((r["seconds_to_error"] for r in rows
                                     if r["seconds_to_error"] is not None), default=None),
    }
    print(json.dumps(totals, indent=2))
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"cpu_count": os.cpu_count(), "cases": rows,
                                  "totals": totals}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
