"""Filters on hand-made documents (scores worked out by hand), the filter stages on real
DocumentDatasets, drop counting, empty input, and a real multi-process cluster."""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask import DocumentDataset
from curator_dask.stages import filters as F
from curator_dask.stages.filters import (
    DocumentFilter,
    Filter,
    GopherQualityFilter,
    Score,
    ScoreFilter,
    WordCountFilter,
)


def scores_and_keep(filter_obj, texts):
    scores = filter_obj.score(pd.Series(texts, dtype="str"))
    return scores.tolist(), filter_obj.keep(scores).tolist()


def approx(values):
    return pytest.approx(values, rel=1e-12)


# -- each filter on both sides of its threshold ------------------------------------------------

def test_non_alpha_numeric_counts_everything_outside_alnum_and_basic_punctuation():
    scores, keep = scores_and_keep(F.NonAlphaNumericFilter(), ["abc!", "abc$", "ab$$"])
    assert scores == [0.0, 0.25, 0.5]  # "!" is in the allowed set [a-zA-Z0-9\n?!,.]
    assert keep == [True, True, False]


def test_symbols_to_words_counts_hash_words_and_ellipses():
    ten_words = "# " + " ".join("w" * 3 for _ in range(9))
    scores, keep = scores_and_keep(F.SymbolsToWordsFilter(), [ten_words, "# ... a b", "## a"])
    assert scores == [0.1, 0.5, 0.0]  # "##" is one run of '#' over 2 chars: not > 0.5
    assert keep == [True, False, True]


def test_numbers_ratio():
    scores, keep = scores_and_keep(F.NumbersFilter(), ["abcdefghi1", "abc1"])
    assert scores == [0.1, 0.25]
    assert keep == [True, False]


def test_urls_ratio_at_and_above_the_cutoff():
    scores, keep = scores_and_keep(F.UrlsFilter(),
                                   ["http://a.io " + "b" * 43, "http://a.io " + "b" * 42])
    assert scores == approx([11 / 55, 11 / 54])
    assert keep == [True, False]


def test_bullets_ratio_counts_non_blank_lines():
    nine_of_ten = "\n".join(["• item"] * 9 + ["plain"]) + "\n\n  \n"
    scores, keep = scores_and_keep(F.BulletsFilter(), [nine_of_ten, "● a\n  ◦ b"])
    assert scores == [0.9, 1.0]
    assert keep == [True, False]


def test_white_space_ratio():
    scores, keep = scores_and_keep(F.WhiteSpaceFilter(), ["abc d", "a b c d"])
    assert scores == approx([1 / 5, 3 / 7])
    assert keep == [True, False]


def test_parentheses_ratio_includes_angle_brackets():
    scores, keep = scores_and_keep(F.ParenthesesFilter(), ["(abcdefghijklmnopqr)", "⟨abcdefgh⟩"])
    assert scores == [0.1, 0.2]
    assert keep == [True, False]


def test_long_word():
    scores, keep = scores_and_keep(F.LongWordFilter(), ["a" * 1000 + " b", "a" * 1001])
    assert scores == [1000, 1001]
    assert keep == [True, False]


def test_word_count_bounds_are_inclusive():
    f = F.WordCountFilter(min_words=50, max_words=52)
    scores, keep = scores_and_keep(f, [" ".join(["w"] * k) for k in (49, 50, 52, 53)])
    assert scores == [49, 50, 52, 53]
    assert keep == [False, True, True, False]


def test_boilerplate_counts_policy_paragraphs_and_lorem_ipsum():
    texts = ["Terms of Use apply.\n\ntext\n\nmore", "Terms of use\n\nPrivacy Policy\n\nhello",
             "A LOREM IPSUM text"]
    scores, keep = scores_and_keep(F.BoilerPlateStringFilter(), texts)
    assert scores == approx([1 / 3, 2 / 3, 1.0])
    assert keep == [True, False, False]


def test_mean_word_length_range():
    scores, keep = scores_and_keep(F.MeanWordLengthFilter(), ["ab abcd", "a bc", "abcdefghijk"])
    assert scores == [3.0, 1.5, 11.0]
    assert keep == [True, False, False]


