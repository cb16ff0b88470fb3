"""Gopher quality + repetition rules: curator-dask's vectorised filters beside datatrove's.

Both sides run the same rules with the same thresholds on the same generated web-like
corpus, in one process on one core:

- curator-dask: ``GopherQualityFilter().score`` and ``GopherRepetitionFilter().score``
  over pandas partitions (``--partition-size`` documents each), as a worker would;
- datatrove: ``GopherQualityFilter.filter`` and ``GopherRepetitionFilter.filter`` on
  every ``Document``, with a whitespace word tokenizer (datatrove's default English
  tokenizer needs NLTK's punkt data, which cannot be downloaded here, and whitespace
  words are what curator-dask uses, so the decisions are comparable).

Throughput is documents per CPU-second of this process (= per core; the run is single
threaded). The script also checks that both sides drop the same documents for the same
reasons and reports any disagreement. Run::

    python benchmarks/filters.py            # prints a table, writes benchmarks/results/filters.json
    python benchmarks/filters.py --docs 2000 --quick

Needs ``datatrove`` (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

RESULTS = Path(__file__).parent / "results" / "filters.json"

# datatrove's reason names -> curator-dask's rule names
DATATROVE_REASONS = {
    "gopher_short_doc": "word_count", "gopher_long_doc": "word_count",
    "gopher_below_avg_threshold": "mean_word_length",
    "gopher_above_avg_threshold": "mean_word_length",
    "gopher_too_many_hashes": "hash_ratio", "gopher_too_many_ellipsis": "ellipsis_ratio",
    "gopher_too_many_bullets": "bullet_lines", "gopher_too_many_end_ellipsis": "ellipsis_lines",
    "gopher_below_alpha_threshold": "alpha_words", "gopher_enough_stop_words": "stop_words",
    "dup_para_frac": "duplicate_paragraphs", "dup_para_char_frac": "duplicate_paragraph_chars",
    "dup_line_frac": "duplicate_lines", "dup_line_char_frac": "duplicate_line_chars",
    **{f"top_{n}_gram": f"top_{n}gram" for n in (2, 3, 4)},
    **{f"duplicated_{n}_n_grams": f"duplicate_{n}grams" for n in range(5, 11)},
}


def generate_corpus(n_docs: int, seed: int = 0) -> list[str]:
    """Web-like documents: Zipfian English-ish words in lines and paragraphs, lengths
    from a handful to a few thousand words, with the defects Gopher targets mixed in
    (short pages, bullet and ellipsis lists, hashtags, numbers, boilerplate repeated
    lines and paragraphs, spammy repeated phrases)."""
    rng = np.random.default_rng(seed)
    stop = ["the", "of", "and", "to", "a", "in", "is", "that", "with", "have", "be", "for"]
    common = ["data", "model", "language", "system", "people", "time", "world", "new",
              "about", "more", "first", "which", "their", "would", "there", "research",
              "information", "development", "government", "community", "important"]
    rare = [f"{p}{s}" for p in ("pro", "con", "re", "in", "trans", "inter", "super", "sub")
            for s in ("ject", "vert", "duct", "tion", "form", "ment", "cess", "port", "ceive")]
    symbols = ["#tag", "...", "…", "123", "2024", "$19.99", "(see", "below)", "-", "•", "&"]
    vocab = stop + common + rare + [w.capitalize() for w in common] + symbols
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 0.9
    weights /= weights.sum()
    vocab = np.array(vocab, dtype=object)
    docs = []
    for _ in range(n_docs):
        n_words = int(np.clip(rng.lognormal(5.8, 0.9), 5, 8000))
        words = vocab[rng.choice(len(vocab), size=n_words, p=weights)]
        cuts = np.sort(rng.choice(np.arange(1, n_words), size=min(n_words - 1, n_words // 18),
                                  replace=False)) if n_words > 1 else []
        lines = [" ".join(chunk) for chunk in np.split(words, cuts)]
        kind = rng.random()
        if kind < 0.08:
            lines = ["• " + line for line in lines]
        elif kind < 0.12:
            lines = [line + " ..." for line in lines]
        elif kind < 0.22:
            lines += lines[: max(1, len(lines) // 2)]
        elif kind < 0.28:
            phrase = " ".join(vocab[rng.choice(len(vocab), size=4, p=weights)])
            lines = [line + " " + phrase * 3 for line in lines]
        ends = rng.choice([".", ".", ".", "!", "?", ""], size=len(lines))
        lines = [line + end for line, end in zip(lines, ends, strict=True)]
        sep = "\n\n" if rng.random() < 0.4 else "\n"
        docs.append(sep.join(lines))
    return docs


def run_curator(docs: list[str], partition_size: int) -> tuple[list, float, float]:
    from curator_dask.stages.filters import GopherQualityFilter, GopherRepetitionFilter

    quality, repetition = GopherQualityFilter(), GopherRepetitionFilter()
    warm = pd.Series(docs[:50], dtype="str")  # compile the numba kernels outside the timing
    quality.score(warm), repetition.score(warm)
    partitions = [pd.Series(docs[i:i + partition_size], dtype="str")
                  for i in range(0, len(docs), partition_size)]
    verdicts = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for text in partitions:
        q = quality.score(text)
        r = repetition.score(text)
        verdicts += list(zip(q.tolist(), r.tolist(), strict=True))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    verdicts = [tuple(None if isinstance(v, float) else v for v in pair) for pair in verdicts]
    return verdicts, cpu, wall


def run_datatrove(docs: list[str]) -> tuple[list, float, float]:
    from datatrove.data import Document
    from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter
    from datatrove.utils.word_tokenizers import WordTokenizer

    class Whitespace(WordTokenizer):
        def word_tokenize(self, text):
            return text.split()

        def sent_tokenize(self, text):
            return [text]

        def span_tokenize(self, text):
            return [(0, len(text))]

    tokenizer = Whitespace("en")
    quality = GopherQualityFilter(language=tokenizer)
    repetition = GopherRepetitionFilter(language=tokenizer)
    documents = [Document(text=t, id=str(i)) for i, t in enumerate(docs)]

    def verdict(result):
        return None if result is True else DATATROVE_REASONS[result[1]]

    verdicts = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for doc in documents:
        verdicts.append((verdict(quality.filter(doc)), verdict(repetition.filter(doc))))
    return verdicts, time.process_time() - cpu0, time.perf_counter() - wall0


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=6000)
    parser.add_argument("--partition-size", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="do not write the JSON result")
    args = parser.parse_args(argv)

    import pyarrow as pa

    pa.set_cpu_count(1)  # one core: no Arrow thread pool
    docs = generate_corpus(args.docs, args.seed)
    chars = sum(map(len, docs))
    ours, ours_cpu, ours_wall = run_curator(docs, args.partition_size)
    theirs, theirs_cpu, theirs_wall = run_datatrove(docs)
    disagreements = [(i, a, b) for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    dropped = sum(1 for q, r in ours if q or r)

    result = {
        "benchmark": "Gopher quality + repetition rules, same thresholds, same corpus",
        "docs": len(docs), "mean_chars_per_doc": round(chars / len(docs)),
        "partition_size": args.partition_size, "seed": args.seed,
        "dropped_by_either_rule_set": dropped,
        "curator_dask": {"cpu_s": round(ours_cpu, 3), "wall_s": round(ours_wall, 3),
                         "docs_per_s_per_core": round(len(docs) / ours_cpu)},
        "datatrove": {"cpu_s": round(theirs_cpu, 3), "wall_s": round(theirs_wall, 3),
                      "docs_per_s_per_core": round(len(docs) / theirs_cpu),
                      "word_tokenizer": "whitespace (str.split)"},
        "speedup_per_core": round(theirs_cpu / ours_cpu, 1),
        "same_decisions_and_reasons": len(docs) - len(disagreements),
        "disagreements": [{"doc": i, "curator_dask": a, "datatrove": b}
                          for i, a, b in disagreements[:20]],
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or
                    platform.machine(), "cores_used": 1, "cores_available": os.cpu_count()},
    }
    width = 14
    print(f"{len(docs)} documents, {chars / len(docs):.0f} characters each on average; "
          f"{dropped} dropped by the Gopher rules")
    print(f"{'':<{width}}{'CPU s':>10}{'docs/s/core':>14}")
    print(f"{'curator-dask':<{width}}{ours_cpu:>10.2f}{len(docs) / ours_cpu:>14,.0f}")
    print(f"{'datatrove':<{width}}{theirs_cpu:>10.2f}{len(docs) / theirs_cpu:>14,.0f}")
    print(f"speed-up per core: {theirs_cpu / ours_cpu:.1f}x; same decision and reason on "
          f"{len(docs) - len(disagreements)}/{len(docs)} documents")
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {RESULTS}")
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
