"""Every filter's vectorised scores equal a plain one-document-at-a-time reference.

The references below are transcriptions of NeMo Curator's ``heuristic_filter.py`` and
datatrove's Gopher and C4 filters, run per document with plain Python, with only the
deviations the filters document: deterministic tie-breaking, defined values where the
originals divide by zero, whitespace words, word-tuple n-grams, and the punkt-free
sentence count. They run over a few thousand seeded documents built to hit the edge
cases: Unicode whitespace and line breaks, blank and repeated lines, repeated n-grams,
symbols, URLs, empty, whitespace-only and missing text.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from curator_dask.stages import filters as F

# -- generated corpus --------------------------------------------------------------------

VOCAB = [
    "the", "be", "to", "of", "and", "that", "have", "with", "a", "cat", "dog", "sat", "on",
    "mat", "Data", "THE", "#", "##", "#a#", "x#", "#tag", "...", "…", "[...]", "(...)", "-»",
    "read", "more", "Read", "More..", "http://example.com/a?b=1", "https://porn.example.org/x",
    "see:http://a.b(c),d", "HTTP://x.y", "www.site.org", "123", "4.5", "(see)", "[1]",
    "[edit]", "[citation", "needed]", "{x}", "—", "•", "-", "●", "café", "naïve", "ÉTÉ",
    "日本語", "١٢٣", "²", "Ⅻ", "ः", "lorem", "ipsum", "Lorem", "javascript", "JavaScript",
    "privacy", "policy", "cookies", "use", "terms", "!!!", "?!", "'quoted'", '"q"', "end.",
    "ok!", "why?", "x" * 25, "⟨a⟩", "\x00", "’", "«»",
]
SEPARATORS = [" "] * 12 + ["  ", "\t", "\xa0", "\u3000", "\n", "\n", "\n", "\n\n", "\n\n\n",
                           "\r\n", " \n ", "\x0b", "\x1c", "\u2028", "\x85", "\r"]


def generate(n_docs: int = 3000, seed: int = 7) -> list[str | None]:
    rng = np.random.default_rng(seed)
    docs: list[str | None] = [None, "", " ", "\n", "\n\n", " \t\n\u3000 ", "a", "a b"]
    while len(docs) < n_docs:
        vocab = rng.choice(len(VOCAB), size=int(rng.integers(2, 30)), replace=False)
        length = int(rng.integers(0, 80))
        tokens = rng.choice(vocab, size=length)
        separators = rng.integers(0, len(SEPARATORS), size=length)
        text = "".join(VOCAB[t] + SEPARATORS[s] for t, s in zip(tokens, separators, strict=True))
        roll = rng.random()
        if roll < 0.15 and text:
            lines = text.split("\n")
            text = "\n".join(lines + lines[: len(lines) // 2 + 1])
        elif roll < 0.25:
            text = ("\n\n" if rng.random() < 0.5 else "\n").join([text] * int(rng.integers(2, 4)))
        elif roll < 0.3:
            text = " \n" + text + "  "
        docs.append(text)
    return docs


DOCS = generate()
TEXT = pd.Series(DOCS, dtype="str")


def plain(text):
    return text if isinstance(text, str) else ""


# -- NeMo Curator references (nemo_curator/filters/heuristic_filter.py) ------------------------

def words_of(t):
    return t.strip().split()


def sentences_of(t):
    return [x for x in t.split("\n") if len(x.strip()) > 0]


URL_RE = re.compile(
    "http[s]?://(?:[a-zA-Z]|[0-9]|[$-_@.&+]|[!*\\(\\),]|(?:%[0-9a-fA-F][0-9a-fA-F]))+")


def ref_non_alpha_numeric(t):
    n = len(t)
    return (n - len(re.findall("[a-zA-Z0-9\n?!,.]", t))) / n if n else 1.0


def ref_symbols_to_words(t):
    words = words_of(t)
    if not words:
        return 1.0
    count = 0
    for w in words:
        word = w.strip()
        if word in F.heuristic.ELLIPSIS_MARKS or len(re.findall("#+", word)) / len(word) > 0.5:
            count += 1
    return count / len(words)


def ref_numbers(t):
    return len(re.findall("[0-9]", t)) / len(t) if t else 1.0


def ref_urls(t):
    return sum(len(u) for u in URL_RE.findall(t)) / len(t) if t else 1.0


def ref_bullets(t):
    s = sentences_of(t)
    if not s:
        return 1.0
    return sum(any(x.strip().startswith(b) for b in F.heuristic.BULLETS) for x in s) / len(s)


def ref_white_space(t):
    return len([x for x in t if x in ["\t", "\n", "\r", "\b", " "]]) / len(t) if t else 1.0


def ref_parentheses(t):
    return len(re.findall(r"{|}|⟨|⟩|\[|\]|\(|\)", t)) / len(t) if t else 1.0


def ref_long_word(t):
    words = words_of(t)
    return max(len(w) for w in words) if words else 0


def ref_word_count(t):
    return len(words_of(t))


def ref_boilerplate(t):
    paragraphs = t.split("\n\n")
    count = 0
    for p in paragraphs:
        p = p.strip().lower()
        if "lorem ipsum" in p:
            return 1.0
        if any(s in p for s in F.heuristic.POLICY_SUBSTRINGS):
            count += 1
    return count / len(paragraphs)


def ref_mean_word_length(t):
    lens = [len(w) for w in words_of(t)]
    return sum(lens) / len(lens) if lens else 0.0


def ref_repeated_lines(t):
    s = sentences_of(t)
    return len(set(s)) / len(s) if s else 0.0


def ref_repeated_paragraphs(t):
    p = t.split("\n\n")
    return len(set(p)) / len(p)


def ref_repeated_lines_char(t):
    s = sentences_of(t)
    return len("".join(set(s))) / len("".join(s)) if s else 0.0


def ref_repeated_paragraphs_char(t):
    p = t.split("\n\n")
    total = len("".join(p))
    return len("".join(set(p))) / total if total else 0.0


def ngrams_of(words, n):
    return list(zip(*[words[i:] for i in range(n)], strict=False))


def ref_top_ngrams(t, n):
    words = words_of(t)
    if len(words) < n:
        return 1.0
    counts: dict = {}
    for g in ngrams_of(words, n):  # insertion order = first occurrence: ties go to the first
        counts[g] = counts.get(g, 0) + 1
    top = " ".join(max(counts, key=lambda g: counts[g]))
    return (len(t) - len(t.replace(top, ""))) / len(t)


def ref_duplicate_ngrams(t, n):
    words = words_of(t)
    if len(words) < n:
        return 1.0
    counts: dict = {}
    duplicated = 0
    overlapping = 0
    for g in ngrams_of(words, n):
        counts[g] = counts.get(g, 0) + 1
        if counts[g] > 1:
            duplicated += sum(len(w) for w in g[overlapping:]) + min(n - overlapping, n - 1)
            overlapping = n
        overlapping = max(overlapping - 1, 0)
    return duplicated / len(t)


def ref_punctuation(t):
    s = sentences_of(t)
    if not s:
        return 1.0
    return len([x for x in s if not x.strip().endswith(F.heuristic.END_MARKS)]) / len(s)


def ref_ellipsis(t):
    s = sentences_of(t)
    if not s:
        return 1.0
    return sum(any(x.strip().lower().endswith(e) for e in F.heuristic.ELLIPSIS_MARKS)
               for x in s) / len(s)


def ref_common_words(t, cutoff=2, stop_at_false=True):
    count = 0
    for w in words_of(t):
        if w in F.heuristic.COMMON_ENGLISH_WORDS:
            count += 1
        if stop_at_false and count >= cutoff:
            return count
    return count


def ref_words_with_alphabets(t):
    words = words_of(t)
    return sum(any(c.isalpha() for c in w) for w in words) / len(words) if words else 0.0


def ref_pornographic(t):
    return int(any("porn" in u for u in URL_RE.findall(t)))


CASES = [
    (F.NonAlphaNumericFilter(), ref_non_alpha_numeric),
    (F.SymbolsToWordsFilter(), ref_symbols_to_words),
    (F.NumbersFilter(), ref_numbers),
    (F.UrlsFilter(), ref_urls),
    (F.BulletsFilter(), ref_bullets),
    (F.WhiteSpaceFilter(), ref_white_space),
    (F.ParenthesesFilter(), ref_parentheses),
    (F.LongWordFilter(), ref_long_word),
    (F.WordCountFilter(), ref_word_count),
    (F.BoilerPlateStringFilter(), ref_boilerplate),
    (F.MeanWordLengthFilter(), ref_mean_word_length),
    (F.RepeatedLinesFilter(), ref_repeated_lines),
    (F.RepeatedParagraphsFilter(), ref_repeated_paragraphs),
    (F.RepeatedLinesByCharFilter(), ref_repeated_lines_char),
    (F.RepeatedParagraphsByCharFilter(), ref_repeated_paragraphs_char),
    *[(F.RepeatingTopNGramsFilter(n=n), lambda t, n=n: ref_top_ngrams(t, n)) for n in (1, 2, 3, 4)],
    *[(F.RepeatingDuplicateNGramsFilter(n=n), lambda t, n=n: ref_duplicate_ngrams(t, n))
      for n in (2, 5, 7, 10)],
    (F.PunctuationFilter(), ref_punctuation),
    (F.EllipsisFilter(), ref_ellipsis),
    (F.CommonEnglishWordsFilter(), ref_common_words),
    (F.CommonEnglishWordsFilter(min_num_common_words=3, stop_at_false=False),
     lambda t: ref_common_words(t, 3, False)),
    (F.WordsWithoutAlphabetsFilter(), ref_words_with_alphabets),
    (F.PornographicUrlsFilter(), ref_pornographic),
    (F.SubstringFilter("the", "prefix"), lambda t: int(t.startswith("the"))),
    (F.SubstringFilter("...", "suffix"), lambda t: int(t.endswith("..."))),
    (F.SubstringFilter("cat dog", "any"), lambda t: int("cat dog" in t)),
]


@pytest.mark.parametrize(("filter_obj", "reference"), CASES,
                         ids=[f"{type(f).__name__}-{f.name}-{i}" for i, (f, _) in enumerate(CASES)])
def test_scores_equal_the_per_document_reference(filter_obj, reference):
    scores = filter_obj.score(TEXT)
    expected = [reference(plain(t)) for t in DOCS]
    assert str(scores.dtype) == filter_obj.score_dtype
    assert list(scores.index) == list(TEXT.index)
    if filter_obj.score_dtype == "int64":
        assert scores.tolist() == expected
    else:
        np.testing.assert_allclose(scores.to_numpy(), np.asarray(expected, dtype=float),
                                   rtol=1e-12, atol=0)
    # keep() agrees with the per-document keep_document() (NeMo's interface)
    sample = scores.iloc[::97]
    assert filter_obj.keep(sample).tolist() == [filter_obj.keep_document(v) for v in sample]


def test_token_count_matches_per_document_encode():
    class Words:
        def encode(self, text):
            return text.split()

    f = F.TokenCountFilter(Words(), min_tokens=3, max_tokens=40)
    assert f.score(TEXT).tolist() == [len(plain(t).split()) for t in DOCS]


# -- datatrove references (gopher_quality_filter.py, gopher_repetition_filter.py) -------------

def div(a, b):
    return a / b if b else math.nan


#: datatrove's PUNCTUATION_SET (``src/datatrove/utils/text.py``), transcribed from its
#: source: the ``PUNCTUATION`` string, the control characters it appends, and its
#: ``TERMINAL_PUNCTUATION`` of other scripts (here as code points).
DATATROVE_PUNCTUATION = (
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
)
DATATROVE_CONTROLS = [chr(x) for a, b in ((0, 9), (11, 13), (13, 32), (127, 160))
                      for x in range(a, b)]
DATATROVE_TERMINAL_PUNCTUATION = (
    "!.?\u0589\u061d\u061e\u061f\u06d4\u0700\u0701\u0702\u07f9\u0837\u0839\u083d"
    "\u083e\u0964\u0965\u104a\u104b\u1362\u1367\u1368\u166e\u1735\u1736\u17d4\u17d5"
    "\u17d6\u17d9\u17da\u1803\u1809\u1944\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b"
    "\u1b5e\u1b5f\u1b7d\u1b7e\u1c3b\u1c3c\u1c7e\u1c7f\u203c\u203d\u2047\u2048\u2049"
    "\u2e2e\u2e3c\u2e53\u2e54\u3002\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877\ua8ce"
    "\ua8cf\ua92f\ua9c8\ua9c9\uaa5d\uaa5e\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57"
    "\uff01\uff0e\uff1f\uff61\U00010a56\U00010a57\U00010f55\U00010f56\U00010f57"
    "\U00010f58\U00010f59\U00010f86\U00010f87\U00010f88\U00010f89\U00011047\U00011048"
    "\U000110be\U000110bf\U000110c0\U000110c1\U00011141\U00011142\U00011143\U000111c5"
    "\U000111c6\U000111cd\U000111de\U000111df\U00011238\U00011239\U0001123b\U0001123c"
    "\U000112a9\U0001144b\U0001144c\U000115c2\U000115c3\U000115c9\U000115ca\U000115cb"
    "\U000115cc\U000115cd\U000115ce\U000115cf\U000115d0\U000115d1\U000115d2\U000115d3"
    "\U000115d4\U000115d5\U000115d6\U000115d7\U00011641\U00011642\U0001173c\U0001173d"
    "\U0001173e\U00011944\U00011946\U00011a42\U00011a43\U00011a9b\U00011a9c\U00011c41"
    "\U00011c42\U00011ef7\U00011ef8\U00011f43\U00011f44\U00016a6e\U00016a6f\U00016af5"
    "\U00016b37\U00016b38\U00016b44\U00016e98\U0001bc9f\U0001da88"
)
PUNCT = {*DATATROVE_PUNCTUATION, *DATATROVE_CONTROLS, *DATATROVE_TERMINAL_PUNCTUATION}
#: datatrove's ``GopherQualityFilter`` stop words (``gopher_quality_filter.py``), the
#: eight of the Gopher paper (Rae et al. 2021, appendix A.1.1).
STOP_WORDS = ["the", "be", "to", "of", "and", "that", "have", "with"]


def ref_gopher_quality(text, f):
    words = text.split()
    n_words = len(words)
    non_symbol = [w for w in words if any(ch not in PUNCT for ch in w)]
    if f.min_doc_words and len(non_symbol) < f.min_doc_words:
        return "word_count"
    if f.max_doc_words and len(non_symbol) > f.max_doc_words:
        return "word_count"
    mean = np.mean([len(w) for w in non_symbol]) if non_symbol else math.nan
    if mean < f.min_avg_word_length or mean > f.max_avg_word_length:
        return "mean_word_length"
    if div(text.count("#"), n_words) > f.max_symbol_word_ratio:
        return "hash_ratio"
    if div(text.count("...") + text.count("…"), n_words) > f.max_symbol_word_ratio:
        return "ellipsis_ratio"
    lines = text.splitlines()
    bullets = sum(s.lstrip().startswith("•") or s.lstrip().startswith("-") for s in lines)
    if div(bullets, len(lines)) > f.max_bullet_lines_ratio:
        return "bullet_lines"
    ends = sum(s.rstrip().endswith("...") or s.rstrip().endswith("…") for s in lines)
    if div(ends, len(lines)) > f.max_ellipsis_lines_ratio:
        return "ellipsis_lines"
    if div(sum(any(c.isalpha() for c in w) for w in words), n_words) < f.max_non_alpha_words_ratio:
        return "alpha_words"
    if len(set(STOP_WORDS) & set(words)) < f.min_stop_words:
        return "stop_words"
    return None


def find_duplicates(x):
    unique, chars, elements = set(), 0, 0
    for e in x:
        if e in unique:
            chars += len(e)
            elements += 1
        else:
            unique.add(e)
    return elements, chars


def ref_gopher_repetition(text, f):
    paragraphs = re.split(r"\n{2,}", text.strip())
    dups, chars = find_duplicates(paragraphs)
    if f.dup_para_frac and div(dups, len(paragraphs)) > f.dup_para_frac:
        return "duplicate_paragraphs"
    if f.dup_para_char_frac and div(chars, len(text)) > f.dup_para_char_frac:
        return "duplicate_paragraph_chars"
    lines = re.split("\n+", text)
    dups, chars = find_duplicates(lines)
    if f.dup_line_frac and div(dups, len(lines)) > f.dup_line_frac:
        return "duplicate_lines"
    if f.dup_line_char_frac and div(chars, len(text)) > f.dup_line_char_frac:
        return "duplicate_line_chars"
    words = text.split()
    for n, frac in f.top_n_grams:
        grams = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
        if not grams:
            continue
        top, count = Counter(grams).most_common(1)[0]
        if div(len(top) * count, len(text)) > frac:
            return f"top_{n}gram"
    for n, frac in f.dup_n_grams:
        unique, repeated, idx = set(), 0, 0
        while idx < len(words) - n + 1:
            gram = tuple(words[idx:idx + n])
            if gram in unique:
                repeated += sum(len(w) for w in gram)
                idx += n
            else:
                unique.add(gram)
                idx += 1
        if div(repeated, len(text)) > frac:
            return f"duplicate_{n}grams"
    return None


def gopher_friendly_corpus(n_docs=1500, seed=3):
    """Longer documents that reach the later Gopher rules, plus the edge-case corpus."""
    rng = np.random.default_rng(seed)
    vocab = ["the", "and", "of", "to", "with", "data", "models", "learn", "from", "text",
             "quality", "filters", "remove", "noise", "#", "...", "…", "•", "-", "123", "!!",
             "a", "is", "x" * 12]
    docs = []
    for _ in range(n_docs):
        lines = []
        for _ in range(int(rng.integers(1, 12))):
            picks = rng.integers(0, int(rng.integers(3, len(vocab))), size=int(rng.integers(1, 20)))
            line = " ".join(vocab[i] for i in picks)
            roll = rng.random()
            if roll < 0.2:
                line = ("• ", "- ", "  ")[int(rng.integers(3))] + line
            elif roll < 0.4:
                line += ("...", "…", " ...")[int(rng.integers(3))]
            lines.append(line)
        if rng.random() < 0.3:
            lines += lines[: int(rng.integers(1, len(lines) + 1))]
        docs.append(("\n", "\n\n")[int(rng.integers(2))].join(lines))
    return docs + [plain(t) for t in DOCS[:1500]]


GOPHER_DOCS = gopher_friendly_corpus()


@pytest.mark.parametrize("filter_obj", [
    F.GopherQualityFilter(),
    F.GopherQualityFilter(min_doc_words=5, min_stop_words=1, max_non_alpha_words_ratio=0.5),
])
def test_gopher_quality_equals_datatrove_rules_per_document(filter_obj):
    scores = filter_obj.score(pd.Series(GOPHER_DOCS, dtype="str"))
    expected = [ref_gopher_quality(t, filter_obj) for t in GOPHER_DOCS]
    got = [None if isinstance(s, float) else s for s in scores.tolist()]
    assert got == expected
    assert len(set(expected)) >= 5  # the corpus reaches several rules


@pytest.mark.parametrize("filter_obj", [
    F.GopherRepetitionFilter(),
    F.GopherRepetitionFilter(dup_line_frac=None, dup_para_frac=None, dup_line_char_frac=None,
                             dup_para_char_frac=None, top_n_grams=((2, 0.5), (3, 0.4))),
])
def test_gopher_repetition_equals_datatrove_rules_per_document(filter_obj):
    scores = filter_obj.score(pd.Series(GOPHER_DOCS, dtype="str"))
    expected = [ref_gopher_repetition(t, filter_obj) for t in GOPHER_DOCS]
    got = [None if isinstance(s, float) else s for s in scores.tolist()]
    assert got == expected
    assert len(set(expected)) >= 4


# -- C4 reference (datatrove c4_filters.py, with the documented sentence count) --------------

CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
SENTENCE_END = re.compile(r"[.?!]+[\"'”’)\]]*(?:\s|$)")


def ref_c4(text, min_num_sentences=5, min_words_per_line=3, max_word_length=1000,
           lorem=True, curly=True):
    kept, sentences = [], 0
    for line in text.splitlines():
        line = line.strip()
        words = line.split()
        if max_word_length != -1 and any(len(w) > max_word_length for w in words):
            continue
        line = CITATION.sub("", line)
        if not line.endswith((".", "?", "!", '"', "'")) or line.endswith("..."):
            continue
        if len(words) < min_words_per_line:
            continue
        lowered = line.lower()
        if lorem and "lorem ipsum" in lowered:
            return "lorem_ipsum", None
        if "javascript" in lowered:
            continue
        if curly and "{" in line:
            return "curly_bracket", None
        if any(p in lowered for p in F.c4.C4_POLICY_SUBSTRINGS):
            continue
        sentences += max(1, len(SENTENCE_END.findall(line)))
        kept.append(line)
    if min_num_sentences != -1 and sentences < min_num_sentences:
        return "too_few_sentences", "\n".join(kept).strip()
    return None, "\n".join(kept).strip()


def c4_corpus(n_docs=1500, seed=11):
    rng = np.random.default_rng(seed)
    line_kinds = ["This is a complete sentence.", "Another one here! And more?",
                  "Short line", "We use cookies on this site.", "Enable JavaScript now.",
                  "Lorem ipsum dolor sit amet.", "code { here } ok.", "See the list [1].",
                  "Trailing ellipsis goes...", 'He said "yes."', "Mr. Smith went to Washington.",
                  "a b", "x" * 30 + " is long ok.", "Ends with\xa0space .", "[edit] Nope"]
    docs = []
    for _ in range(n_docs):
        picks = rng.integers(0, len(line_kinds), size=int(rng.integers(0, 12)))
        docs.append(("\n", "\r\n", "\n\n")[int(rng.integers(3))].join(line_kinds[i] for i in picks))
    return docs + [plain(t) for t in DOCS[:1000]]


C4_DOCS = c4_corpus()


def test_c4_quality_equals_per_document_reference():
    f = F.C4QualityFilter(max_word_length=20)
    scores = f.score(pd.Series(C4_DOCS, dtype="str"))
    expected = [ref_c4(t, max_word_length=20)[0] for t in C4_DOCS]
    assert [None if isinstance(s, float) else s for s in scores.tolist()] == expected
    assert set(expected) == {None, "lorem_ipsum", "curly_bracket", "too_few_sentences"}


def test_c4_line_cleaner_equals_per_document_reference():
    from curator_dask.stages.modifiers import C4LineCleaner

    out = C4LineCleaner(max_word_length=20).modify(pd.Series(C4_DOCS, dtype="str"))
    expected = [ref_c4(t, min_num_sentences=-1, max_word_length=20, lorem=False, curly=False)[1]
                for t in C4_DOCS]
    assert out.tolist() == expected