@pytest.mark.parametrize(("filter_obj", "sep"), [(F.RepeatedLinesFilter(), "\n"),
                                                 (F.RepeatedParagraphsFilter(), "\n\n")])
def test_repeated_lines_and_paragraphs(filter_obj, sep):
    scores, keep = scores_and_keep(filter_obj, [sep.join("abca"), sep.join("aab")])
    assert scores == approx([3 / 4, 2 / 3])
    assert keep == [True, False]


@pytest.mark.parametrize(("filter_obj", "sep"), [(F.RepeatedLinesByCharFilter(), "\n"),
                                                 (F.RepeatedParagraphsByCharFilter(), "\n\n")])
def test_repeated_lines_and_paragraphs_by_char(filter_obj, sep):
    texts = [sep.join(["aaaa", "b", "c", "b"]), sep.join(["aaaa", "bb", "aaaa"])]
    scores, keep = scores_and_keep(filter_obj, texts)
    assert scores == approx([6 / 7, 6 / 10])
    assert keep == [True, False]


def test_repeating_top_ngrams_removes_the_top_bigram_from_the_text():
    f = F.RepeatingTopNGramsFilter(n=2, max_repeating_ngram_ratio=0.2)
    # all bigrams distinct: the first ("a b", 3 chars) once in 19 chars
    scores, keep = scores_and_keep(f, ["a b c d e f g h i j", "a b a b x"])
    assert scores == approx([3 / 19, 6 / 9])
    assert keep == [True, False]
    assert f.name == "repeating_top_2grams"


def test_repeating_top_ngrams_counts_substring_occurrences_like_nemo():
    # NeMo deletes the joined n-gram from the text: "the cat" also occurs inside "bathe cats".
    scores, _ = scores_and_keep(F.RepeatingTopNGramsFilter(n=2), ["the cat the cat bathe cats"])
    assert scores == approx([3 * 7 / 26])


def test_repeating_duplicate_ngrams():
    f = F.RepeatingDuplicateNGramsFilter(n=2, max_repeating_duplicate_ngram_ratio=0.2)
    # "a b a b": the 3rd bigram repeats the 1st: "a b" = 3 chars of 7
    scores, keep = scores_and_keep(f, ["a b c d", "a b a b"])
    assert scores == approx([0.0, 3 / 7])
    assert keep == [True, False]
    assert f.name == "repeating_dup_2gram"


def test_punctuation_share_of_lines_without_end_mark():
    six_of_seven = "\n".join(["no mark"] * 6 + ["done."])
    scores, keep = scores_and_keep(F.PunctuationFilter(), [six_of_seven, "a\nb!"])
    assert scores == approx([6 / 7, 0.5])
    assert keep == [False, True]


def test_ellipsis_share_of_lines():
    scores, keep = scores_and_keep(F.EllipsisFilter(), ["a…\nb\nc\nd", "a…\nb\nc"])
    assert scores == approx([0.25, 1 / 3])
    assert keep == [True, False]


def test_common_english_words_are_lower_case_only():
    scores, keep = scores_and_keep(F.CommonEnglishWordsFilter(),
                                   ["the cat and the hat", "the cat", "The And"])
    assert scores == [2, 1, 0]  # capped at 2 (stop_at_false)
    assert keep == [True, False, False]


def test_words_without_alphabets():
    scores, keep = scores_and_keep(F.WordsWithoutAlphabetsFilter(), ["a b c d 1", "a b 1 2"])
    assert scores == [0.8, 0.5]
    assert keep == [True, False]


def test_pornographic_urls_only_inside_urls():
    scores, keep = scores_and_keep(F.PornographicUrlsFilter(),
                                   ["visit http://porn.example.com", "porn http://ok.com"])
    assert scores == [1, 0]
    assert keep == [False, True]


def test_token_count_with_a_batched_tokenizer():
    class Batched:
        def batch_encode_plus(self, texts):  # marks a transformers tokenizer
            raise AssertionError("the batched __call__ is used")

        def __call__(self, texts):
            return {"input_ids": [[0, *range(len(t.split())), 1] for t in texts]}

    scores, keep = scores_and_keep(F.TokenCountFilter(Batched(), min_tokens=4, max_tokens=5),
                                   ["a b", "a b c", "a b c d"])
    assert scores == [4, 5, 6]
    assert keep == [True, True, False]


