"""Memory a task needs per input byte, phase by phase: the planner's calibration table.

Each phase runs on one partition of real text, read from JSONL as a worker reads it, in
a fresh process: after the imports and a warm-up on a few documents (numba kernels
compiled or loaded), a thread samples the process's resident memory while the task
reads the partition and runs the phase; the working set is the peak above the memory
before the read. Two partition sizes give the slope (bytes of memory per byte of
input), which is what the planner multiplies a partition's size by; the fixed part (a
few MB of tables) is left out by taking the difference.

Phases (what one task of the phase holds at its peak):

``read``        the partition read and held as a frame (Arrow-backed strings)
``filters``     read + every NeMo heuristic filter's score, one after another
``minhash``     read + MinHash signatures (char 24-grams, 260 hashes)
``lsh``         read + signatures + one iteration of band buckets (20 bands)
``exact``       read + md5 of every text (the exact-dedup hashing task)

The planner's table in ``curator_dask/io/planner.py`` (``WORKING_SETS``) holds these
figures rounded up, and the phases this script cannot run on a partition of text
(connected components, embeddings, k-means, the decontamination index), derived from
their data structures there.

    python benchmarks/working_sets.py --data /work/corpus/scale1 --sizes-mb 16,48
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
RESULTS = HERE / "results" / "working_sets.json"
PHASES = ("read", "filters", "minhash", "lsh", "exact")
MB = 1_000_000


def heuristic_filters():
    """NeMo Curator's English heuristic set (``heuristic_filter_en.yaml``)."""
    from curator_dask.stages import filters as F

    return [F.NonAlphaNumericFilter(), F.SymbolsToWordsFilter(), F.NumbersFilter(),
            F.UrlsFilter(), F.WhiteSpaceFilter(), F.ParenthesesFilter(),
            F.BoilerPlateStringFilter(), F.RepeatedLinesFilter(),
            F.RepeatedParagraphsFilter(), F.RepeatedLinesByCharFilter(),
            F.RepeatedParagraphsByCharFilter(), F.WordCountFilter(), F.PunctuationFilter(),
            F.EllipsisFilter(), F.CommonEnglishWordsFilter(),
            F.WordsWithoutAlphabetsFilter(), F.MeanWordLengthFilter(), F.LongWordFilter(),
            *[F.RepeatingTopNGramsFilter(n=n) for n in (2, 3, 4)],
            *[F.RepeatingDuplicateNGramsFilter(n=n) for n in range(5, 11)]]


def _run_phase(phase: str, df) -> None:
    if phase == "filters":
        for f in heuristic_filters():
            f.score(df["text"])
    elif phase in ("minhash", "lsh"):
        from curator_dask.dedup.fuzzy import MinHash
        from curator_dask.dedup.fuzzy.lsh import band_buckets
        from curator_dask.dedup.fuzzy.minhash import SIGNATURE_FIELD, signature_matrix

        signatures = MinHash().process(df)
        if phase == "lsh":
            band_buckets(signature_matrix(signatures[SIGNATURE_FIELD]), range(20), 13)
    elif phase == "exact":
        from curator_dask.dedup import hash_texts

        hash_texts(df["text"])


def child(phase: str, path: str) -> dict:
    """One phase on the file at ``path`` (one partition), in this fresh process."""
    import psutil

    from curator_dask import AddId, DocumentDataset

    def read(p):
        ds = AddId("id")(DocumentDataset.read_jsonl(p, blocksize="1GiB"))
        return ds.df.partitions[0].compute(scheduler="sync")

    with tempfile.TemporaryDirectory() as tmp:  # warm-up: imports, compiled kernels
        small = Path(tmp) / "small.jsonl"
        with open(path, "rb") as src:
            small.write_bytes(b"".join(src.readline() for _ in range(50)))
        _run_phase(phase, read(str(small)))
    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = [baseline]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    df = read(path)
    _run_phase(phase, df)
    seconds = time.perf_counter() - start
    stop.set()
    sampler.join()
    return {"phase": phase, "bytes": os.path.getsize(path), "documents": len(df),
            "working_set": peak[0] - baseline, "baseline_rss": baseline,
            "seconds": round(seconds, 2)}


def _slice(data: Path, size: int, out: Path) -> None:
    """The first ``size`` bytes (whole lines) of the corpus's shards."""
    written = 0
    with open(out, "wb") as dst:
        for shard in sorted(data.glob("*.jsonl")):
            with open(shard, "rb") as src:
                for line in src:
                    dst.write(line)
                    written += len(line)
                    if written >= size:
                        return


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a directory of JSONL shards")
    parser.add_argument("--sizes-mb", default="16,48")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--child", nargs=2, metavar=("PHASE", "FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    from table import print_table

    sizes = [int(float(s) * MB) for s in args.sizes_mb.split(",")]
    rows, results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for size in sizes:
            files[size] = Path(tmp) / f"part-{size}.jsonl"
            _slice(Path(args.data), size, files[size])
        for phase in args.phases.split(","):
            runs = []
            for size in sizes:
                out = subprocess.run([sys.executable, __file__, "--data", args.data, "--child",
                                      phase, str(files[size])], check=True,
                                     capture_output=True, text=True)
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            low, high = runs[0], runs[-1]
            slope = ((high["working_set"] - low["working_set"])
                     / max(high["bytes"] - low["bytes"], 1))
            results.append({"phase": phase, "runs": runs, "per_byte": round(slope, 2)})
            rows.append((phase, *(f"{r['working_set'] / r['bytes']:.2f}" for r in runs),
                         f"{slope:.2f}"))
    print_table(("phase", *(f"peak/byte at {s // MB} MB" for s in sizes), "slope"), rows)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"data": args.data, "load": os.getloadavg(),
                                           "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
