"""A benchmark corpus of distinct real documents, with planted duplicates and their ground truth.

A replicated sample has a tiny vocabulary, so n-gram tables and hash sets stay small and
every figure looks better than it will on a crawl. This corpus is built from the text on the
machine instead, of several kinds so that vocabulary and lengths vary:

* ``rust-doc``: the HTML documentation of one Rust toolchain, tags stripped (resiliparse);
* ``man``: manual pages in every installed language, troff turned into plain text;
* ``debian-doc``: ``/usr/share/doc`` (changelogs, copyright files, READMEs, HTML);
* ``license``: ``/usr/share/common-licenses``;
* ``python-docstring``: module, class and function docstrings of installed Python code
  (the newest standard library, every site-packages, the Google Cloud SDK);
* ``perl-pod``: the POD documentation of installed Perl modules;
* ``markup``: ``.md``, ``.rst`` and ``.txt`` files anywhere under ``/usr`` and the home
  directory.

Long files are cut at paragraph boundaries into documents whose target length is drawn
from a log-normal distribution (median 250 words, from 60 to 6,000), documents of fewer
than 50 words or mostly not letters are dropped, and the rest are deduplicated twice:
exactly (BLAKE2 of the text) and near (a one-permutation MinHash of character 24-grams,
100 bins in 20 bands of 5, which makes a candidate of 97% of the pairs at Jaccard 0.7,
far stricter than the 20 x 13 bands of fuzzy deduplication). What remains is the *base*:
distinct documents, none a near duplicate of another.

``--scale 1`` writes the base; ``--scale k`` adds ``k - 1`` passes of variants. A variant
of a base document has the sentences of each paragraph shuffled, one word in five replaced
by a word drawn from the corpus's own running text (one replacement in 20 a new word coined
from two, so the vocabulary grows with the corpus as a crawl's does), and, three times in
ten, its second part replaced by paragraphs of another document of the same kind. Variants
are far from their base (character 24-gram Jaccard about 0.2; a few documents of long
identifiers reach 0.5) and from each other (about 0.07); the manifest reports the largest
measured on a sample.
``--size-mb`` stops at a size of distinct text instead.

On top of the distinct documents, as a crawl holds them: 8% get one to three exact copies
and 5% one near duplicate (a few word edits, character 24-gram Jaccard 0.8 to 0.9), placed
up to two shards later. ``ground_truth.json`` lists the groups by id.

Files: ``shard-00000.jsonl`` ... (or ``.parquet``), each record ``{"id", "source", "text"}``
with ``id`` unique; ``ground_truth.json``; ``_manifest.json`` with the counts. A rerun with
the same arguments, the same source files and the same code reuses the directory.

    python benchmarks/diverse_corpus.py --out /data/corpus --scale 1
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import heapq
import json
import logging
import multiprocessing
import os
import re
import resource
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_sources
from corpus_sources import (
    MB,
    MIN_WORDS,
    CorpusError,
    Source,
    as_sources,
    check_output,
    file_text,
    fingerprint_files,
    guard_keys,
    is_prose,
    jaccard,
    list_files,
    near_duplicate_mask,
    shingle_hashes,
    sorted_unique,
    split_documents,
)

__all__ = ["CorpusError", "Source", "build", "main"]

logger = logging.getLogger("diverse_corpus")

EXACT_FRACTION, NEAR_FRACTION = 0.08, 0.05
NEAR_JACCARD = (0.8, 0.9)
SUBSTITUTE_RATE, COIN_RATE, SPLICE_RATE = 0.2, 0.05, 0.3
VARIANT_CHECK_DOCUMENTS = 64
CHUNK = 256
GENERATOR = "diverse_corpus/1"
_OWN_FILE = re.compile(r"shard-\d{5}\.(jsonl|parquet)|ground_truth\.json")


# ---------------------------------------------------------------------------- the base

def _extract(task: tuple[str, str, int]) -> tuple[str, list[tuple[str, np.ndarray]], int]:
    """A file's documents that pass :func:`is_prose`, with their guard keys."""
    kind, path, seed = task
    try:
        text = file_text(path)
    except OSError:
        return kind, [], 0
    rng = np.random.default_rng([seed, zlib.crc32(path.encode("utf-8", "surrogateescape"))])
    documents = split_documents(text, rng)
    kept = [(d, guard_keys(shingle_hashes(d))) for d in documents if is_prose(d)]
    return kind, kept, len(documents) - len(kept)


