"""The benchmark corpus builder: distinct documents, planted duplicates and their truth.

A tiny corpus is built from a temporary folder of real text (the bundled Python-docs
sample, written as Markdown, gzipped text, HTML and troff manual pages), and every claim
of the builder is checked against the files it wrote, with similarity computed here from
the strings themselves.
"""

from __future__ import annotations

import gzip
import html
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix

from curator_dask.errors import CuratorError
from curator_dask.sample import sample_documents

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from corpus_sources import file_text, shingle_hashes, split_documents
from diverse_corpus import build


def char_grams(text: str, width: int = 24) -> set[str]:
    return {text[i:i + width] for i in range(max(1, len(text) - width + 1))}


def string_jaccard(a: str, b: str) -> float:
    grams_a, grams_b = char_grams(a), char_grams(b)
    return len(grams_a & grams_b) / len(grams_a | grams_b)


def troff_page(title: str, text: str) -> str:
    """A manual page whose every text line starts with ``\\&`` (so none reads as a macro)."""
    lines = [("\\&" + line.replace("\\", "\\e")) if line.strip() else ".PP"
             for line in text.split("\n")]
    return (f'.\\" generated\n.TH {title.upper()} 1\n.SH NAME\n\\fB{title}\\fR \\- a page\n'
            ".SH DESCRIPTION\n" + "\n".join(lines) + "\n")


def write_sources(root: Path) -> dict[str, list[Path]]:
    """The sample's pages as files of four formats, grouped so that some must be split."""
    pages = sample_documents()["text"].tolist()[:400]
    prose, web, man = root / "prose", root / "web", root / "man"
    for folder in (prose, web, man):
        folder.mkdir(parents=True)
    rng = np.random.default_rng(5)
    start, number = 0, 0
    while start < len(pages):
        group = pages[start:start + int(rng.integers(1, 9))]
        start += len(group)
        number += 1
        text = "\n\n".join(group)
        if number % 4 == 0:
            paragraphs = "".join(f"<p>{html.escape(p)}</p>" for p in text.split("\n\n"))
            (web / f"page{number}.html").write_text(
                f"<html><head><style>p {{color: red}}</style></head><body>{paragraphs}</body>"
                "</html>")
        elif number % 4 == 1:
            (man / f"page{number}.1.gz").write_bytes(
                gzip.compress(troff_page(f"page{number}", text).encode()))
        elif number % 4 == 2:
            (prose / f"page{number}.txt.gz").write_bytes(gzip.compress(text.encode()))
        else:
            (prose / f"page{number}.md").write_text(text)
    (prose / "style.css").write_text("p { color: red; }\n" * 200)  # not prose: never read
    return {"prose": [prose], "web": [web], "man": [man]}


def read_corpus(directory: Path) -> dict[int, dict]:
    records = {}
    for shard in sorted(directory.glob("shard-*")):
        if shard.suffix == ".parquet":
            rows = pq.read_table(shard).to_pylist()
        else:
            rows = [json.loads(line) for line in shard.read_text(encoding="utf-8").splitlines()]
        for row in rows:
            assert row["id"] not in records, f"id {row['id']} written twice"
            records[row["id"]] = row
    return records


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("diverse")
    sources = write_sources(root / "sources")
    manifest = build(root / "out", scale=2, seed=3, shard_mb=0.1, sources=sources, jobs=1)
    truth = json.loads((root / "out" / "ground_truth.json").read_text())
    return root, sources, manifest, truth, read_corpus(root / "out")


@pytest.mark.slow
def test_ids_are_unique_and_the_manifest_counts_what_was_written(corpus):
    _, sources, manifest, _, records = corpus
    assert sorted(records) == list(range(len(records)))
    assert manifest["documents"] == len(records)
    assert manifest["per_source"] == dict(Counter(r["source"] for r in records.values()))
    assert set(manifest["per_source"]) == set(sources)
    assert len(manifest["files"]) > 1
    assert manifest["distinct_documents"] + manifest["planted_exact_copies"] + \
        manifest["planted_near_duplicates"] == len(records)
    assert all(".css" not in r["text"] and "color: red" not in r["text"]
               for r in records.values())


