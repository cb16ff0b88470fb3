"""Task decontamination: curator-dask's TaskDecontamination beside datatrove's n-gram filter.

Both sides look for the same 13-grams of the same evaluation tasks in the same corpus, in
one process on one core:

- curator-dask: what a worker runs per partition (``--partition-size`` documents):
  ``decontaminate_partition`` with the index built once (NeMo Curator's cutting of each
  match plus a margin), and the counting pass ``count_partition`` that NeMo's
  ``max_matches`` rule adds before it; both are timed, and the client's index build
  separately;
- datatrove 0.10: ``NGramsDecontFilter.filter`` on every ``Document`` (drops a document
  holding any task n-gram; no cutting), its index files written with datatrove's own
  normalisation, tokenizer and hash (``simplify_text``, ``ngrams``, xxhash-64 of the
  joined n-gram: ``NGramsDecontIndexer.compute_hashes``'s steps; the indexer itself
  insists on downloading lighteval tasks). With datatrove's default English word
  tokenizer (spaCy's), and again with a whitespace tokenizer, its cheapest. (datatrove
  0.10.1 passes ``str`` to xxhash, which xxhash 4 refuses; the script hashes the UTF-8
  bytes, as earlier xxhash versions did.)

Corpora, each with evaluation passages planted into a share of the documents:

- ``generated``: web-like documents over a Zipfian English-ish vocabulary
  (``benchmarks/filters.py``'s generator); tasks are questions and answers from the same
  vocabulary, so no task word is rare enough to skip windows;
- ``python-docs``: the bundled sample of real text (818 pages of the Python
  documentation, repeated ``--real-copies`` times with different plants); its tasks are
  paragraphs of the sample itself, the way evaluation text leaks into crawls.

Beside the planted tasks, ``--filler-ngrams`` 13-grams of generated task text make the
index the size of a real evaluation suite. The table gives documents per CPU-second (=
per core) and the documents each side finds contaminated (they agree when both
normalisations read the planted words alike). Run::

    python benchmarks/decontamination.py          # table; writes results/decontamination.json
    python benchmarks/decontamination.py --docs 2000 --quick

Needs datatrove and spacy (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from table import print_table

RESULTS = Path(__file__).parent / "results" / "decontamination.json"
NAME = "task_decontamination"


def plant(texts: list[str], passages: list[str], rate: float, rng) -> list[str]:
    """Insert a random passage at a sentence boundary of ``rate`` of the texts."""
    out = []
    for text in texts:
        if rng.random() < rate:
            sentences = text.split(". ")
            at = int(rng.integers(0, len(sentences) + 1))
            sentences.insert(at, passages[int(rng.integers(len(passages)))])
            text = ". ".join(sentences)
        out.append(text)
    return out


def generated_tasks(n_ngrams: int, rng, vocab: list[str]) -> list[str]:
    """Question-like texts of 15 to 60 words with about ``n_ngrams`` 13-grams in all."""
    texts, total = [], 0
    while total < n_ngrams:
        n = int(rng.integers(15, 61))
        texts.append(" ".join(rng.choice(vocab, size=n)))
        total += n - 12
    return texts


def write_task(path: Path, texts: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for text in texts:
            out.write(json.dumps({"question": text}) + "\n")


def corpora(args, rng) -> dict:
    from filters import generate_corpus

    from curator_dask.sample import sample_documents

    generated = generate_corpus(args.docs, args.seed)
    vocab = sorted({w for doc in generated[:200] for w in doc.split()})
    gen_tasks = generated_tasks(2000, rng, vocab)
    real = sample_documents()["text"].tolist()
    paragraphs = [p for doc in real for p in doc.split("\n\n") if len(p.split()) >= 20]
    held = [paragraphs[i] for i in rng.choice(len(paragraphs), size=300, replace=False)]
    real_docs = []
    for _ in range(args.real_copies):
        real_docs += plant(real, held, args.rate, rng)
    return {
        "generated": {"texts": plant(generated, gen_tasks, args.rate, rng),
                      "tasks": {"generated_qa": gen_tasks}},
        "python-docs": {"texts": real_docs, "tasks": {"python_docs_paragraphs": held}},
    }, vocab


# -- curator-dask --------------------------------------------------------------------------------

def run_curator(texts, files, partition_size):
    from curator_dask.dropped import sum_dropped
    from curator_dask.partition import Partition
    from curator_dask.stages.decontamination import build_index
    from curator_dask.stages.decontamination.stage import count_partition, decontaminate_partition

    start = time.process_time()
    index = build_index(files)
    build_cpu = time.process_time() - start
    partitions = [pd.DataFrame({"text": pd.array(texts[i:i + partition_size], dtype="str")})
                  for i in range(0, len(texts), partition_size)]
    options = {"text_field": "text", "margin": 200, "min_length": 200, "max_splits": 10,
               "stage_name": NAME}
    decontaminate_partition(partitions[0].head(50), index, **options)  # compile/load kernels
    count_partition(partitions[0].head(50), index, "text")
    cpu0 = time.process_time()
    for part in partitions:
        count_partition(part, index, "text")
    count_cpu = time.process_time() - cpu0
    cpu0 = time.process_time()
    outputs = [Partition(part).apply(decontaminate_partition, index, **options)
               for part in partitions]
    cut_cpu = time.process_time() - cpu0
    counters = sum_dropped(o.counters for o in outputs)
    dropped = sum_dropped(o.dropped for o in outputs)
    found = sum(v for k, v in counters.items() if k.endswith(".documents"))
    return {"index_build_cpu_s": round(build_cpu, 3), "index_ngrams": len(index),
            "index_mb": round(index.nbytes / 1e6, 2),
            "index_bytes_per_ngram": round(index.nbytes / max(len(index), 1), 1),
            "count_pass_cpu_s": round(count_cpu, 3), "cut_pass_cpu_s": round(cut_cpu, 3),
            "docs_contaminated": found, "docs_dropped": sum(dropped.values()),
            "docs_split": counters.get(f"{NAME}.split_documents", 0),
            "pieces": counters.get(f"{NAME}.pieces", 0)}


# -- datatrove -----------------------------------------------------------------------------------

def whitespace_tokenizer():
    from datatrove.utils.word_tokenizers import WordTokenizer

    class Whitespace(WordTokenizer):
        def word_tokenize(self, text):
            return text.split()

        def sent_tokenize(self, text):
            return [text]

        def span_tokenize(self, text):
            return [(0, len(text))]

    return Whitespace("en")


def _encode_before_xxhash() -> None:
    """datatrove 0.10.1 hands ``str`` to xxhash, which xxhash 4 refuses ("Strings must be
    encoded before hashing"); earlier xxhash versions hashed the UTF-8 bytes, which is
    what this restores."""
    import xxhash
    from datatrove.utils.hashes import xxhash as hashes

    def xxhash64(data):
        return xxhash.xxh64_intdigest(data.encode("utf-8") if isinstance(data, str) else data)

    hashes.xxhash64 = xxhash64


def run_datatrove(texts, tasks: dict[str, list[str]], tokenizer, folder: str):
    from datatrove.data import Document
    from datatrove.pipeline.decont import NGramsDecontConfig, NGramsDecontFilter
    from datatrove.utils.hashing import create_hash_func
    from datatrove.utils.text import ngrams, simplify_text
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    _encode_before_xxhash()
    config = NGramsDecontConfig(n_grams=13, find_query_ngrams=True)
    tok = load_word_tokenizer(tokenizer)
    hash_func = create_hash_func(config.hash_config)
    start = time.process_time()
    for name, task_texts in tasks.items():
        hashes = set()
        for text in task_texts:
            words = tok.word_tokenize(simplify_text(text, config.norm_config))
            hashes.update(hash_func(" ".join(g)) for g in ngrams(words, config.n_grams))
        np.array(sorted(hashes), dtype=np.uint64).tofile(os.path.join(folder,
                                                                      f"{name}.index.hashes"))
    build_cpu = time.process_time() - start
    decont = NGramsDecontFilter(index_folder=folder, config=config, language=tokenizer)
    documents = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]
    decont.filter(Document(text="warm up the index", id="w"))  # loads the index
    cpu0 = time.process_time()
    flagged = sum(decont.filter(doc) is not True for doc in documents)
    return {"index_build_cpu_s": round(build_cpu, 3), "filter_cpu_s":
            round(time.process_time() - cpu0, 3), "docs_contaminated": flagged}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=6000, help="generated documents")
    parser.add_argument("--real-copies", type=int, default=6,
                        help="times the 818-document sample is used, each with new plants")
    parser.add_argument("--rate", type=float, default=0.05, help="share of documents planted")
    parser.add_argument("--filler-ngrams", type=int, default=200_000)
    parser.add_argument("--partition-size", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="do not write the JSON result")
    args = parser.parse_args(argv)

    import pyarrow as pa

    from curator_dask.stages.decontamination import EvalTask

    pa.set_cpu_count(1)  # one core: no Arrow thread pool
    rng = np.random.default_rng(args.seed)
    data, vocab = corpora(args, rng)
    filler = generated_tasks(args.filler_ngrams, rng, vocab + [f"w{i}" for i in range(5000)])
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, corpus in data.items():
            tasks = {**corpus["tasks"], "suite_filler": filler}
            root = Path(tmp) / name
            root.mkdir()
            files = []
            for task, texts in tasks.items():
                write_task(root / f"{task}.jsonl", texts)
                files.append(EvalTask(str(root / f"{task}.jsonl"), fields=("question",)))
            texts = corpus["texts"]
            ours = run_curator(texts, files, args.partition_size)
            theirs = {}
            for label, tokenizer in (("spacy", "en"), ("whitespace", whitespace_tokenizer())):
                folder = root / f"datatrove-{label}"
                folder.mkdir()
                theirs[label] = run_datatrove(texts, tasks, tokenizer, str(folder))
            n = len(texts)
            one_pass = ours["cut_pass_cpu_s"]
            two_pass = ours["cut_pass_cpu_s"] + ours["count_pass_cpu_s"]
            runs[name] = {
                "docs": n, "mean_chars_per_doc": round(sum(map(len, texts)) / n),
                "curator_dask": {**ours, "docs_per_s_per_core_one_pass": round(n / one_pass),
                                 "docs_per_s_per_core_two_passes": round(n / two_pass)},
                "datatrove": {label: {**r, "docs_per_s_per_core": round(n / r["filter_cpu_s"])}
                              for label, r in theirs.items()},
                "speedup_per_core": {
                    label: {"one_pass": round(r["filter_cpu_s"] / one_pass, 1),
                            "two_passes": round(r["filter_cpu_s"] / two_pass, 1)}
                    for label, r in theirs.items()},
            }
    result = {
        "benchmark": "13-gram task decontamination, one core",
        "partition_size": args.partition_size, "seed": args.seed, "plant_rate": args.rate,
        "corpora": runs,
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or
                    platform.machine(), "cores_used": 1, "cores_available": os.cpu_count()},
    }
    rows = []
    for name, run in runs.items():
        ours = run["curator_dask"]
        rows.append([name, "curator-dask, cut (max_matches=None)", run["docs"],
                     f"{ours['cut_pass_cpu_s']:.2f}",
                     f"{ours['docs_per_s_per_core_one_pass']:,}", ours["docs_contaminated"]])
        rows.append([name, "curator-dask, count + cut (NeMo default)", run["docs"],
                     f"{ours['cut_pass_cpu_s'] + ours['count_pass_cpu_s']:.2f}",
                     f"{ours['docs_per_s_per_core_two_passes']:,}", ours["docs_contaminated"]])
        for label, r in run["datatrove"].items():
            rows.append([name, f"datatrove, {label} words", run["docs"], f"{r['filter_cpu_s']:.2f}",
                         f"{r['docs_per_s_per_core']:,}", r["docs_contaminated"]])
    print_table(["corpus", "engine", "docs", "CPU s", "docs/s/core", "docs contaminated"], rows)
    print()
    print_table(["corpus", "vs datatrove", "one pass", "two passes", "index n-grams",
                 "index MB", "bytes/n-gram", "index build CPU s (ours / datatrove)"],
                [[name, label, f"{s['one_pass']}x", f"{s['two_passes']}x",
                  f"{run['curator_dask']['index_ngrams']:,}", run["curator_dask"]["index_mb"],
                  run["curator_dask"]["index_bytes_per_ngram"],
                  f"{run['curator_dask']['index_build_cpu_s']} / "
                  f"{run['datatrove'][label]['index_build_cpu_s']}"]
                 for name, run in runs.items() for label, s in run["speedup_per_core"].items()])
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {RESULTS}")
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