class Base:
    """The distinct documents, staged in one file and read back by position."""

    def __init__(self, staging: Path, kinds: list[str], offsets: np.ndarray,
                 kind_codes: np.ndarray, kept: np.ndarray, vocabulary: np.ndarray):
        self.path, self.kinds, self.offsets = staging / "base.txt", kinds, offsets
        self.kind_codes, self.kept, self.vocabulary = kind_codes, kept, vocabulary
        self.members = {code: kept[kind_codes[kept] == code] for code in range(len(kinds))}
        self._data = None

    def text(self, index: int) -> str:
        if self._data is None:
            self._data = np.memmap(self.path, np.uint8, mode="r")
        return bytes(self._data[self.offsets[index]:self.offsets[index + 1]]).decode("utf-8")

    def kind(self, index: int) -> str:
        return self.kinds[self.kind_codes[index]]


def build_base(files: list[tuple[str, str]], staging: Path, seed: int,
               pool_map) -> tuple[Base, dict]:
    """Extract, split, filter and deduplicate (exactly, then near) the source files."""
    kinds = sorted({kind for kind, _ in files})
    seen, offsets, kind_codes, keys, words = set(), [0], [], [], []
    stats = Counter()
    staging.mkdir(parents=True, exist_ok=True)
    with open(staging / "base.txt", "wb") as out:
        tasks = [(kind, path, seed) for kind, path in files]
        for done, (kind, documents, rejected) in enumerate(pool_map(_extract, tasks, 32), 1):
            if done % 10_000 == 0:
                logger.info("read %d of %d files, %d documents", done, len(tasks), len(keys))
            stats["not_prose"] += rejected
            for text, document_keys in documents:
                data = text.encode("utf-8")
                digest = hashlib.blake2b(data, digest_size=16).digest()
                if digest in seen:
                    stats["exact_duplicates"] += 1
                    continue
                seen.add(digest)
                out.write(data)
                offsets.append(offsets[-1] + len(data))
                kind_codes.append(kinds.index(kind))
                keys.append(document_keys)
                words.extend(text.split()[7::64])  # a 1-in-64 sample of the running text
    if not keys:
        raise CorpusError("the sources hold no document of at least "
                          f"{MIN_WORDS} words; give sources with more text")
    near = near_duplicate_mask(np.stack(keys))
    stats["near_duplicates"] = int(near.sum())
    stats["distinct"] = int((~near).sum())
    base = Base(staging, kinds, np.array(offsets, np.int64), np.array(kind_codes, np.int16),
                np.flatnonzero(~near), np.array(words, dtype=object))
    return base, dict(stats)


# ------------------------------------------------------------------ variants and duplicates

# A sentence ends at . ! or ? before spaces; a paragraph at a blank line.
_SENTENCE_BREAK = re.compile(r"((?<=[.!?])\s+|\n\n+)")
_WHITESPACE = re.compile(r"(\s+)")