@pytest.mark.parametrize(("position", "expected"), [("prefix", [1, 0, 0]),
                                                    ("suffix", [0, 1, 0]),
                                                    ("any", [1, 1, 0])])
def test_substring_positions(position, expected):
    scores, keep = scores_and_keep(F.SubstringFilter("ab", position), ["abc", "cab", "a b"])
    assert scores == expected
    assert keep == [bool(e) for e in expected]


def test_substring_rejects_unknown_position():
    with pytest.raises(ValueError, match="prefix, suffix, any"):
        F.SubstringFilter("x", "middle")


def test_word_filters_refuse_languages_without_spaces():
    with pytest.raises(ValueError, match="segment the text first"):
        F.WordCountFilter(lang="zh")


# -- composites name the first failing rule ------------------------------------------------

GOOD = " ".join(["the quick brown fox jumps over the lazy dog and runs."] * 6)


def test_gopher_quality_names_the_first_failing_rule_in_order():
    texts = [
        GOOD,
        "too short",                                   # word_count (and stop_words)
        " ".join(["a"] * 60) + " the and",             # mean_word_length
        "# " * 10 + GOOD,                              # hash_ratio
        "\n".join(["• " + GOOD] * 2),                  # bullet_lines
        "\n".join([GOOD + "...", GOOD + "…", GOOD]),   # ellipsis_lines (2 of 3 lines)
        " ".join(["1234"] * 30) + " " + GOOD,          # alpha_words
        " ".join(["quick brown foxes jump"] * 15),     # stop_words
    ]
    scores = GopherQualityFilter().score(pd.Series(texts, dtype="str")).tolist()
    assert scores[0] != scores[0]  # NaN: kept
    assert scores[1:] == ["word_count", "mean_word_length", "hash_ratio", "bullet_lines",
                          "ellipsis_lines", "alpha_words", "stop_words"]


def test_gopher_quality_measure_gives_the_statistics():
    stats = GopherQualityFilter().measure(pd.Series([GOOD, ""], dtype="str"))
    assert stats.loc[0, "words"] == 66 and stats.loc[0, "stop_words"] == 2
    assert stats.loc[0, "mean_word_length"] == pytest.approx(43 / 11)
    assert stats.loc[1, "words"] == 0 and math.isnan(stats.loc[1, "hash_ratio"])


def test_gopher_rule_with_none_threshold_is_off():
    f = GopherQualityFilter(min_doc_words=None, min_stop_words=None)
    scores = f.score(pd.Series(["quick brown foxes"], dtype="str")).tolist()
    assert scores[0] != scores[0]


def test_gopher_repetition_names_the_rule():
    f = F.GopherRepetitionFilter()
    varied = " ".join(f"w{i}" for i in range(60))
    texts = [varied, "\n\n".join(["para one", "para one", "para one", varied]),
             "\n".join([varied, "x y", "x y", "x y", "z"]), "a b " * 40]
    scores = f.score(pd.Series(texts, dtype="str")).tolist()
    assert scores[0] != scores[0]
    assert scores[1:] == ["duplicate_paragraphs", "duplicate_lines", "top_2gram"]


def test_c4_quality_rules():
    good = "\n".join(["This line is a full sentence."] * 5)
    texts = [good, good + "\nThe set {a, b} is small.", "Short\n" + good,
             "Lorem ipsum dolor sit.\n{x} is ok.", "This has no end"]
    scores = F.C4QualityFilter().score(pd.Series(texts, dtype="str")).tolist()
    assert scores[0] != scores[0] and scores[2] != scores[2]  # short lines are only removed
    assert [scores[1], scores[3], scores[4]] == ["curly_bracket", "lorem_ipsum",
                                                 "too_few_sentences"]


# -- empty, whitespace-only and missing text: the documented results ------------------------

EMPTY = ["", " \t\n ", None]

