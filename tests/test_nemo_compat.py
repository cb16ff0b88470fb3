"""NeMo Curator code runs: every row of the table in docs/migrating.md is run here.

The table is the specification: a row's NeMo Curator call gives what the curator-dask
spelling beside it gives ("runs"), warns with a NeMoCuratorWarning ("warns"), or fails
with an error whose message names the curator-dask spelling ("fails"). The rows are
read from the page, so the page and this test cannot drift apart.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

from curator_dask import (
    AddId,
    DocumentDataset,
    JsonlReader,
    ParquetWriter,
    Pipeline,
    Sequential,
    WriteResult,
)
from curator_dask.compat import NeMoCuratorWarning
from curator_dask.dedup import ExactDuplicates, FuzzyDuplicates, FuzzyDuplicatesConfig
from curator_dask.stages.filters import ScoreFilter, WordCountFilter

#: The names the page says its snippets see.
NAMES = {cls.__name__: cls for cls in (
    AddId, DocumentDataset, JsonlReader, ParquetWriter, Pipeline, Sequential, ExactDuplicates,
    FuzzyDuplicates, FuzzyDuplicatesConfig, ScoreFilter, WordCountFilter)}
PAGE = Path(__file__).parent.parent / "docs" / "migrating.md"
SECTION = "## NeMo Curator code that runs here"
BASE = "the quick brown fox jumps over the lazy dog and runs far away " * 3


def table_rows() -> list[tuple[str, str, str]]:
    """(NeMo Curator code, curator-dask code, outcome) of every row of the section."""
    text = PAGE.read_text()
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ", len(SECTION))]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows.append((cells[0].strip("`"), cells[1].strip("`"), cells[2]))
    return rows


ROWS = table_rows()


def test_the_table_covers_what_nemo_curator_users_write():
    calls = " ".join(nemo for nemo, _, _ in ROWS)
    for name in ("read_json", "to_json", "identify_duplicates", "cache_dir=",
                 "FuzzyDuplicatesConfig(", "perform_removal=True", "AddId(",
                 "Pipeline(\"clean\", stages=", "int)"):
        assert name in calls, name
    assert {outcome for _, _, outcome in ROWS} == {"runs", "runs, warns", "fails"}


@pytest.fixture
def namespace(tmp_path):
    """What the page says the snippets see: ds, data, cache, out and the names."""
    def make(tag: str) -> dict:
        root = tmp_path / tag
        (root / "data").mkdir(parents=True)
        texts = [BASE, BASE, BASE.replace("lazy", "LAZY", 1), "one", "two words", "x y z"]
        frame = pd.DataFrame({"id": range(len(texts)), "text": texts})
        frame.to_json(root / "data" / "a.jsonl", orient="records", lines=True)
        return {**NAMES, "ds": DocumentDataset.from_pandas(frame, npartitions=2),
                "data": str(root / "data"), "cache": str(root / "cache"),
                "out": str(root / "out")}

    return make


def value(result):
    """What a snippet gave, comparable across spellings."""
    if isinstance(result, DocumentDataset):
        frame = result.df.compute()
        return sorted(frame.astype(str).itertuples(index=False, name=None)), \
            sorted(frame.columns), result.dropped_counts()
    if isinstance(result, WriteResult):
        return result.rows, len(result.files), result.dropped
    if isinstance(result, Pipeline):
        return result.describe()
    return repr(result)


def run(code: str, scope: dict):
    """Evaluate ``code``; its result and the NeMo Curator warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = eval(code, scope)  # the documentation's own snippets
    nemo = [w for w in caught if issubclass(w.category, NeMoCuratorWarning)]
    return result, nemo


@pytest.mark.parametrize("nemo, ours, outcome", [r for r in ROWS if r[2] != "fails"],
                         ids=[r[0][:60] for r in ROWS if r[2] != "fails"])
def test_nemo_curator_code_gives_what_the_curator_dask_spelling_gives(
        namespace, nemo, ours, outcome):
    theirs, warned = run(nemo, namespace("nemo"))
    expected, ours_warned = run(ours, namespace("ours"))
    assert value(theirs) == value(expected)
    assert ours_warned == [], "the curator-dask spelling must not warn"
    if "warns" in outcome:
        assert warned, f"{nemo} should warn with the curator-dask spelling"
        assert all("in curator-dask it is" in str(w.message) or "no effect in curator-dask"
                   in str(w.message) for w in warned)
    else:
        assert warned == []


@pytest.mark.parametrize("nemo, ours", [r[:2] for r in ROWS if r[2] == "fails"],
                         ids=[r[0][:60] for r in ROWS if r[2] == "fails"])
def test_nemo_curator_code_without_a_counterpart_fails_naming_the_spelling(
        namespace, nemo, ours):
    with pytest.raises(TypeError) as raised:
        eval(nemo, namespace("nemo"))
    message = str(raised.value)
    assert "NeMo Curator's" in message
    assert ours in message


def test_exact_and_fuzzy_dedup_return_the_same_kind_of_thing(namespace):
    scope = namespace("kinds")
    ds = scope["ds"]
    fuzzy = dict(char_ngrams=5, num_bands=10, minhashes_per_band=4)
    for found in (ExactDuplicates()(ds), FuzzyDuplicates(**fuzzy)(ds)):
        ids = sorted(found.df.compute()["id"])
        assert ids[:2] == [0, 1]  # the duplicates, the copy kept included
    for cleaned, reason in ((ExactDuplicates(perform_removal=True)(ds), "exact_duplicate"),
                            (FuzzyDuplicates(**fuzzy, perform_removal=True)(ds),
                             "fuzzy_duplicate")):
        kept = sorted(cleaned.df.compute()["id"])
        assert 0 in kept and 1 not in kept
        assert cleaned.dropped_counts()[reason] == 6 - len(kept)


def test_a_nemo_keyword_and_its_curator_dask_name_together_are_an_error():
    with pytest.raises(TypeError, match=r"give cache_path= only"):
        ExactDuplicates(cache_dir="a", cache_path="b")
