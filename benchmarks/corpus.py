"""Real text at benchmark scale: the bundled Python-docs sample, replicated to N MB.

The sample (818 pages of the Python documentation, 0.9 MB) is copied as many times as it
takes to reach the size asked for. Each copy is a different set of documents with its
own ids: one word in five of every page is replaced by a word drawn from the sample's own
words (so the word and character statistics stay those of the real text), which puts
copies of one page far apart (character 24-gram Jaccard about 0.2, never an LSH
candidate at 20 bands x 13). On top of that each copy plants what a crawl holds: 8% of
its pages get one to three exact copies and 5% one near duplicate (one word in 60
edited, Jaccard about 0.85), spread over the shards.

Files: ``shard-0000.jsonl`` ... of about 8 MB, each line ``{"id", "source", "text"}``
with ``id`` unique over the corpus. A ``_manifest.json`` records what was written; an
existing directory with the same size and seed is reused.

    python benchmarks/corpus.py --size-mb 100 --out /tmp/real-100mb
"""

from __future__ import annotations

import argparse
import json
import shutil
import string
import sys
from pathlib import Path

import numpy as np

MB = 1_000_000
SHARD_BYTES = 8 * MB
REPLACE_EVERY = 5
EXACT_FRACTION, NEAR_FRACTION = 0.08, 0.05


def _sample():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from curator_dask.sample import sample_documents

    return sample_documents()


def _near_duplicate(words: list[str], rng: np.random.Generator) -> str:
    words = list(words)
    edits = max(1, len(words) // 60)
    for position in sorted(rng.choice(len(words), size=min(edits, len(words)),
                                      replace=False), reverse=True):
        if rng.random() < 0.5:
            del words[position]
        else:
            words[position] = "".join(rng.choice(list(string.ascii_lowercase), size=6))
    return " ".join(words)


def build(directory: Path, size_mb: int, seed: int = 0) -> dict:
    """Write ~``size_mb`` MB of JSONL shards to ``directory`` (reused if already there)."""
    manifest_path = directory / "_manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("size_mb") == size_mb and manifest.get("seed") == seed:
            return manifest
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    sample = _sample()
    pages = [t.split(" ") for t in sample["text"]]
    sources = sample["source"].tolist()
    vocabulary = np.array([w for page in pages for w in page], dtype=object)
    rng = np.random.default_rng(seed)
    written = documents = exact = near = 0
    shard, out, shard_bytes = 0, None, 0
    copy = 0
    while written < size_mb * MB:
        docs: list[tuple[str, str]] = []
        for words, source in zip(pages, sources, strict=True):
            replaced = rng.random(len(words)) < 1 / REPLACE_EVERY
            picks = vocabulary[rng.integers(0, len(vocabulary), int(replaced.sum()))]
            words = np.array(words, dtype=object)
            words[replaced] = picks
            words = words.tolist()
            text = " ".join(words)
            docs.append((text, source))
            if rng.random() < EXACT_FRACTION:
                for _ in range(int(rng.integers(1, 4))):
                    docs.append((text, source))
                    exact += 1
            if rng.random() < NEAR_FRACTION:
                docs.append((_near_duplicate(words, rng), source))
                near += 1
        order = rng.permutation(len(docs))
        lines = []
        for i in order:
            text, source = docs[i]
            lines.append(json.dumps({"id": documents, "source": f"copy{copy}/{source}",
                                     "text": text}, ensure_ascii=False))
            documents += 1
        chunk = ("\n".join(lines) + "\n").encode("utf-8")
        for start in range(0, len(lines), 200):  # shards end at document boundaries
            piece = ("\n".join(lines[start:start + 200]) + "\n").encode("utf-8")
            if out is None or shard_bytes >= SHARD_BYTES:
                if out is not None:
                    out.close()
                out = open(directory / f"shard-{shard:04d}.jsonl", "wb")  # noqa: SIM115 (rotated)
                shard, shard_bytes = shard + 1, 0
            out.write(piece)
            shard_bytes += len(piece)
        written += len(chunk)
        copy += 1
    out.close()
    manifest = {"size_mb": size_mb, "seed": seed, "bytes": written, "documents": documents,
                "copies_of_sample": copy, "exact_copies_planted": exact,
                "near_duplicates_planted": near, "files": shard}
    manifest_path.write_text(json.dumps(manifest))
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    print(json.dumps(build(Path(args.out), args.size_mb, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
