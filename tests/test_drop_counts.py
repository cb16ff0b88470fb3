"""Every input document ends in the output exactly once or in a drop count with its
reason, for random pipelines of filters, on every path a partition can take.

Hypothesis draws a corpus (documents of a few words, some empty, spread over files) and
a pipeline: filters that drop by a rule on the document's number or words, some of
them batching several partitions into one call, some that may empty whole partitions, a
filter from the catalog, a function mapped over the partitions, and, sometimes, a
whole-dataset stage in the middle; between them, operations on the dataset that drop
nothing (persist, repartition, a column set in place on ``ds.df``). The expected output
and counts are worked out here from the documents alone, one rule at a time; then the
pipeline runs interactively (stages applied to a ``DocumentDataset``, written with
``to_parquet``), and on the ``LocalExecutor`` (the executors' steps and task bodies, in
this process), and both must give exactly that.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd
import pytest
from conftest import write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset, ProcessingStage
from curator_dask.dropped import record_dropped
from curator_dask.executors import LocalExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.base import WholeDatasetStage
from curator_dask.stages.filters import ScoreFilter, WordCountFilter
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter


@dataclass(frozen=True)
class Rule:
    """Drop a document when its number is a multiple of ``modulus`` (offset by
    ``offset``), counted under the rule's name."""

    modulus: int
    offset: int
    batch_size: int

    @property
    def name(self) -> str:
        return f"mod{self.modulus}_{self.offset}_b{self.batch_size}"

    def keeps(self, doc: dict) -> bool:
        return (doc["n"] + self.offset) % self.modulus != 0


class RuleFilter(ProcessingStage):
    def __init__(self, rule: Rule):
        self.rule = rule
        self.name = rule.name
        self.batch_size = rule.batch_size

    def process(self, df):
        keep = (df["n"] + self.rule.offset) % self.rule.modulus != 0
        return record_dropped(df[keep.to_numpy()], self.name, int((~keep).sum()))


def drop_by_rule(df, rule: Rule, name: str):
    """The rule as a plain function of a partition (``DocumentDataset.map_partitions``)."""
    keep = (df["n"] + rule.offset) % rule.modulus != 0
    return record_dropped(df[keep.to_numpy()], name, int((~keep).sum()))


@dataclass(frozen=True)
class Mapped:
    """A rule mapped over the partitions as a function, not a stage."""

    rule: Rule

    @property
    def name(self) -> str:
        return "mapped_" + self.rule.name

    def keeps(self, doc: dict) -> bool:
        return self.rule.keeps(doc)


@dataclass(frozen=True)
class Operation:
    """An operation on the dataset that drops nothing (the interactive path only)."""

    kind: str
    name = "none"

    def keeps(self, doc: dict) -> bool:
        return True


def operate(ds: DocumentDataset, operation: Operation) -> DocumentDataset:
    if operation.kind == "persist":
        return ds.persist()
    if operation.kind == "repartition":
        return ds.repartition(npartitions=2)
    ds.df["marked"] = 1  # in place, as NeMo Curator scripts do
    return ds


@dataclass(frozen=True)
class Words:
    """The catalog's word count filter, worked out here by splitting on whitespace."""

    least: int

    @property
    def name(self) -> str:
        return "word_count"

    def keeps(self, doc: dict) -> bool:
        return len(doc["text"].split()) >= self.least


@dataclass(frozen=True)
class Barrier:
    """A whole-dataset stage that keeps the first document of each text, counting the
    rest under its name."""

    @property
    def name(self) -> str:
        return "same_text"


class KeepFirstOfEachText(WholeDatasetStage):
    name = "same_text"

    def fingerprint(self) -> dict:
        return {"stage": "KeepFirstOfEachText", "params": {}}

    def run(self, ds, cache_path):
        df = ds.df.compute().sort_values("n")
        keep = ~df["text"].duplicated()
        kept = record_dropped(df[keep.to_numpy()], self.name, int((~keep).sum()))
        return DocumentDataset.from_pandas(kept, npartitions=2)


def stage_for(step):
    if isinstance(step, Rule):
        return RuleFilter(step)
    if isinstance(step, Mapped):
        return RuleFilter(step.rule).with_(name=step.name)
    if isinstance(step, Words):
        return ScoreFilter(WordCountFilter(min_words=step.least, max_words=10**6))
    return KeepFirstOfEachText()