def substitute_words(text: str, rng: np.random.Generator, vocabulary: np.ndarray,
                     rate: float) -> str:
    """Replace a ``rate`` of the words by words of the running text, a few coined anew."""
    parts = np.array(_WHITESPACE.split(text), dtype=object)
    slots = np.flatnonzero((rng.random(len(parts)) < rate) & (parts != ""))
    slots = slots[slots % 2 == 0]  # even parts are words, odd ones the spaces between
    picks = vocabulary[rng.integers(0, len(vocabulary), len(slots))]
    for at in np.flatnonzero(rng.random(len(slots)) < COIN_RATE):
        other = vocabulary[rng.integers(0, len(vocabulary))]
        picks[at] = picks[at][:max(1, len(picks[at]) // 2)] + other[len(other) // 2:]
    parts[slots] = picks
    return "".join(parts.tolist())


def shuffle_sentences(text: str, rng: np.random.Generator) -> str:
    """The same text with the sentences of each paragraph in a random order."""
    pieces = _SENTENCE_BREAK.split(text)  # sentences at even places, what parts them at odd
    sentences = pieces[0::2]
    paragraph = np.zeros(len(sentences))
    paragraph[1:] = np.cumsum(["\n\n" in gap for gap in pieces[1::2]])
    order = np.argsort(paragraph + rng.random(len(sentences)), kind="stable")
    pieces[0::2] = [sentences[i] for i in order]
    return "".join(pieces)


def make_variant(text: str, partner: str, rng: np.random.Generator,
                 vocabulary: np.ndarray) -> str:
    """A new document from a base one: spliced, sentences shuffled, words replaced."""
    paragraphs = text.split("\n\n")
    if len(paragraphs) > 1 and rng.random() < SPLICE_RATE:
        cut = int(rng.integers(1, len(paragraphs)))
        replaced = sum(len(p.split()) for p in paragraphs[cut:])
        theirs = partner.split("\n\n")
        start = int(rng.integers(0, len(theirs)))
        paragraphs = paragraphs[:cut]
        for paragraph in theirs[start:] + theirs[:start]:  # about as many words as replaced
            paragraphs.append(paragraph)
            replaced -= len(paragraph.split())
            if replaced <= 0:
                break
        text = "\n\n".join(paragraphs)
    return substitute_words(shuffle_sentences(text, rng), rng, vocabulary, SUBSTITUTE_RATE)


def near_duplicate(text: str, rng: np.random.Generator,
                   vocabulary: np.ndarray) -> tuple[str, float]:
    """A copy with a few word edits, aimed at character 24-gram Jaccard 0.8 to 0.9.

    Each edit touches about 30 shingles, so ``0.08 * shingles / 30`` edits land near
    0.85; the count is corrected from the measured Jaccard until it lands in the range.
    """
    original = shingle_hashes(text)
    low, high = NEAR_JACCARD
    middle = (low + high) / 2
    edits = max(1.0, (1 - middle) / (1 + middle) * len(original) / 30)
    pieces = _WHITESPACE.split(text)
    words = np.flatnonzero(np.array([bool(p) for p in pieces[0::2]])) * 2
    best = (text + " " + vocabulary[0], 0.0)
    for _ in range(6):
        parts = list(pieces)
        for slot in rng.choice(words, size=min(len(words), round(edits)), replace=False):
            action = rng.random()
            pick = vocabulary[rng.integers(0, len(vocabulary))]
            if action < 0.25:
                parts[slot] = ""
            else:
                parts[slot] = pick if action < 0.75 else f"{parts[slot]} {pick}"
        candidate = "".join(parts)
        if candidate == text:
            continue
        similarity = jaccard(original, shingle_hashes(candidate))
        if abs(similarity - middle) < abs(best[1] - middle):
            best = (candidate, similarity)
        if low <= similarity <= high:
            break
        edits = max(1.0, edits * (1 - middle) / max(1 - similarity, 1e-3))
    return best


_STATE: dict = {}


def _init_worker(base: Base, seed: int, checked: frozenset) -> None:
    _STATE.update(base=base, seed=seed, checked=checked)


def _word_hashes(words: list[str]) -> np.ndarray:
    """Distinct 64-bit hashes of words (pandas' hash is the same in every process)."""
    return sorted_unique(pd.util.hash_array(np.array(words, dtype=object), categorize=False))


def _render(task: tuple[int, int, list[int]]) -> tuple[list[tuple], np.ndarray]:
    """The documents at some positions of one pass, what to plant, their words' hashes.

    Every draw comes from a generator seeded by (seed, pass, position), so the result does
    not depend on how positions are spread over processes.
    """
    pass_index, start, indices = task
    base, seed = _STATE["base"], _STATE["seed"]
    results, words = [], set()
    for offset, index in enumerate(indices):
        rng = np.random.default_rng([seed, pass_index, start + offset])
        text, kind = base.text(index), base.kind(index)
        if pass_index:
            members = base.members[base.kind_codes[index]]
            partner = base.text(int(members[rng.integers(0, len(members))]))
            text = make_variant(text, partner, rng, base.vocabulary)
        draw, planted = rng.random(), None
        if draw < EXACT_FRACTION:
            planted = int(rng.integers(1, 4))
        elif draw < EXACT_FRACTION + NEAR_FRACTION:
            near_text, similarity = near_duplicate(text, rng, base.vocabulary)
            planted = (near_text, len(near_text.split()), similarity)
            words.update(near_text.lower().split())
        words.update(text.lower().split())
        sample = shingle_hashes(text) if index in _STATE["checked"] else None
        results.append((index, kind, text, len(text.split()), planted, sample))
    return results, _word_hashes(list(words))


# ------------------------------------------------------------------------------ the output

class ShardWriter:
    """Documents to numbered shards of about ``shard_bytes``, ids in writing order."""

    def __init__(self, directory: Path, fmt: str, shard_bytes: int):
        self.directory, self.fmt, self.shard_bytes = directory, fmt, shard_bytes
        self.files: list[str] = []
        self.count = self.text_bytes = self._bytes_in_shard = 0
        self._handle = None
        self._rows: list[tuple[int, str, str]] = []

    def write(self, text: str, kind: str) -> int:
        if self._handle is None or self._bytes_in_shard >= self.shard_bytes:
            self._open()
        doc_id, self.count = self.count, self.count + 1
        size = len(text.encode("utf-8"))
        self.text_bytes += size
        self._bytes_in_shard += size
        if self.fmt == "jsonl":
            record = {"id": doc_id, "source": kind, "text": text}
            self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            self._rows.append((doc_id, kind, text))
            if len(self._rows) >= 8192:
                self._flush_rows()
        return doc_id

    def _open(self) -> None:
        self.close()
        name = f"shard-{len(self.files):05d}.{self.fmt}"
        self.files.append(name)
        self._bytes_in_shard = 0
        if self.fmt == "jsonl":
            # Open while the shard fills; closed when the next one starts or at the end.
            self._handle = open(self.directory / name, "w", encoding="utf-8")  # noqa: SIM115
        else:
            self._handle = pq.ParquetWriter(self.directory / name, _parquet_schema())

    def _flush_rows(self) -> None:
        if self._rows:
            ids, kinds, texts = zip(*self._rows, strict=True)
            self._handle.write_table(pa.table([pa.array(ids, pa.int64()), pa.array(kinds),
                                               pa.array(texts)], schema=_parquet_schema()))
            self._rows = []

    def close(self) -> None:
        if self._handle is not None:
            if self.fmt == "parquet":
                self._flush_rows()
            self._handle.close()
            self._handle = None


def _parquet_schema() -> pa.Schema:
    return pa.schema([("id", pa.int64()), ("source", pa.string()), ("text", pa.string())])


class Vocabulary:
    """Distinct word hashes seen so far, merged in batches to bound memory."""

    def __init__(self):
        self.seen, self.pending, self.pending_size = np.zeros(0, np.uint64), [], 0

    def add(self, hashes: np.ndarray) -> None:
        self.pending.append(hashes)
        self.pending_size += len(hashes)
        if self.pending_size > 4_000_000:
            self.size()

    def size(self) -> int:
        if self.pending:
            self.seen = sorted_unique(np.concatenate([self.seen, *self.pending]))
            self.pending, self.pending_size = [], 0
        return len(self.seen)


def _reuse_or_clear(directory: Path, arguments: dict, fingerprint: dict) -> dict | None:
    """The finished manifest if it matches; else clear what this builder wrote there."""
    manifest_path = directory / "_manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("generator") != GENERATOR:
            raise CorpusError(f"{manifest_path} was not written by this builder; "
                              "give an empty or new --out")
        if (manifest.get("complete") and manifest["arguments"] == arguments
                and manifest["sources"] == fingerprint
                and all((directory / name).exists() for name in manifest["files"])):
            return manifest
        for path in directory.iterdir():
            if _OWN_FILE.fullmatch(path.name):
                path.unlink()
        _remove_staging(directory / "_staging")
    elif directory.exists() and any(directory.iterdir()):
        raise CorpusError(f"{directory} holds files this builder did not write; "
                          "give an empty or new --out")
    directory.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps({"generator": GENERATOR, "complete": False,
                                         "arguments": arguments, "sources": fingerprint}))
    return None


def _remove_staging(staging: Path) -> None:
    if staging.exists():
        (staging / "base.txt").unlink(missing_ok=True)
        staging.rmdir()


def _summary(values: list[int]) -> dict:
    array = np.asarray(values, dtype=np.float64)
    return {"mean": round(float(array.mean()), 1), "median": float(np.median(array)),
            "p10": float(np.percentile(array, 10)), "p90": float(np.percentile(array, 90))}


# ------------------------------------------------------------------------------- build

def build(out, scale: int = 1, seed: int = 0, shard_mb: float = 64, size_mb: float | None = None,
          fmt: str = "jsonl", sources=None, jobs: int | None = None) -> dict:
    """Write the corpus to ``out`` (reused if already there) and return its manifest.

    Parameters
    ----------
    out
        Directory to write; new, empty, or one this function wrote before.
    scale
        1 writes the distinct base documents; ``k`` adds ``k - 1`` passes of variants.
    seed
        Everything drawn (document lengths, order, variants, duplicates) follows from it.
    shard_mb
        Size of text per shard, in MB.
    size_mb
        Stop once this many MB of distinct text are written (before ``scale`` passes if
        it comes first; more passes of variants if it needs them).
    fmt
        ``"jsonl"`` or ``"parquet"``.
    sources
        The text to read: a list of :class:`Source`, or ``{kind: [folders or files]}``;
        :func:`default_sources` if not given.
    jobs
        Processes that extract and transform text (default: the CPUs, at most 8).
    """
    if fmt not in ("jsonl", "parquet"):
        raise CorpusError(f"format {fmt!r} is not known; use 'jsonl' or 'parquet'")
    if scale < 1 or shard_mb <= 0 or (size_mb is not None and size_mb <= 0):
        raise CorpusError("scale must be at least 1 and shard_mb, size_mb above 0")
    started = time.perf_counter()
    directory = Path(out).resolve()
    sources = as_sources(sources)
    check_output(directory, sources)
    arguments = {"scale": scale, "seed": seed, "shard_mb": shard_mb, "size_mb": size_mb,
                 "format": fmt, "builder": _builder_digest()}
    files = list_files(sources, directory)
    fingerprint = fingerprint_files(files)
    manifest = _reuse_or_clear(directory, arguments, fingerprint)
    if manifest is not None:
        return manifest
    jobs = jobs or min(8, os.cpu_count() or 1)
    staging = directory / "_staging"
    if jobs == 1:
        base, base_stats = build_base(files, staging, seed, lambda f, xs, _: map(f, xs))
    else:
        with multiprocessing.Pool(jobs) as pool:
            base, base_stats = build_base(files, staging, seed, pool.imap)
    logger.info("base: %s", base_stats)
    checked = frozenset(base.kept[:VARIANT_CHECK_DOCUMENTS].tolist())
    if jobs == 1:
        _init_worker(base, seed, checked)
        written = _write(directory, base, arguments, map)
    else:
        with multiprocessing.Pool(jobs, _init_worker, (base, seed, checked)) as pool:
            written = _write(directory, base, arguments, pool.imap)
    _remove_staging(staging)
    usage = {who: resource.getrusage(who).ru_maxrss // 1024
             for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)}
    manifest = {"generator": GENERATOR, "complete": True, "arguments": arguments,
                "sources": fingerprint, "base": base_stats, **written,
                "seconds": round(time.perf_counter() - started, 1),
                "peak_rss_mb": {"main": usage[resource.RUSAGE_SELF],
                                "largest_worker": usage[resource.RUSAGE_CHILDREN]}}
    (directory / "_manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _builder_digest() -> str:
    """A digest of this builder's code: a corpus made by other code is not reused.

    Docstrings, comments and layout do not count: they change no document.
    """
    digest = hashlib.blake2b(digest_size=8)
    for module in (__file__, corpus_sources.__file__):
        tree = ast.parse(Path(module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        digest.update(ast.dump(tree).encode())
    return digest.hexdigest()


def _write(directory: Path, base: Base, arguments: dict, pool_map) -> dict:
    """Stream the passes to shards, planting duplicates up to two shards later."""
    seed, scale, size_mb = arguments["seed"], arguments["scale"], arguments["size_mb"]
    shard_bytes = int(arguments["shard_mb"] * MB)
    target = size_mb * MB if size_mb is not None else float("inf")
    passes = scale if size_mb is None else 10_000
    writer = ShardWriter(directory, arguments["format"], shard_bytes)
    mean_bytes = (base.offsets[-1] / len(base.offsets)) or 1
    spread = max(2, int(2 * shard_bytes / mean_bytes))
    placement = np.random.default_rng([seed, 1 << 20])
    pending: list = []  # heap of (position due, order, text, kind, words, record to complete)
    exact_groups, near_pairs, words = [], [], []
    per_source, distinct_per_source = Counter(), Counter()
    vocabulary, samples = Vocabulary(), {}
    distinct_bytes = 0

    def emit(text: str, kind: str, word_count: int) -> int:
        words.append(word_count)
        per_source[kind] += 1
        return writer.write(text, kind)

    def plant(text, kind, word_count, record) -> None:
        due = writer.count + int(placement.integers(1, spread))
        heapq.heappush(pending, (due, len(exact_groups) + len(near_pairs) + len(pending),
                                 text, kind, word_count, record))

    def release(until: float) -> None:
        while pending and pending[0][0] <= until:
            _, _, text, kind, word_count, record = heapq.heappop(pending)
            record.append(emit(text, kind, word_count))

    for pass_index in range(passes):
        if distinct_bytes >= target:
            break
        logger.info("pass %d of %s: %d documents, %.0f MB so far", pass_index + 1,
                    passes if size_mb is None else "until the size", writer.count,
                    writer.text_bytes / MB)
        order = np.random.default_rng([seed, pass_index]).permutation(base.kept)
        tasks = [(pass_index, start, order[start:start + CHUNK].tolist())
                 for start in range(0, len(order), CHUNK)]
        for results, tokens in pool_map(_render, tasks):
            vocabulary.add(tokens)
            for index, kind, text, word_count, planted, sample in results:
                if distinct_bytes >= target:
                    break
                release(writer.count)
                before = writer.text_bytes
                doc_id = emit(text, kind, word_count)
                distinct_bytes += writer.text_bytes - before
                distinct_per_source[kind] += 1
                if sample is not None:
                    samples.setdefault(index, []).append(sample)
                if isinstance(planted, int):
                    exact_groups.append([doc_id])
                    for _ in range(planted):
                        plant(text, kind, word_count, exact_groups[-1])
                elif planted is not None:
                    near_text, near_words, similarity = planted
                    near_pairs.append([round(similarity, 4), doc_id])
                    plant(near_text, kind, near_words, near_pairs[-1])
    release(float("inf"))
    writer.close()
    ground_truth = {"exact_groups": exact_groups,
                    "near_pairs": [pair[1:] for pair in near_pairs],
                    "near_jaccard": [pair[0] for pair in near_pairs]}
    (directory / "ground_truth.json").write_text(json.dumps(ground_truth))
    near_jaccard = [pair[0] for pair in near_pairs] or [0.0]
    variant_jaccard = [jaccard(a, b) for group in samples.values()
                       for i, a in enumerate(group) for b in group[i + 1:]]
    return {
        "documents": writer.count, "distinct_documents": sum(distinct_per_source.values()),
        "planted_exact_groups": len(exact_groups),
        "planted_exact_copies": sum(len(g) - 1 for g in exact_groups),
        "planted_near_duplicates": len(near_pairs),
        "near_jaccard": {"min": min(near_jaccard), "median": float(np.median(near_jaccard)),
                         "max": max(near_jaccard)},
        "variant_max_jaccard": round(max(variant_jaccard, default=0.0), 4),
        "text_megabytes": round(writer.text_bytes / MB, 1),
        "file_megabytes": round(sum((directory / f).stat().st_size for f in writer.files) / MB, 1),
        "vocabulary_size": vocabulary.size(),
        "words": _summary(words),
        "per_source": dict(sorted(per_source.items())),
        "distinct_per_source": dict(sorted(distinct_per_source.items())),
        "files": writer.files,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory to write")
    parser.add_argument("--scale", type=int, default=1, choices=(1, 4, 16))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shard-mb", type=float, default=64)
    parser.add_argument("--size-mb", type=float, default=None)
    parser.add_argument("--format", default="jsonl", choices=("jsonl", "parquet"))
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    manifest = build(args.out, args.scale, args.seed, args.shard_mb, args.size_mb,
                     args.format, jobs=args.jobs)
    print(json.dumps({k: v for k, v in manifest.items() if k != "files"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
