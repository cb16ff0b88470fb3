"""Dedup stages in pipelines, the per-stage table, and the HTML curation report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from curator_dask import AddId, JsonlReader, ParquetWriter, Pipeline
from curator_dask.dedup.stages import ExactDedup, FuzzyDedup
from curator_dask.executors import BatchExecutor, LocalExecutor, StreamingExecutor
from curator_dask.observe.report import format_stage_table, stage_rows, write_report
from curator_dask.observe.run_result import RunResult, StageMetrics
from curator_dask.sample import noisy_sample, write_shards
from curator_dask.stages.filters import ScoreFilter, WordCountFilter


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("sample")
    docs = noisy_sample(limit=60)
    write_shards(docs, root / "in", shards=3)
    return root, docs


def curation(root, out: str) -> Pipeline:
    return (Pipeline("curation")
            .add_stage(JsonlReader(str(root / "in"), blocksize="24KiB"))
            .add_stage(AddId())
            .add_stage(ExactDedup())
            .add_stage(ScoreFilter(WordCountFilter(min_words=20)))
            .add_stage(FuzzyDedup())
            .add_stage(ParquetWriter(str(root / out), mode="overwrite")))


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "streaming", "batch"])
def test_each_stage_row_counts_its_drops_under_its_reasons(sample, executor, request):
    root, docs = sample
    if executor != "local":
        request.getfixturevalue("client")
    make = {"local": LocalExecutor, "streaming": StreamingExecutor,
            "batch": BatchExecutor}[executor]
    pipeline = curation(root, f"out-{executor}")
    result = pipeline.run(make(cache_path=str(root / f"cache-{executor}"), progress=False))
    rows = {row.stage: row for row in stage_rows(result, pipeline.stages)}
    exact_copies = len(docs) - docs["text"].nunique()
    assert rows["exact_dedup"].dropped == {"exact_duplicate": exact_copies}
    assert (rows["exact_dedup"].docs_in, rows["exact_dedup"].docs_out) == \
        (len(docs), len(docs) - exact_copies)
    short = rows["word_count"].docs_in - rows["word_count"].docs_out
    assert rows["word_count"].dropped == ({"word_count": short} if short else {})
    fuzzy = rows["fuzzy_dedup"]
    assert fuzzy.dropped == {"fuzzy_duplicate": fuzzy.docs_in - fuzzy.docs_out}
    assert fuzzy.docs_in - fuzzy.docs_out == pipeline.stages[4].last_run.duplicate_documents > 0
    assert rows["write_parquet"].docs_out == len(pd.read_parquet(root / f"out-{executor}"))
    assert all(row.dropped == {} for row in rows.values()
               if row.stage in ("read_jsonl", "add_id", "write_parquet"))


@pytest.mark.slow
def test_dedup_stages_record_their_cluster_sizes(sample, client):
    root, docs = sample
    pipeline = curation(root, "out-sizes")
    pipeline.run(StreamingExecutor(cache_path=str(root / "cache-sizes"), progress=False))
    exact = pipeline.stages[2].last_run
    copies = docs["text"].value_counts()
    expected = copies[copies > 1].value_counts().sort_index()
    assert exact.cluster_sizes == {int(k): int(v) for k, v in expected.items()}
    assert exact.duplicate_groups == len(copies[copies > 1])
    fuzzy = pipeline.stages[4].last_run
    assert fuzzy.reason == "fuzzy_duplicate"
    assert fuzzy.duplicate_documents == sum((s - 1) * n for s, n in fuzzy.cluster_sizes.items())


@pytest.mark.slow
def test_report_is_one_offline_html_page_with_the_table_and_charts(sample, tmp_path):
    root, _ = sample
    pipeline = curation(root, "out-report")
    result = pipeline.run(LocalExecutor(cache_path=str(root / "cache-report"), progress=False))
    path = write_report(result, tmp_path / "nested" / "report.html", stages=pipeline.stages)
    page = Path(path).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "https://cdn.bokeh.org" not in page  # Bokeh's JavaScript is inlined
    for text in ("Documents after each stage", "Documents dropped, by reason",
                 "Duplicate cluster sizes: exact_dedup", "Duplicate cluster sizes: fuzzy_dedup",
                 "Time per stage", "exact_duplicate", "word_count", "write_parquet"):
        assert text in page, text


def test_reasons_named_after_no_stage_are_listed_apart():
    result = RunResult("p", "local", [
        StageMetrics("read_jsonl", "read", rows_in=5, rows_out=5),
        StageMetrics("keep", "process", rows_in=5, rows_out=3),
        StageMetrics("write_parquet", "write", rows_in=3, rows_out=3),
    ], dropped={"reader.bad_json_line": 2, "keep.short": 1, "mystery": 1})
    rows = stage_rows(result)
    assert [(r.stage, r.dropped) for r in rows] == [
        ("read_jsonl", {"reader.bad_json_line": 2}), ("keep", {"keep.short": 1, "keep": 1}),
        ("write_parquet", {}), ("(other)", {"mystery": 1})]
    assert "reader.bad_json_line = 2" in format_stage_table(rows)


def _summary_result() -> RunResult:
    return RunResult("p", "local", [
        StageMetrics("read_jsonl", "read", rows_in=1200, rows_out=1200, busy_seconds=0.5),
        StageMetrics("a_stage_with_a_rather_long_name", "process", rows_in=1200, rows_out=87,
                     busy_seconds=12.25),
        StageMetrics("write_parquet", "write", rows_in=87, rows_out=87, busy_seconds=0.1),
    ], dropped={"a_stage_with_a_rather_long_name": 1113})


def test_the_stage_table_right_aligns_numbers_and_says_seconds_are_summed_busy_time():
    lines = format_stage_table(stage_rows(_summary_result())).splitlines()
    header = lines[0]
    assert "busy s (sum)" in header and "seconds" not in header
    body = {line.split()[0]: line for line in lines[2:]}
    # Right-aligned: the last digit of each number sits under the end of its header.
    for column, values in (("docs in", ("1,200", "1,200", "87")),
                           ("busy s (sum)", ("0.50", "12.25", "0.10"))):
        end = header.index(column) + len(column)
        for stage, value in zip(body, values, strict=True):
            assert body[stage][end - len(value):end] == value, (column, stage)


def test_the_report_uses_the_page_width_and_titles_its_charts_in_full(tmp_path):
    import html
    import json
    import re

    page = Path(write_report(_summary_result(), tmp_path / "r.html")).read_text(encoding="utf-8")
    documents = re.search(r'<script type="application/json" id="[^"]+">\s*(.*?)\s*</script>',
                          page, re.S).group(1)
    models = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "name" in node:
                models.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(documents))
    laid_out = [m for m in models if m["name"] in ("Column", "Div", "Figure")]
    assert laid_out and all(m.get("attributes", {}).get("sizing_mode") == "stretch_width"
                            for m in laid_out)
    assert not [m for m in laid_out if "width" in m.get("attributes", {})]
    # Titles are headings above the charts (HTML wraps them), not text drawn in a plot.
    titles = [m["attributes"]["text"] for m in models
              if m["name"] == "Title" and m.get("attributes", {}).get("text")]
    assert titles == []
    headings = [html.unescape(m["attributes"]["text"]) for m in models if m["name"] == "Div"]
    assert "<h3>Time per stage (seconds in its tasks, summed over workers)</h3>" in headings
    assert sum(m["name"] == "Figure" for m in laid_out) == 3
