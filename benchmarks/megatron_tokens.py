"""Tokenizing to Megatron token files: curator-dask's MegatronWriter beside datatrove.

The same BPE tokenizer (trained on the bundled sample, ``--vocab`` tokens) and the same
JSONL, in one run:

- curator-dask: ``JsonlReader -> MegatronWriter(eos=True)`` run by the
  ``StreamingExecutor`` on a local cluster of ``--workers`` single-threaded workers;
- datatrove 0.10: ``JsonlReader -> DocumentTokenizer`` (no shuffling) and ``JsonlReader ->
  MegatronDocumentTokenizer`` (the same .bin/.idx format), ``LocalPipelineExecutor`` with
  ``--workers`` tasks and workers;
- the tokenizer alone: the library's batched call over the same texts on one thread in
  one process, nothing written: the ceiling of any tool built on it.

Each run is a child process. Its process tree is sampled every 0.1 s: CPU seconds are
the sum of each process's user and system time at its last sample (start-up included),
so *tokens per CPU-second* is what one core does whatever the machine's load; peak
memory is the largest sum of the tree's RSS. Every run must write the same number of
tokens.

Inputs: the bundled sample replicated (``benchmarks/corpus.py``) to ``--size-mb``, and
generated text (random words) of ``--generated-mb``; the diverse corpus of
``/work/corpus/scale1`` when present (``--real``). Memory in streaming mode is measured
on 1/8 of the replicated sample and on all of it.

    python benchmarks/megatron_tokens.py --size-mb 128 --generated-mb 48 --workers 2
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file's name is the standard library's ``tokenize`` (which ``inspect`` imports):
# load that one first, then let benchmarks/ (table, corpus) come after the library.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if p not in ("", str(HERE))]
import tokenize  # noqa: E402,F401  (the standard library's)

sys.path.append(str(HERE))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import string  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import psutil  # noqa: E402
from table import print_table  # noqa: E402

EOS = "<|endoftext|>"


# -- the child runs --------------------------------------------------------------------------

def run_ours(data: str, out: str, tokenizer: str, workers: int, blocksize: str) -> int:
    from curator_dask import JsonlReader, Pipeline, StreamingExecutor, get_client
    from curator_dask.training import MegatronWriter

    with get_client(n_workers=workers, threads_per_worker=1, dashboard_address=None):
        result = (Pipeline("tokenize")
                  .add_stage(JsonlReader(os.path.join(data, "*.jsonl"), blocksize=blocksize,
                                         columns=["text"]))
                  .add_stage(MegatronWriter(out, tokenizer=tokenizer, eos=True,
                                            mode="overwrite"))
                  .run(StreamingExecutor(progress=False)))
    return result.counters["write_megatron.tokens"]


def run_datatrove(data: str, out: str, tokenizer: str, workers: int, megatron: bool) -> int:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer
    from datatrove.pipeline.tokens.megatron_tokenizer import MegatronDocumentTokenizer

    path = os.path.join(tokenizer, "tokenizer.json")
    step = (MegatronDocumentTokenizer(out, tokenizer_name_or_path=path, eos_token=EOS)
            if megatron else
            DocumentTokenizer(out, tokenizer_name_or_path=path, eos_token=EOS,
                              shuffle_documents=False))
    logs = tempfile.mkdtemp(prefix="datatrove-logs-")
    LocalPipelineExecutor(pipeline=[JsonlReader(data, glob_pattern="*.jsonl"), step],
                          tasks=workers, workers=workers, logging_dir=logs).run()
    shutil.rmtree(logs, ignore_errors=True)
    if megatron:
        import fsspec

        from curator_dask.io.megatron import read_index

        fs = fsspec.filesystem("file")
        return sum(read_index(fs, str(p)).tokens for p in Path(out).rglob("*.idx"))
    return sum(p.stat().st_size for p in Path(out).rglob("*.ds")) // 2  # uint16 tokens


def tokenizer_alone(data: str, tokenizer: str) -> int:
    """The ceiling of any tool built on the library: ``encode_batch_fast`` over the texts
    in calls of ~1M characters, on one thread, nothing read or written."""
    import pyarrow.json as pajson
    from tokenizers import Tokenizer

    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    model = Tokenizer.from_file(os.path.join(tokenizer, "tokenizer.json"))
    eos = model.token_to_id(EOS)
    tokens = 0
    for path in sorted(Path(data).glob("*.jsonl")):
        texts = pajson.read_json(path).column("text").to_pylist()
        start = 0
        while start < len(texts):
            stop, chars = start, 0
            while stop < len(texts) and chars < 1 << 20:
                chars += len(texts[stop])
                stop += 1
            tokens += sum(len(e.ids) + (eos is not None)
                          for e in model.encode_batch_fast(texts[start:stop],
                                                           add_special_tokens=False))
            start = stop
    return tokens


def child(args) -> None:
    if args.child == "tokenizer-alone":
        print(json.dumps({"tokens": int(tokenizer_alone(args.data, args.tokenizer))}))
        return
    if args.child == "ours":
        tokens = run_ours(args.data, args.out, args.tokenizer, args.workers, args.blocksize)
    else:
        tokens = run_datatrove(args.data, args.out, args.tokenizer, args.workers,
                               megatron=args.child == "datatrove-megatron")
    print(json.dumps({"tokens": int(tokens)}))


# -- the parent ------------------------------------------------------------------------------

def _sample_tree(process: psutil.Process, cpu: dict[int, float]) -> int:
    """The RSS of ``process`` and its descendants now; their CPU seconds so far go into
    ``cpu`` (by pid: a process that has exited keeps its last sample)."""
    try:
        tree = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in tree:
        try:
            with p.oneshot():
                times = p.cpu_times()
                cpu[p.pid] = times.user + times.system
                total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def measure(system: str, data: Path, tokenizer: str, workers: int, blocksize: str) -> dict:
    out = tempfile.mkdtemp(prefix=f"tokenize-{system}-")
    shutil.rmtree(out)
    command = [sys.executable, __file__, "--child", system, "--data", str(data), "--out", out,
               "--tokenizer", tokenizer, "--workers", str(workers), "--blocksize", blocksize]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    watched, peak, cpu = psutil.Process(process.pid), 0, {}
    while process.poll() is None:
        peak = max(peak, _sample_tree(watched, cpu))
        time.sleep(0.1)
    stdout = process.stdout.read()
    if process.returncode:
        raise SystemExit(f"{system} failed on {data} (exit {process.returncode})")
    wall = time.perf_counter() - start
    cpu_seconds = sum(cpu.values())
    shutil.rmtree(out, ignore_errors=True)
    tokens = json.loads(stdout.strip().splitlines()[-1])["tokens"]
    return {"tokens": tokens, "wall_s": round(wall, 1), "cpu_s": round(cpu_seconds, 1),
            "tokens_per_cpu_s": round(tokens / cpu_seconds), "peak_rss_MB": round(peak / 1e6)}


WORDS = ["".join(random.Random(i).choices(string.ascii_lowercase,
                                           k=random.Random(-i).randint(2, 10)))
         for i in range(20000)]


def generate(directory: Path, size_mb: int, files: int = 6) -> None:
    """Random words (a Zipf-like pick from 20,000), documents of 50 to 800 words."""
    if directory.exists() and sum(p.stat().st_size for p in directory.glob("*.jsonl")) \
            >= size_mb * 0.95e6:
        return
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    weights = 1 / np.arange(1, len(WORDS) + 1)
    weights /= weights.sum()
    words = np.array(WORDS, dtype=object)
    for f in range(files):
        written, lines = 0, []
        while written < size_mb * 1e6 / files:
            text = " ".join(words[rng.choice(len(words), rng.integers(50, 800), p=weights)])
            lines.append(json.dumps({"text": text}) + "\n")
            written += len(lines[-1])
        (directory / f"gen-{f:02d}.jsonl").write_text("".join(lines))


def subset(corpus: Path, fraction: int, into: Path) -> Path:
    """The first 1/``fraction`` of the corpus's shards, linked into ``into``."""
    shards = sorted(corpus.glob("shard-*.jsonl"))
    into.mkdir(parents=True, exist_ok=True)
    for shard in shards[:max(1, len(shards) // fraction)]:
        target = into / shard.name
        if not target.exists():
            os.symlink(shard, target)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=128)
    parser.add_argument("--generated-mb", type=int, default=48)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--blocksize", default="8MiB")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "bench-tokenize"))
    parser.add_argument("--real", default="/work/corpus/scale1")
    parser.add_argument("--inputs", default="sample,generated,real,memory",
                        help="what to run, of sample, generated, real, memory")
    parser.add_argument("--json", default="benchmarks/results/tokenize.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)

    from corpus import build

    from curator_dask.testing.tokenizer import save_bpe_tokenizer

    work = Path(args.work)
    tokenizer = str(work / f"bpe-{args.vocab}")
    if not (Path(tokenizer) / "tokenizer.json").exists():
        save_bpe_tokenizer(tokenizer, vocab_size=args.vocab)
    wanted = set(args.inputs.split(","))
    sample = work / f"sample-{args.size_mb}mb"
    if wanted & {"sample", "memory"}:
        build(sample, args.size_mb)
    inputs = {}
    if "sample" in wanted:
        inputs[f"sample x{args.size_mb} MB"] = sample
    if "generated" in wanted:
        generated = work / f"generated-{args.generated_mb}mb"
        generate(generated, args.generated_mb)
        inputs[f"generated {args.generated_mb} MB"] = generated
    real = Path(args.real)
    if "real" in wanted and real.is_dir() and any(real.glob("*.jsonl")):
        inputs["diverse corpus (scale1)"] = real
    load_before = os.getloadavg()

    rows, results = [], {"workers": args.workers, "vocab": args.vocab,
                         "blocksize": args.blocksize, "speed": {}, "memory": {}}
    for label, data in inputs.items():
        mb = sum(p.stat().st_size for p in Path(data).glob("*.jsonl")) / 1e6
        runs = {system: measure(system, data, tokenizer, args.workers, args.blocksize)
                for system in ("ours", "datatrove", "datatrove-megatron", "tokenizer-alone")}
        if len({r["tokens"] for r in runs.values()}) != 1:
            raise SystemExit(f"{label}: the runs wrote different token counts: {runs}")
        for system, run in runs.items():
            ratio = runs["ours"]["tokens_per_cpu_s"] / run["tokens_per_cpu_s"]
            rows.append([label, f"{mb:.0f}", system, f"{run['tokens']:,}", run["wall_s"],
                         run["cpu_s"], f"{run['tokens_per_cpu_s']:,}", run["peak_rss_MB"],
                         f"{ratio:.2f}"])
        results["speed"][label] = {"MB": round(mb, 1), **runs}

    memory = {}
    if "memory" in wanted:
        small = subset(sample, 8, work / f"sample-{args.size_mb}mb-eighth")
    for label, data in ((("1x", small), ("8x", sample)) if "memory" in wanted else ()):
        memory[label] = measure("ours", data, tokenizer, args.workers, args.blocksize)
        memory[label]["MB"] = round(sum(p.stat().st_size for p in Path(data).glob("*.jsonl"))
                                    / 1e6, 1)
    if memory:
        results["memory"] = {**memory, "ratio_8x": round(memory["8x"]["peak_rss_MB"]
                                                         / memory["1x"]["peak_rss_MB"], 2)}
    results["load_average"] = {"before": load_before, "after": os.getloadavg()}

    print(f"tokenizer: byte-level BPE, {args.vocab} tokens; {args.workers} workers; "
          f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    print_table(["input", "MB", "system", "tokens", "wall s", "CPU s", "tokens / CPU-s",
                 "peak MB", "curator-dask x"], rows)
    if memory:
        print_table(["input", "MB", "peak RSS MB", "tokens / CPU-s"],
                    [[label, m["MB"], m["peak_rss_MB"], f"{m['tokens_per_cpu_s']:,}"]
                     for label, m in memory.items()])
        print(f"peak memory, 8x the input in streaming mode: {results['memory']['ratio_8x']}x")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