#: (filter, scores for "", " \t\n ", None, kept?) as docs/filters.md states them.
EMPTY_RESULTS = [
    (F.NonAlphaNumericFilter(), [1.0, 0.75, 1.0]),
    (F.SymbolsToWordsFilter(), [1.0, 1.0, 1.0]),
    (F.NumbersFilter(), [1.0, 0.0, 1.0]),
    (F.UrlsFilter(), [1.0, 0.0, 1.0]),
    (F.BulletsFilter(), [1.0, 1.0, 1.0]),
    (F.WhiteSpaceFilter(), [1.0, 1.0, 1.0]),
    (F.ParenthesesFilter(), [1.0, 0.0, 1.0]),
    (F.LongWordFilter(), [0, 0, 0]),
    (F.WordCountFilter(), [0, 0, 0]),
    (F.BoilerPlateStringFilter(), [0.0, 0.0, 0.0]),
    (F.MeanWordLengthFilter(), [0.0, 0.0, 0.0]),
    (F.RepeatedLinesFilter(), [0.0, 0.0, 0.0]),
    (F.RepeatedParagraphsFilter(), [1.0, 1.0, 1.0]),
    (F.RepeatedLinesByCharFilter(), [0.0, 0.0, 0.0]),
    (F.RepeatedParagraphsByCharFilter(), [0.0, 1.0, 0.0]),
    (F.RepeatingTopNGramsFilter(), [1.0, 1.0, 1.0]),
    (F.RepeatingDuplicateNGramsFilter(), [1.0, 1.0, 1.0]),
    (F.PunctuationFilter(), [1.0, 1.0, 1.0]),
    (F.EllipsisFilter(), [1.0, 1.0, 1.0]),
    (F.CommonEnglishWordsFilter(), [0, 0, 0]),
    (F.WordsWithoutAlphabetsFilter(), [0.0, 0.0, 0.0]),
    (F.PornographicUrlsFilter(), [0, 0, 0]),
    (F.SubstringFilter("a", "any"), [0, 0, 0]),
]


@pytest.mark.parametrize(("filter_obj", "expected"), EMPTY_RESULTS,
                         ids=[f.name for f, _ in EMPTY_RESULTS])
def test_empty_whitespace_and_missing_text(filter_obj, expected):
    scores = filter_obj.score(pd.Series(EMPTY, dtype="str"))
    assert scores.tolist() == expected
    kept = filter_obj.keep(scores).tolist()
    assert kept[0] == kept[2]  # missing text is empty text


def test_empty_text_fails_the_composites_first_rules():
    text = pd.Series(EMPTY, dtype="str")
    assert GopherQualityFilter().score(text).tolist() == ["word_count"] * 3
    assert F.C4QualityFilter().score(text).tolist() == ["too_few_sentences"] * 3
    assert F.GopherRepetitionFilter().score(text).isna().all()  # nothing repeats


def test_object_dtype_text_with_nan_is_accepted():
    text = pd.Series(["a b", np.nan, None], dtype=object)
    assert WordCountFilter().score(text).tolist() == [2, 0, 0]


def test_non_string_text_column_is_a_clear_error():
    with pytest.raises(TypeError, match="must hold strings"):
        WordCountFilter().score(pd.Series([1, 2]))


# -- the stages on real datasets ---------------------------------------------------------------

def dataset(texts, npartitions=2, **columns):
    return DocumentDataset.from_pandas(pd.DataFrame({"text": texts, **columns}),
                                       npartitions=npartitions)


def test_score_filter_keeps_the_score_column_with_its_dtype():
    ds = dataset(["one two three", "one", "a b c d", ""])
    out = ScoreFilter(WordCountFilter(min_words=3), score_field="word_count")(ds)
    assert str(out.df.dtypes["word_count"]) == "int64"  # from meta, nothing computed
    df = out.df.compute()
    assert df["text"].tolist() == ["one two three", "a b c d"]
    assert df["word_count"].tolist() == [3, 4]
    assert out.dropped_counts() == {"word_count": 2}


def test_score_filter_without_score_field_adds_no_column():
    out = ScoreFilter(WordCountFilter(min_words=2))(dataset(["a b", "a"]))
    assert list(out.df.columns) == ["text"]
    assert list(out.df.compute().columns) == ["text"]


