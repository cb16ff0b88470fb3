"""Modifiers: hand-made examples, equality with NeMo Curator's per-document regular
expressions and ftfy over generated documents, and the Modify stage on real datasets."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_filters_reference import DOCS, plain

from curator_dask import DocumentDataset
from curator_dask.stages.filters import ScoreFilter, WordCountFilter
from curator_dask.stages.modifiers import (
    C4LineCleaner,
    DocumentModifier,
    Modify,
    NewlineNormalizer,
    UnicodeReformatter,
    UrlRemover,
    WhitespaceNormalizer,
)

TEXT = pd.Series(DOCS, dtype="str")

EXTRA = ["visit https://example.com/a?b=c\u00a0now", "WWW.Example.org\u3000x", "http://a\u2028b",
         "caf\u00c3\u00a9 &amp; na\u00c3\u00afve", "\x1b[31mred\x1b[0m", "ｆｕｌｌ", "ﬁne “quoted”",
         "line\r\n\r\n\r\n\r\nnext", "a\n\n\n\nb", "é"]


def test_newline_normalizer_equals_nemo_regex():
    out = NewlineNormalizer().modify(pd.Series(DOCS + EXTRA, dtype="str"))
    expected = [re.sub(r"(\r\n){3,}", "\r\n\r\n", re.sub(r"(\n){3,}", "\n\n", plain(t)))
                for t in DOCS + EXTRA]
    assert out.fillna("").tolist() == expected


def test_url_remover_equals_nemo_regex_with_unicode_whitespace():
    nemo = re.compile(r"https?://\S+|www\.\S+", flags=re.IGNORECASE)
    texts = DOCS + EXTRA
    out = UrlRemover().modify(pd.Series(texts, dtype="str"))
    assert out.tolist() == [nemo.sub("", plain(t)) for t in texts]
    assert out.iloc[len(DOCS)] == "visit \u00a0now"


def test_whitespace_normalizer_equals_its_regex_definition():
    texts = DOCS + EXTRA
    out = WhitespaceNormalizer().modify(pd.Series(texts, dtype="str"))

    def reference(t):
        t = re.sub(r"[^\S\n]+", " ", t)
        return re.sub(r" ?\n ?", "\n", t).strip()

    assert out.tolist() == [reference(plain(t)) for t in texts]


@pytest.mark.slow
def test_unicode_reformatter_equals_ftfy_per_document():
    ftfy = pytest.importorskip("ftfy", reason="needs the text extra (ftfy)")

    f = UnicodeReformatter()
    texts = DOCS + EXTRA
    out = f.modify(pd.Series(texts, dtype="str"))
    assert out.tolist() == [ftfy.fix_text(plain(t), config=f.config) for t in texts]
    assert out.iloc[len(DOCS) + 3] == "café & naïve"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("\t\n !\"#$%'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~"),
               max_size=60))
def test_ftfy_leaves_plain_ascii_without_ampersand_unchanged(text):
    """The claim behind UnicodeReformatter's fast path, for default and NeMo configs."""
    ftfy = pytest.importorskip("ftfy", reason="needs the text extra (ftfy)")

    assert ftfy.fix_text(text) == text
    assert ftfy.fix_text(text, config=UnicodeReformatter().config) == text


def test_c4_line_cleaner_keeps_sentences_and_removes_notices():
    text = ("Menu\nThis is a real sentence.[1]\nEnable JavaScript to see it.\n"
            "We use cookies here.\n  Another proper line here!  ")
    out = C4LineCleaner().modify(pd.Series([text, "", None], dtype="str"))
    assert out.tolist() == ["This is a real sentence.\nAnother proper line here!", "", ""]


def test_per_document_modifier_from_nemo_works_through_the_base_class():
    class Reverse(DocumentModifier):
        name = "reverse"

        def modify_document(self, text):
            return text[::-1]

    assert Reverse().modify(pd.Series(["abc", None], dtype="str")).tolist() == ["cba", ""]


def test_modify_stage_rewrites_text_and_keeps_upstream_drop_counts():
    ds = DocumentDataset.from_pandas(
        pd.DataFrame({"text": ["a\n\n\n\nb c", "x", "y", "one two  three"], "n": range(4)}),
        npartitions=2)
    ds = ScoreFilter(WordCountFilter(min_words=2))(ds)  # drops one document per partition
    ds = Modify(WhitespaceNormalizer())(Modify(NewlineNormalizer())(ds))
    df = ds.df.compute()
    assert df["text"].tolist() == ["a\n\nb c", "one two three"]
    assert df["n"].tolist() == [0, 3]
    assert str(ds.df.dtypes["text"]) == str(df["text"].dtype)
    assert ds.dropped_counts() == {"word_count": 2}


def test_counts_survive_a_partition_emptied_by_a_filter_and_later_stages():
    ds = DocumentDataset.from_pandas(pd.DataFrame({"text": ["a b", "c d", "x", "y"]}),
                                     npartitions=2)
    ds = Modify(NewlineNormalizer())(ScoreFilter(WordCountFilter(min_words=2))(ds))
    assert ds.df.compute()["text"].tolist() == ["a b", "c d"]
    assert ds.dropped_counts() == {"word_count": 2}


def test_modify_needs_the_text_column():
    ds = DocumentDataset.from_pandas(pd.DataFrame({"body": ["a"]}))
    with pytest.raises(KeyError, match="text_field="):
        Modify(UrlRemover())(ds)
