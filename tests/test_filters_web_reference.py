"""FineWeb's quality filter and NeMo Curator's code filters equal plain per-document
references: datatrove's ``FineWebQualityFilter.filter`` and NeMo Curator's
``nemo_curator/filters/code.py`` transcribed, with only the deviations the filters
document (whitespace words; ``str.isalpha`` letters; 0.0 where NeMo divides by zero).
They run over the generated corpus of ``test_filters_reference.py`` (Unicode whitespace
and line breaks, blank and repeated lines, symbols, empty and missing text) and over
code-like files built around the XML prefix boundary.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_filters_reference import DOCS, plain

from curator_dask import DocumentDataset
from curator_dask.stages import filters as F

TERMINAL_PUNCTUATION = {chr(c) for a, b in [
    (0x21, 0x21), (0x2E, 0x2E), (0x3F, 0x3F), (0x589, 0x589), (0x61D, 0x61F), (0x6D4, 0x6D4),
    (0x700, 0x702), (0x7F9, 0x7F9), (0x964, 0x965), (0x3002, 0x3002), (0xFF01, 0xFF01),
    (0xFF0E, 0xFF0E), (0xFF1F, 0xFF1F), (0xFF61, 0xFF61), (0x203C, 0x203D), (0x2047, 0x2049),
] for c in range(a, b + 1)}


def code_docs(n: int = 600, seed: int = 3) -> list[str | None]:
    rng = np.random.default_rng(seed)
    pieces = ["int x = 1;", "    return x;", "def f():", "# comment", "", "1, 2, 3, 4, 5,",
              "0.125 0.5 0.75", "<?xml version=\"1.0\"?>", "</a>", "ÉTÉ = 'été'", "x = ℤ",
              "। ॥", "done。", "why?!", "a" * 40, "}", "\t"]
    out: list[str | None] = [None, "", "\n", "<?xml version=", " " * 86 + "<?xml version="]
    for k in (85, 86, 87, 100):
        out.append("x" * k + "<?xml version=\"1.0\"?>")
    while len(out) < n:
        lines = rng.choice(pieces, size=int(rng.integers(0, 40)))
        out.append(str(rng.choice(["\n", "\n", "\r\n"])).join(lines))
    return out


CODE = code_docs()
ALL = DOCS + CODE


# -- datatrove FineWebQualityFilter.filter (split_into_words -> str.split) ------------------

def find_duplicates(x):
    unique_x = set()
    duplicate_chars = 0
    duplicate_elements = 0
    for element in x:
        if element in unique_x:
            duplicate_chars += len(element)
            duplicate_elements += 1
        else:
            unique_x.add(element)
    return duplicate_elements, duplicate_chars


def fineweb_reference(text, line_punct_thr=0.12, line_punct_exclude_zero=False,
                      short_line_thr=0.67, short_line_length=30, char_duplicates_ratio=0.01,
                      new_line_ratio=0.3, stop_chars=None):
    stop_chars = tuple(stop_chars) if stop_chars is not None else tuple(TERMINAL_PUNCTUATION)
    lines = text.split("\n")
    lines = [line for line in lines if line.strip() != ""]
    if len(lines) == 0:
        return "empty"
    ratio = sum(1 for line in lines if line.endswith(stop_chars)) / len(lines)
    if ratio < line_punct_thr and not (ratio == 0 and line_punct_exclude_zero):
        return "line_punct_ratio"
    ratio = sum(1 for line in lines if len(line) <= short_line_length) / len(lines)
    if ratio > short_line_thr:
        return "short_line_ratio"
    ratio = find_duplicates(lines)[1] / len(text.replace("\n", ""))
    if ratio > char_duplicates_ratio:
        return "char_dup_ratio"
    words = text.split()
    new_line = text.count("\n")
    if new_line / len(words) > new_line_ratio:
        return "list_ratio"
    return None


@pytest.mark.parametrize("options", [
    {},
    {"line_punct_exclude_zero": True, "short_line_length": 10},
    {"line_punct_thr": 0.5, "short_line_thr": 0.9, "char_duplicates_ratio": 0.2,
     "new_line_ratio": 0.1},
], ids=["defaults", "exclude-zero", "other-thresholds"])
def test_fineweb_quality_equals_datatrove(options):
    scores = F.FineWebQualityFilter(**options).score(pd.Series(ALL, dtype="str"))
    got = [None if pd.isna(s) else s for s in scores]
    expected = [fineweb_reference(plain(t), **options) for t in ALL]
    assert got == expected
    assert len(set(expected)) >= 5, "the corpus exercises every rule"


def test_fineweb_terminal_punctuation_is_datatroves_set():
    from curator_dask.stages.filters.fineweb import _TERMINAL
    from curator_dask.text import char_table

    table = char_table(_TERMINAL)
    assert {chr(c) for c in np.flatnonzero(table)} >= TERMINAL_PUNCTUATION
    assert int(table.sum()) == 159  # len(datatrove.utils.text.TERMINAL_PUNCTUATION)


def test_fineweb_drops_are_counted_by_rule():
    text = pd.Series(
        [
            "A sentence that ends well, and is long enough to count.\n"
            "And another one that does too, with a few more words in it.",
            "menu\nhome\nabout",
            "",
            "This same line is repeated here, four times over.\n" * 4,
        ]
    )
    out = F.ScoreFilter(F.FineWebQualityFilter())(DocumentDataset.from_pandas(
        pd.DataFrame({"text": text})))
    assert len(out.df.compute()) == 1
    assert out.dropped_counts() == {"fineweb_quality.char_dup_ratio": 1,
                                    "fineweb_quality.empty": 1,
                                    "fineweb_quality.line_punct_ratio": 1}


# -- NeMo Curator's code filters --------------------------------------------------------------

def num_lines_reference(source):
    return len(source.split("\n"))


def xml_header_reference(source, char_prefix_search_length=100):
    return 1 if "<?xml version=" in source[:char_prefix_search_length] else 0


def alpha_reference(source):
    return sum(map(str.isalpha, source)) / len(source) if source else 0.0


@pytest.mark.parametrize("bounds", [(10, 20000), (1, 3), (5, 5)])
def test_number_of_lines_equals_nemo(bounds):
    f = F.NumberOfLinesOfCodeFilter(*bounds)
    scores = f.score(pd.Series(ALL, dtype="str"))
    assert scores.tolist() == [num_lines_reference(plain(t)) for t in ALL]
    assert f.keep(scores).tolist() == [bounds[0] <= num_lines_reference(plain(t)) <= bounds[1]
                                       for t in ALL]


@pytest.mark.parametrize("length", [100, 86, 0])
def test_xml_header_equals_nemo(length):
    f = F.XMLHeaderFilter(length)
    scores = f.score(pd.Series(ALL, dtype="str"))
    expected = [xml_header_reference(plain(t), length) for t in ALL]
    assert scores.tolist() == expected
    assert length == 0 or 0 < sum(expected) < len(ALL)


def test_alpha_filter_equals_nemo():
    f = F.AlphaFilter()
    scores = f.score(pd.Series(ALL, dtype="str"))
    np.testing.assert_allclose(scores.to_numpy(), [alpha_reference(plain(t)) for t in ALL],
                               rtol=0, atol=1e-12)
    keep = f.keep(scores)
    assert 0 < int(keep.sum()) < len(ALL)