def test_invert_keeps_the_rejected_documents_and_counts_the_others():
    out = ScoreFilter(WordCountFilter(min_words=2), invert=True)(dataset(["a b", "a", "b"]))
    assert out.df.compute()["text"].tolist() == ["a", "b"]
    assert out.dropped_counts() == {"word_count.inverted": 1}


def test_dropped_counts_sum_over_partitions_and_stages():
    texts = ["one two three", "one", "one one one one", "two", "x y z", "x y z"]
    ds = dataset(texts, npartitions=2)
    ds = ScoreFilter(WordCountFilter(min_words=2))(ds)
    ds = ScoreFilter(F.RepeatedLinesFilter(max_repeated_line_fraction=1.0))(ds)
    ds = ScoreFilter(F.RepeatingTopNGramsFilter(n=1, max_repeating_ngram_ratio=0.5))(ds)
    assert ds.npartitions == 2
    assert ds.df.compute()["text"].tolist() == ["one two three", "x y z", "x y z"]
    assert ds.dropped_counts() == {"repeating_top_1grams": 1, "word_count": 2}


def test_composite_filters_count_each_document_once_under_its_first_rule():
    texts = [GOOD, "too short", "# " * 10 + GOOD, " ".join(["quick brown foxes jump"] * 15),
             "short"]
    out = ScoreFilter(GopherQualityFilter(), score_field="gopher")(dataset(texts))
    df = out.df.compute()
    assert df["text"].tolist() == [GOOD] and df["gopher"].isna().all()
    assert out.dropped_counts() == {"gopher_quality.hash_ratio": 1,
                                    "gopher_quality.stop_words": 1,
                                    "gopher_quality.word_count": 2}


def test_score_stores_without_filtering_and_filter_drops_later():
    ds = Score(GopherQualityFilter(), "gopher")(dataset([GOOD, "too short"]))
    assert ds.df.compute()["gopher"].tolist()[1] == "word_count"
    assert ds.dropped_counts() == {}
    out = Filter(GopherQualityFilter(), "gopher")(ds)
    assert out.df.compute()["text"].tolist() == [GOOD]
    assert out.dropped_counts() == {"gopher_quality.word_count": 1}


def test_score_with_a_function_and_filter_with_a_function():
    ds = Score(lambda text: text.str.len(), "length", score_type="int64")(dataset(["ab", "abcd"]))
    assert str(ds.df.dtypes["length"]) == "int64"

    def long_enough(lengths):
        return lengths >= 3

    out = Filter(long_enough, "length")(ds)
    assert out.df.compute()["text"].tolist() == ["abcd"]
    assert out.dropped_counts() == {"long_enough": 1}


def test_meta_comes_from_the_stage_not_from_running_the_filter():
    calls = []

    class Counting(DocumentFilter):
        name = "counting"

        def score(self, text):
            calls.append(len(text))
            return pd.Series(0.0, index=text.index)

        def keep(self, scores):
            return scores == 0

    out = ScoreFilter(Counting(), score_field="s")(dataset(["a", "b", "c"]))
    assert str(out.df.dtypes["s"]) == "float64" and calls == []
    out.df.compute()
    assert sorted(calls) == [1, 2]  # once per partition, never on an empty frame


def test_missing_text_column_names_the_columns():
    with pytest.raises(KeyError, match=r"'body'.*\['text'\].*text_field="):
        ScoreFilter(WordCountFilter(), text_field="body")(dataset(["a"]))


def test_score_filter_refuses_a_function():
    with pytest.raises(TypeError, match="Score\\(fn, score_field\\)"):
        ScoreFilter(lambda text: text)


def test_a_per_document_filter_ported_from_nemo_works_through_the_base_class():
    class HasQuestion(DocumentFilter):
        name = "has_question"
        score_dtype = "int64"

        def score_document(self, text):
            return int("?" in text)

        def keep_document(self, score):
            return score == 1

    out = ScoreFilter(HasQuestion())(dataset(["why?", "no", None]))
    assert out.df.compute()["text"].tolist() == ["why?"]
    assert out.dropped_counts() == {"has_question": 2}


def test_filters_pickle_for_workers():
    for f, _ in EMPTY_RESULTS:
        clone = pickle.loads(pickle.dumps(f))
        text = pd.Series(["a b a b", "x"], dtype="str")
        assert clone.score(text).tolist() == f.score(text).tolist()


