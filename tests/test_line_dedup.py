"""Line, paragraph and sentence-span dedup: what it removes, what it keeps byte for byte,
what it counts, checked against a plain Python count of spans."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset, JsonlReader, ParquetWriter, Pipeline, StreamingExecutor
from curator_dask.dedup import LineDedup
from curator_dask.dedup.lines import LineDedupParameterError
from curator_dask.dedup.spans import cut

pytestmark = pytest.mark.usefixtures("sync_scheduler")


def dataset(texts, npartitions: int = 2, **columns) -> DocumentDataset:
    df = pd.DataFrame({"id": np.arange(len(texts), dtype=np.int64), "text": texts, **columns})
    return DocumentDataset.from_pandas(df, npartitions=min(npartitions, max(len(texts), 1)))


# -- a reference in plain Python -------------------------------------------------------------

def reference(texts, *, max_occurrences: int, keep: str, min_chars: int):
    """Line dedup written the obvious way: lines with their newline, counted in input order."""
    norm = lambda line: " ".join(line.split()).lower()  # noqa: E731
    docs = [re.findall(r"[^\n]*\n|[^\n]+", t) for t in texts]
    counts = Counter(norm(line) for lines in docs for line in lines
                     if len(norm(line)) >= min_chars)
    seen: Counter = Counter()
    out, emptied, removed = [], 0, 0
    for lines in docs:
        kept = []
        for line in lines:
            key = norm(line)
            if len(key) < min_chars:
                kept.append(line)
                continue
            seen[key] += 1
            first = seen[key] == 1
            if counts[key] > max_occurrences and (keep == "none" or not first):
                removed += 1
            else:
                kept.append(line)
        lost = len(kept) < len(lines)
        if lost and not any(len(norm(line)) >= min_chars for line in kept):
            emptied += 1
            out.append(None)
        else:
            out.append("".join(kept))
    return out, emptied, removed


lines = st.sampled_from(["Home", "home ", "About us", "Menu\tbar", "a story", "Another one",
                         "", "  ", "ok", "Z"])
documents = st.lists(lines, min_size=0, max_size=6).map(
    "\n".join) | st.lists(lines, max_size=5).map(lambda ls: "\n".join(ls) + "\n")


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents, min_size=1, max_size=12), st.integers(1, 3),
       st.sampled_from(["first", "none"]), st.integers(1, 4), st.integers(1, 3))
def test_line_dedup_equals_a_plain_count_of_lines(texts, max_occurrences, keep, min_chars,
                                                  npartitions):
    stage = LineDedup(max_occurrences=max_occurrences, keep=keep, min_chars=min_chars)
    out = stage(dataset(texts, npartitions))
    expected, emptied, removed = reference(texts, max_occurrences=max_occurrences, keep=keep,
                                           min_chars=min_chars)
    got = out.df.compute().sort_values("id")
    assert got["text"].tolist() == [t for t in expected if t is not None]
    assert got["id"].tolist() == [i for i, t in enumerate(expected) if t is not None]
    assert out.dropped_counts() == ({"line_dedup.emptied": emptied} if emptied else {})
    assert out.counters().get("line_dedup.removed_lines", 0) == removed


def test_what_is_not_removed_keeps_its_bytes_and_other_columns(tmp_path):
    texts = ["Cookie banner\r\nA unique\tstory \u00e9\n\n", None, "cookie BANNER\r\n", "x"]
    ds = dataset(texts, 2, score=pd.array([1, None, 3, 4], dtype="Int64"))
    got = LineDedup()(ds).df.compute()
    assert got["text"].tolist()[0] == texts[0]
    assert got["text"].isna().tolist() == [False, True, False]
    assert got["score"].tolist()[:1] == [1] and got["score"].dtype == "Int64"
    # The second banner, its "\r\n" counted as whitespace, went; the document was emptied.
    assert got["id"].tolist() == [0, 1, 3]


def test_c4_style_three_sentence_spans(tmp_path):
    shared = "This site uses cookies. By using it you agree. Read our policy. "
    texts = ["Intro here. " + shared + "My own words follow.",
             shared + "Something else entirely.",
             "Read our policy. Nothing shared here at all. Truly."]
    out = LineDedup(unit="sentence")(dataset(texts))
    got = out.df.compute()["text"].tolist()
    assert got[0] == texts[0]  # the first occurrence stays
    assert got[1] == "Something else entirely."
    assert got[2] == texts[2]  # one shared sentence is not a three-sentence span
    assert out.counters() == {"line_dedup.removed_sentences": 3}


def test_repeated_paragraphs_are_removed_and_empty_documents_dropped():
    footer = "Contact us\nat the address\n"
    texts = ["Story one.\n\n" + footer, footer, "Story two.\n\n" + footer + "\n"]
    stage = LineDedup(unit="paragraph", keep="none", name="footers")
    out = stage(dataset(texts))
    assert out.df.compute()["text"].tolist() == ["Story one.\n\n", "Story two.\n\n"]
    assert out.dropped_counts() == {"footers.emptied": 1}
    assert out.counters() == {"footers.removed_paragraphs": 3}
    assert stage.last_run.repeated_spans == 1 and stage.last_run.cluster_sizes == {3: 1}


def test_max_occurrences_leaves_spans_seen_that_often():
    texts = ["common\nmine"] * 3 + ["common\nrare\n"] * 2
    out = LineDedup(max_occurrences=4, keep="none")(dataset(texts, 3))
    assert out.df.compute()["text"].tolist() == ["mine"] * 3 + ["rare\n"] * 2


def test_segments_cover_each_document_exactly():
    texts = pd.Series(["a\nb", "", "\n\n", "One. Two?! (Three.) Four", "x\r\n\ty"])
    for unit in ("line", "paragraph", "sentence"):
        parts = cut(texts, unit)
        rebuilt = [""] * len(texts)
        for segment, doc in zip(parts.segments.to_pylist(), parts.doc, strict=True):
            rebuilt[doc] += segment
        assert rebuilt == texts.tolist(), unit


def test_bad_parameters_are_refused():
    for bad in ({"unit": "word"}, {"keep": "last"}, {"max_occurrences": 0}, {"span": 0},
                {"min_chars": True}):
        with pytest.raises(LineDedupParameterError, match=next(iter(bad))):
            LineDedup(**bad)


@pytest.mark.slow
def test_in_a_pipeline_on_a_cluster(client, tmp_path):
    rows = [{"text": f"Menu\nstory {i}\nFooter line"} for i in range(40)]
    write_jsonl(tmp_path / "raw" / "a.jsonl", rows)
    pipeline = (Pipeline("lines").add_stage(JsonlReader(str(tmp_path / "raw"), blocksize=600))
                .add_stage(LineDedup())
                .add_stage(ParquetWriter(str(tmp_path / "out"))))
    result = pipeline.run(StreamingExecutor(client=client,
                                             cache_path=str(tmp_path / "cache")))
    out = pd.read_parquet(tmp_path / "out")
    assert len(out) == 40
    assert sorted(out["text"])[:2] == ["Menu\nstory 0\nFooter line", "story 1\n"]
    assert result.counters["line_dedup.removed_lines"] == 78


whitespace_and_letters = st.text(alphabet=st.sampled_from(
    list(" \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
         "\u200bab\u00e9Z")), max_size=12)


@given(st.lists(whitespace_and_letters, min_size=1, max_size=30))
def test_spans_compare_as_python_splits_and_lowers_them(texts):
    import pyarrow as pa

    from curator_dask.dedup.spans import span_hashes

    as_is, chars = span_hashes(pa.array(texts, pa.large_string()))
    python = [" ".join(t.split()).lower() for t in texts]
    normalised, _ = span_hashes(pa.array(python, pa.large_string()), lowercase=False)
    assert (as_is == normalised).all()
    assert chars.tolist() == [len(t) for t in python]
