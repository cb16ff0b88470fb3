"""Patterned PII: curator-dask's PiiRedactor beside Presidio's own analyzer + anonymizer loop.

Both sides find the same seven entity types and replace each with ``<TYPE>``, in one
process on one core, on two corpora with entities planted at known offsets
(``curator_dask.testing.pii.planted_pii``):

- ``synthetic``: generated words with 0-4 entities per document, entity-shaped decoys
  (card numbers failing Luhn, invalid SSNs and IBANs, version numbers, times) and
  non-ASCII neighbours;
- ``python-docs``: the bundled sample of real text (818 pages of the Python
  documentation, ``curator_dask.sample``) with 0-4 entities planted into each page.

Peers:

- curator-dask: ``PiiRedactor(action="replace").process`` over pandas partitions of
  ``--partition-size`` documents, as a worker runs it;
- Presidio: ``AnalyzerEngine.analyze`` + ``AnonymizerEngine.anonymize`` per document (what
  Presidio's docs and NeMo Curator 0.x do), with only its pattern recognizers for these
  types (Email, Phone, Ip, CreditCard, Iban, UsSsn, Url) and a blank spaCy English
  pipeline (tokenizer only), the cheapest NLP engine it accepts: no NER model runs.

Recall is measured on the planted entities for both: *exact* (a span of the same type
with the same offsets) and *overlap* (a span of the same type covering part of it).
"Other spans" counts detections that are not planted: on ``synthetic`` every one is a
false positive; on ``python-docs`` some are real (the documentation holds URLs and
addresses). Throughput is documents per CPU-second of this process (= per core). Run::

    python benchmarks/pii.py                  # table; writes benchmarks/results/pii.json
    python benchmarks/pii.py --docs 1000 --quick

Needs ``presidio-analyzer``, ``presidio-anonymizer`` and ``spacy`` (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pandas as pd
from table import print_table

RESULTS = Path(__file__).parent / "results" / "pii.json"


def score(found: list[set], planted: list[list], types) -> dict:
    """Recall (exact and overlapping) per type, and spans found that were not planted."""
    exact, overlap, total, other = Counter(), Counter(), Counter(), Counter()
    for got, want in zip(found, planted, strict=True):
        want = set(want)
        for kind, start, end in want:
            total[kind] += 1
            exact[kind] += (kind, start, end) in got
            overlap[kind] += any(k == kind and s < end and start < e for k, s, e in got)
        for kind, start, end in got - want:
            if not any(k == kind and s < end and start < e for k, s, e in want):
                other[kind] += 1
    return {kind: {"planted": total[kind], "recall_exact": round(exact[kind] / total[kind], 4),
                   "recall_overlap": round(overlap[kind] / total[kind], 4),
                   "other_spans": other[kind]} for kind in types if total[kind]}


def run_curator(texts: list[str], partition_size: int):
    from curator_dask.stages.pii import PATTERN_ENTITIES, PiiRedactor

    stage = PiiRedactor(action="replace")
    partitions = [pd.DataFrame({"text": pd.array(texts[i:i + partition_size], dtype="str")})
                  for i in range(0, len(texts), partition_size)]
    stage.process(partitions[0].head(20))  # warm up (regex compilation, Arrow kernels)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    outputs = [stage.process(part)["text"] for part in partitions]
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    found = []
    for part in partitions:
        spans = stage.find(part["text"])
        per_doc = [set() for _ in range(len(part))]
        for d, s, e, k in zip(spans.docs, spans.starts, spans.ends, spans.kinds, strict=True):
            per_doc[d].add((spans.types[k], int(s), int(e)))
        found += per_doc
    return found, pd.concat(outputs).tolist(), cpu, wall, PATTERN_ENTITIES


def presidio_engines(model_dir: str):
    import spacy
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import SpacyNlpEngine
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        IpRecognizer,
        PhoneRecognizer,
        UrlRecognizer,
        UsSsnRecognizer,
    )
    from presidio_anonymizer import AnonymizerEngine

    spacy.blank("en").to_disk(model_dir)
    engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": model_dir}])
    engine.load()
    registry = RecognizerRegistry(recognizers=[
        EmailRecognizer(), PhoneRecognizer(), IpRecognizer(), CreditCardRecognizer(),
        IbanRecognizer(), UsSsnRecognizer(), UrlRecognizer()])
    analyzer = AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])
    return analyzer, AnonymizerEngine()


def run_presidio(texts: list[str], analyzer, anonymizer, types):
    entities = list(types)
    analyzer.analyze(texts[0], language="en", entities=entities)  # warm up
    results, outputs = [], []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for text in texts:
        found = analyzer.analyze(text, language="en", entities=entities)
        outputs.append(anonymizer.anonymize(text=text, analyzer_results=found).text)
        results.append(found)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    spans = [{(r.entity_type, r.start, r.end) for r in found} for found in results]
    return spans, outputs, cpu, wall


def corpora(n_docs: int, seed: int) -> dict[str, pd.DataFrame]:
    from curator_dask.sample import sample_documents
    from curator_dask.testing.pii import planted_pii

    real = sample_documents()["text"].tolist()
    return {"synthetic": planted_pii(n_docs, seed=seed),
            "python-docs": planted_pii(len(real), seed=seed, filler=real, unicode_rate=0.0)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=4000, help="synthetic documents")
    parser.add_argument("--partition-size", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="do not write the JSON result")
    args = parser.parse_args(argv)

    import pyarrow as pa

    pa.set_cpu_count(1)  # one core: no Arrow thread pool
    # tldextract (inside Presidio's email check) tries to download the public suffix
    # list, fails here, and falls back to its bundled copy: silence its traceback.
    logging.getLogger("tldextract").setLevel(logging.CRITICAL)
    logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        analyzer, anonymizer = presidio_engines(os.path.join(tmp, "blank-en"))
        runs = {}
        for name, docs in corpora(args.docs, args.seed).items():
            texts, planted = docs["text"].tolist(), docs["planted"].tolist()
            ours, our_text, ours_cpu, ours_wall, types = run_curator(texts, args.partition_size)
            theirs, their_text, theirs_cpu, theirs_wall = run_presidio(texts, analyzer,
                                                                       anonymizer, types)
            runs[name] = {
                "docs": len(texts), "mean_chars_per_doc": round(sum(map(len, texts)) / len(texts)),
                "planted_entities": sum(map(len, planted)),
                "curator_dask": {"cpu_s": round(ours_cpu, 3), "wall_s": round(ours_wall, 3),
                                 "docs_per_s_per_core": round(len(texts) / ours_cpu),
                                 "per_type": score(ours, planted, types)},
                "presidio": {"cpu_s": round(theirs_cpu, 3), "wall_s": round(theirs_wall, 3),
                             "docs_per_s_per_core": round(len(texts) / theirs_cpu),
                             "per_type": score(theirs, planted, types)},
                "speedup_per_core": round(theirs_cpu / ours_cpu, 1),
                "same_output_text": sum(a == b for a, b in zip(our_text, their_text,
                                                                strict=True)),
            }
    from importlib.metadata import version

    result = {
        "benchmark": "patterned PII, replace with <TYPE>, planted entities, one core",
        "partition_size": args.partition_size, "seed": args.seed,
        "presidio_version": version("presidio-analyzer"),
        "corpora": runs,
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or
                    platform.machine(), "cores_used": 1, "cores_available": os.cpu_count()},
    }
    rows = []
    for name, run in runs.items():
        for side in ("curator_dask", "presidio"):
            r = run[side]
            rows.append([name, side.replace("_", "-"), run["docs"], f"{r['cpu_s']:.2f}",
                         f"{r['docs_per_s_per_core']:,}",
                         f"{run['speedup_per_core']}x" if side == "curator_dask" else "1.0x"])
    print_table(["corpus", "engine", "docs", "CPU s", "docs/s/core", "speed-up"], rows)
    print()
    recall_rows = []
    for name, run in runs.items():
        for kind in run["curator_dask"]["per_type"]:
            ours, theirs = run["curator_dask"]["per_type"][kind], run["presidio"]["per_type"][kind]
            recall_rows.append([name, kind, ours["planted"], ours["recall_exact"],
                                theirs["recall_exact"], theirs["recall_overlap"],
                                ours["other_spans"], theirs["other_spans"]])
    print_table(["corpus", "type", "planted", "recall ours", "recall Presidio (exact)",
                 "(overlap)", "other spans ours", "other spans Presidio"], recall_rows)
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {RESULTS}")
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