def test_score_filter_on_a_multiprocess_cluster_counts_drops(client):
    texts = [GOOD, "too short", "# " * 10 + GOOD, GOOD + " again", "short", "\n"] * 5
    ds = dataset(texts, npartitions=2)
    out = ScoreFilter(GopherQualityFilter(), score_field="gopher")(ds)
    out = ScoreFilter(F.RepeatingTopNGramsFilter(n=2, max_repeating_ngram_ratio=0.5))(out)
    kept = out.df.compute()
    assert len(kept) == 10 and kept["gopher"].isna().all()
    assert out.dropped_counts() == {"gopher_quality.hash_ratio": 5,
                                    "gopher_quality.word_count": 15}
    workers = client.run(lambda: __import__("os").getpid())
    assert len(set(workers.values())) == 2


# -- names: a filter counts its drops under its own name ------------------------------------

class HasDigit(DocumentFilter):
    score_dtype = "bool"

    def score(self, text):
        return text.str.contains("[0-9]", regex=True).astype(bool)

    def keep(self, scores):
        return scores


class ShortText(DocumentFilter):
    score_dtype = "int64"

    def score(self, text):
        return text.str.len()

    def keep(self, scores):
        return scores < 6


def test_filter_classes_without_a_name_are_named_after_themselves():
    assert (HasDigit().name, ShortText().name) == ("has_digit", "short_text")
    assert WordCountFilter().name == "word_count"  # a name the class sets is kept
    out = ScoreFilter(ShortText())(ScoreFilter(HasDigit())(
        dataset(["a1", "b", "c2", "long text 9"])))
    assert out.df.compute()["text"].tolist() == ["a1", "c2"]
    assert out.dropped_counts() == {"has_digit": 1, "short_text": 1}


def test_two_stages_with_one_name_in_a_pipeline_count_their_drops_apart(tmp_path):
    from conftest import write_jsonl

    from curator_dask import JsonlReader, ParquetWriter, Pipeline
    from curator_dask.executors import LocalExecutor
    from curator_dask.observe.report import stage_rows

    texts = ["one", "one two", "one two three", "one two three four"] * 3
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": t} for t in texts])
    at_least_two = ScoreFilter(WordCountFilter(min_words=2))
    p = (Pipeline("names").add_stage(JsonlReader(str(tmp_path / "in")))
         .add_stage(at_least_two)
         .add_stage(ScoreFilter(WordCountFilter(min_words=4)))
         .add_stage(ParquetWriter(str(tmp_path / "out"))))
    assert [s.name for s in p.stages[1:3]] == ["word_count", "word_count_2"]
    assert at_least_two.name == "word_count"  # the first keeps its name; a copy is renamed
    result = p.run(LocalExecutor(progress=False))
    assert result.rows == 3
    assert result.dropped == {"word_count": 3, "word_count_2": 6}
    rows = {row.stage: row for row in stage_rows(result, p.stages)}
    assert rows["word_count"].dropped == {"word_count": 3}
    assert rows["word_count_2"].dropped == {"word_count_2": 6}


@settings(max_examples=60, deadline=None)
@given(docs=st.lists(st.text(alphabet="ab\u00e9\u4e2d  \n\u00a0", max_size=400), max_size=40))
def test_word_ids_are_equal_exactly_when_two_words_of_a_document_are(docs):
    # The n-gram filters number each document's words by their bytes; Arrow's
    # dictionary encoding of that document's words is the specification (same ids, in
    # order of first appearance).
    import pyarrow.compute as pc

    from curator_dask.text import word_spans, words

    arr = pa.array(docs, pa.large_string())
    spans, segments = word_spans(arr), words(arr)
    doc_words = [d.split() for d in docs]
    assert spans.doc_offsets.tolist() == segments.doc_offsets.tolist()
    assert spans.doc_offsets[-1] == sum(map(len, doc_words))
    want = [pc.dictionary_encode(pa.array(w, pa.large_string())).indices.to_numpy().tolist()
            for w in doc_words]
    for ids in (spans.ids, segments.ids):
        got = [ids[a:b].tolist() for a, b in itertools.pairwise(spans.doc_offsets)]
        assert got == want