def expected(corpus: list[dict], steps) -> tuple[list[int], Counter]:
    """The numbers of the documents that stay, and the drops by reason, step by step."""
    kept, dropped = list(corpus), Counter()
    for step in steps:
        if isinstance(step, Barrier):
            seen, survivors = set(), []
            for doc in sorted(kept, key=lambda d: d["n"]):
                if doc["text"] in seen:
                    dropped[step.name] += 1
                else:
                    seen.add(doc["text"])
                    survivors.append(doc)
            kept = survivors
            continue
        survivors = [doc for doc in kept if step.keeps(doc)]
        if len(survivors) < len(kept):
            dropped[step.name] += len(kept) - len(survivors)
        kept = survivors
    return sorted(doc["n"] for doc in kept), +dropped


WORDS = st.sampled_from(["alpha", "beta", "gamma", "delta"])
TEXTS = st.lists(WORDS, max_size=5).map(" ".join)
CORPORA = st.lists(TEXTS, min_size=1, max_size=60).map(
    lambda texts: [{"n": i, "text": text} for i, text in enumerate(texts)])
RULES = st.builds(Rule, modulus=st.integers(1, 5), offset=st.integers(0, 4),
                  batch_size=st.integers(1, 3))
OPERATIONS = st.sampled_from(["persist", "repartition", "assign"]).map(Operation)
STEPS = st.lists(st.one_of(RULES, st.builds(Words, least=st.integers(0, 4)),
                           RULES.map(Mapped), OPERATIONS),
                 min_size=1, max_size=5)
PIPELINES = st.tuples(STEPS, st.booleans(), st.integers(0, 4)).map(
    lambda t: [*t[0][:t[2]], Barrier(), *t[0][t[2]:]] if t[1] else t[0])


def unique_names(steps) -> list:
    """Two rules with one name would merge their counts; keep the first of each."""
    seen, out = set(), []
    for step in steps:
        if isinstance(step, Operation) or step.name not in seen:
            seen.add(step.name)
            out.append(step)
    return out


def write_corpus(root, corpus: list[dict], files: int) -> str:
    for f in range(files):
        write_jsonl(root / "in" / f"part{f}.jsonl", corpus[f::files] or [])
    return str(root / "in")


def numbers(path) -> list[int]:
    return sorted(pd.read_parquet(str(path))["n"].tolist())


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=CORPORA, steps=PIPELINES.map(unique_names), files=st.integers(1, 4),
       blocksize=st.sampled_from(["64B", "256B", "1KiB"]))
def test_every_document_is_written_once_or_counted(tmp_path_factory, corpus, steps, files,
                                                   blocksize):
    root = tmp_path_factory.mktemp("drops")
    source = write_corpus(root, corpus, files)
    kept, dropped = expected(corpus, steps)

    # Interactively: each stage applied to the dataset, then written.
    ds = DocumentDataset.read_jsonl(source, blocksize=blocksize)
    for step in steps:
        if isinstance(step, Operation):
            ds = operate(ds, step)
        elif isinstance(step, Mapped):
            ds = ds.map_partitions(drop_by_rule, step.rule, step.name, meta=ds.df._meta)
        else:
            ds = stage_for(step)(ds)
    written = ds.to_parquet(str(root / "interactive"))
    assert numbers(root / "interactive") == kept
    assert written.dropped == ds.dropped_counts() == dict(dropped)
    assert written.rows + sum(written.dropped.values()) == len(corpus)

    # In a pipeline: the executors' reads, stage tasks, batches, barriers and writes.
    pipeline = Pipeline("drops").add_stage(JsonlReader(source, blocksize=blocksize))
    for step in steps:
        if not isinstance(step, Operation):
            pipeline.add_stage(stage_for(step))
    result = pipeline.add_stage(ParquetWriter(str(root / "pipeline"))).run(
        LocalExecutor(progress=False, cache_path=str(root / "cache")))
    assert numbers(root / "pipeline") == kept
    assert result.dropped == dict(dropped)
    assert result.rows + sum(result.dropped.values()) == len(corpus)