@pytest.mark.slow
def test_exact_groups_hold_equal_texts_and_near_pairs_similar_unequal_ones(corpus):
    _, _, manifest, truth, records = corpus
    assert len(truth["exact_groups"]) == manifest["planted_exact_groups"] > 0
    for group in truth["exact_groups"]:
        assert 2 <= len(group) <= 4
        assert len({records[i]["text"] for i in group}) == 1
    assert len(truth["near_pairs"]) == manifest["planted_near_duplicates"] > 0
    for (original, near), recorded in zip(truth["near_pairs"], truth["near_jaccard"], strict=True):
        a, b = records[original]["text"], records[near]["text"]
        assert a != b
        similarity = string_jaccard(a, b)
        assert similarity == pytest.approx(recorded, abs=1e-3)
        assert 0.8 <= similarity <= 0.9
    # Copies are spread out: not every copy sits next to its original.
    gaps = [max(g) - min(g) for g in truth["exact_groups"]]
    assert max(gaps) > 10


def pairwise_jaccard(texts: list[str]) -> np.ndarray:
    """Character 24-gram Jaccard of every pair of texts (0 on the diagonal), exactly.

    A documents x grams incidence matrix times its transpose counts the grams each pair
    shares.
    """
    numbers: dict[str, int] = {}
    rows, columns = [], []
    for row, text in enumerate(texts):
        for gram in char_grams(text):
            rows.append(row)
            columns.append(numbers.setdefault(gram, len(numbers)))
    incidence = csr_matrix((np.ones(len(rows), np.int32), (rows, columns)),
                           shape=(len(texts), len(numbers)))
    shared = (incidence @ incidence.T).toarray()
    sizes = np.diag(shared)
    similarity = shared / (sizes[:, None] + sizes[None, :] - shared)
    np.fill_diagonal(similarity, 0.0)
    return similarity


@pytest.mark.slow
def test_documents_outside_the_planted_groups_are_distinct(corpus):
    _, _, _, truth, records = corpus
    copies = {i for group in truth["exact_groups"] for i in group[1:]}
    copies |= {near for _, near in truth["near_pairs"]}
    distinct = [records[i]["text"] for i in records if i not in copies]
    assert len(set(distinct)) == len(distinct)
    # No pair the near-duplicate threshold of fuzzy deduplication would join ...
    assert pairwise_jaccard(distinct).max() < 0.8
    # ... while the planted near duplicates are found by the same measure.
    near = [records[i]["text"] for pair in truth["near_pairs"][:5] for i in pair]
    assert pairwise_jaccard(near).max() >= 0.8


@pytest.mark.slow
def test_same_seed_same_corpus_other_seed_other_corpus_and_reuse(corpus, tmp_path):
    root, sources, manifest, truth, records = corpus
    again = build(tmp_path / "again", scale=2, seed=3, shard_mb=0.1, sources=sources, jobs=1)
    assert read_corpus(tmp_path / "again") == records
    assert json.loads((tmp_path / "again" / "ground_truth.json").read_text()) == truth
    assert {k: again[k] for k in ("documents", "vocabulary_size", "files")} == \
        {k: manifest[k] for k in ("documents", "vocabulary_size", "files")}
    other = build(tmp_path / "other", scale=2, seed=4, shard_mb=0.1, sources=sources, jobs=1)
    assert read_corpus(tmp_path / "other") != records
    assert other["arguments"]["seed"] == 4
    first_shard = root / "out" / manifest["files"][0]
    written_at = first_shard.stat().st_mtime_ns
    assert build(root / "out", scale=2, seed=3, shard_mb=0.1, sources=sources) == manifest
    assert first_shard.stat().st_mtime_ns == written_at


@pytest.mark.slow
def test_more_scale_adds_distinct_documents_and_vocabulary(corpus, tmp_path):
    _, sources, manifest, _, _ = corpus
    base = build(tmp_path / "base", scale=1, seed=3, shard_mb=0.1, sources=sources, jobs=1)
    assert base["distinct_documents"] == manifest["base"]["distinct"]
    assert manifest["distinct_documents"] == 2 * base["distinct_documents"]
    assert manifest["vocabulary_size"] > base["vocabulary_size"]
    assert manifest["variant_max_jaccard"] < 0.6


@pytest.mark.slow
def test_parquet_holds_the_same_records_as_jsonl(corpus, tmp_path):
    _, sources, _, _, _ = corpus
    build(tmp_path / "jsonl", scale=1, seed=1, sources=sources, jobs=1, size_mb=0.2)
    build(tmp_path / "parquet", scale=1, seed=1, sources=sources, jobs=1, size_mb=0.2,
          fmt="parquet")
    assert read_corpus(tmp_path / "parquet") == read_corpus(tmp_path / "jsonl")
    assert 0.2e6 <= sum(len(r["text"].encode()) for r in read_corpus(tmp_path / "jsonl")
                        .values()) < 0.4e6


def test_a_rebuild_with_other_arguments_leaves_nothing_of_the_last(tmp_path):
    sources = {"prose": [tmp_path / "sources"]}
    (tmp_path / "sources").mkdir()
    for number, text in enumerate(sample_documents()["text"].tolist()[:60]):
        (tmp_path / "sources" / f"page{number}.txt").write_text(text)
    out = tmp_path / "out"
    first = build(out, seed=1, shard_mb=0.01, sources=sources, jobs=1)
    second = build(out, seed=2, shard_mb=1, sources=sources, jobs=1)
    assert len(first["files"]) > len(second["files"]) == 1
    assert sorted(p.name for p in out.iterdir()) == sorted(
        second["files"] + ["_manifest.json", "ground_truth.json"])
    assert len(read_corpus(out)) == second["documents"]


def test_output_that_is_not_ours_or_overlaps_a_source_is_refused(tmp_path):
    sources = {"prose": [tmp_path / "sources"]}
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "a.txt").write_text("word " * 100)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("someone else's")
    with pytest.raises(CuratorError, match="did not write"):
        build(tmp_path / "busy", sources=sources, jobs=1)
    assert (tmp_path / "busy" / "notes.txt").read_text() == "someone else's"
    for inside in (tmp_path / "sources", tmp_path / "sources" / "out", tmp_path):
        with pytest.raises(CuratorError, match="overlaps"):
            build(inside, sources=sources, jobs=1)


def test_a_manual_page_becomes_plain_text(tmp_path):
    page = tmp_path / "tool.1.gz"
    page.write_bytes(gzip.compress(
        b'.TH TOOL 1\n.SH NAME\ntool \\- do a thing\n.SH OPTIONS\n.TP\n'
        b'.BR \\-v ", " \\-\\-verbose\n'
        b"Say \\fImore\\fR about \\(lqit\\(rq.\n.de XX\n.ft B\n..\n"))
    text = file_text(str(page))
    assert "tool - do a thing" in text
    assert "-v, --verbose" in text
    assert "Say more about \u201cit\u201d." in text
    assert "\\f" not in text and ".TH" not in text and ".ft" not in text


def test_perl_documentation_becomes_plain_text_and_code_is_left_out(tmp_path):
    module = tmp_path / "Tool.pm"
    module.write_text("package Tool;\nsub run { return 1 }\n\n=head1 NAME\n\nTool - do "
                      "B<one> thing with I<C<$x>> and E<lt>tagsE<gt>, see L<the guide|Guide>.\n"
                      "\n=cut\n\nsub hidden { 2 }\n")
    text = file_text(str(module))
    assert "Tool - do one thing with $x and <tags>, see the guide." in text
    assert "NAME" in text
    assert "sub run" not in text and "sub hidden" not in text


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\r"), min_size=1,
                        max_size=60).map(str.strip).filter(bool), min_size=1, max_size=40),
       st.integers(0, 2**32 - 1))
def test_splitting_keeps_every_paragraph_in_order(paragraphs, seed):
    paragraphs = [" ".join(p.split()) for p in paragraphs]
    paragraphs = [p for p in paragraphs if p]
    documents = split_documents("\n\n".join(paragraphs), np.random.default_rng(seed))
    assert "\n\n".join(documents) == "\n\n".join(paragraphs)


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=0, max_size=300))
def test_shingle_hashes_count_the_distinct_character_24_grams(text):
    expected = len(char_grams(text)) if text else 0
    assert len(shingle_hashes(text)) == expected
