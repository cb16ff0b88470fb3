"""URL filters: lists from files, and scores equal to plain per-URL references.

The keyword reference is datatrove's ``URLFilter.filter`` (its word rules) transcribed,
with the one deviation the filter documents: URLs are lower-cased before they are split
into words. The domain reference walks the host from ``urllib.parse`` up its parents.
"""

from __future__ import annotations

import pickle
import re
import urllib.parse

import numpy as np
import pandas as pd
import pytest

from curator_dask import DocumentDataset
from curator_dask.stages.filters import (
    DomainBlocklistFilter,
    PornographicUrlsFilter,
    ScoreFilter,
    UrlKeywordFilter,
)

BLOCKED = ["casino.example", "ads.example.net", "tracker.io", "bad-site.org"]
WORDS = ["porn", "casino", "xxx", "escort"]
SOFT = ["hot", "free", "girls", "live", "cam"]
SUBWORDS = ["sexcam", "viagra", "nsfw"]


def generate_urls(n: int = 3000, seed: int = 11) -> list[str]:
    rng = np.random.default_rng(seed)
    labels = ["www", "m", "shop", "casino", "example", "ads", "tracker", "bad-site", "news",
              "Hot", "free", "blog", "cdn", "a1"]
    tlds = ["example", "net", "io", "org", "com", "example.net", "co.uk"]
    path_words = ["index", "Porn", "casino-night", "free", "hot", "live", "girls", "cam",
                  "via-gra", "sex_cam", "NSFW", "p0rn", "escorts", "xxx", "about", "2024",
                  "hotels", "camera", "%20", "ü"]
    out = []
    for _ in range(n):
        host = ".".join(rng.choice(labels, size=int(rng.integers(0, 3)))) + "."
        host = (host if host != "." else "") + str(rng.choice(tlds))
        if rng.random() < 0.2:
            host = host.upper()
        if rng.random() < 0.1:
            host += "."
        path = "/".join(rng.choice(path_words, size=int(rng.integers(0, 4))))
        scheme = str(rng.choice(["http://", "https://", "HTTPS://", ""], p=[.45, .45, .05, .05]))
        user = "user:pw@" if rng.random() < 0.05 else ""
        port = ":8080" if rng.random() < 0.1 else ""
        query = "?q=" + str(rng.choice(path_words)) if rng.random() < 0.3 else ""
        out.append(f"{scheme}{user}{host}{port}/{path}{query}")
    return [*out, "", "http://", "casino.example", "http://tracker.io"]


URLS = generate_urls()


# -- references --------------------------------------------------------------------------

def domain_reference(url: str, blocked: list[str]) -> str:
    blocked = {b.lower().lstrip("*").strip(".") for b in blocked}
    parsed = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
    host = (parsed.hostname or "").rstrip(".")
    while host:
        if host in blocked:
            return host
        host = host.partition(".")[2]
    return ""


normalizer = re.compile(r"[^a-zA-Z0-9]+")


def normalize(text, replace=""):
    return normalizer.sub(replace, text).lower()


def keyword_reference(url: str, banned_words, soft_banned_words, banned_subwords,
                      soft_word_threshold=2) -> str:
    # datatrove URLFilter.filter, word rules, on the lower-cased URL.
    banned_words = {normalize(x) for x in banned_words}
    soft_banned_words = {normalize(x) for x in soft_banned_words}
    banned_subwords = {normalize(x) for x in banned_subwords}
    url = url.lower()
    url_words = set(normalizer.split(url))
    if any(word in url_words for word in banned_words):
        return "word"
    nb_soft_words = sum([word in url_words for word in soft_banned_words])
    if nb_soft_words >= soft_word_threshold:
        return "soft_words"
    normalized_space = normalize(url)
    if banned_subwords and any(w in normalized_space for w in banned_subwords):
        return "subword"
    return ""


# -- equality with the references ---------------------------------------------------------

def test_domain_blocklist_scores_equal_the_reference():
    f = DomainBlocklistFilter(domains=[*BLOCKED, "*.Tracker.IO", "example.net."])
    scores = f.score(pd.Series(URLS, dtype="str")).tolist()
    expected = [domain_reference(u, [*BLOCKED, "*.Tracker.IO", "example.net."]) for u in URLS]
    assert scores == expected
    assert 100 < sum(s != "" for s in scores) < len(URLS) - 100


@pytest.mark.parametrize("threshold", [1, 2, 3])
def test_url_keyword_scores_equal_datatroves_rules(threshold):
    f = UrlKeywordFilter(banned_words=WORDS, soft_banned_words=SOFT, banned_subwords=SUBWORDS,
                         soft_word_threshold=threshold)
    scores = f.score(pd.Series(URLS, dtype="str")).tolist()
    expected = [keyword_reference(u, WORDS, SOFT, SUBWORDS, threshold) for u in URLS]
    assert scores == expected
    assert {"word", "soft_words", "subword", ""} <= set(scores)


def test_missing_urls_are_kept():
    f = UrlKeywordFilter(banned_words=WORDS)
    scores = f.score(pd.Series(["http://porn.example", None], dtype="str"))
    assert f.keep(scores).tolist() == [False, True]


# -- lists from files ---------------------------------------------------------------------

@pytest.fixture
def lists(tmp_path):
    (tmp_path / "domains.txt").write_text("# adult\ncasino.example\n\n  ADS.example.net \n")
    (tmp_path / "words.txt").write_text("porn\n# a comment\nescort\n")
    (tmp_path / "soft.txt").write_text("hot\nfree\ngirls\n")
    (tmp_path / "subwords.txt").write_text("sexcam\n")
    return tmp_path


def test_blocklists_from_files_drop_and_count_by_rule(lists):
    urls = ["https://www.casino.example/a", "http://ADS.example.net/x", "http://ok.org/porn",
            "http://ok.org/hot-free", "http://ok.org/sex-cam", "http://ok.org/about",
            "http://ok.org/hotel"]
    ds = DocumentDataset.from_pandas(
        pd.DataFrame({"url": urls, "text": [f"page {i}" for i in range(len(urls))]}),
        npartitions=2)
    domains = ScoreFilter(DomainBlocklistFilter(str(lists / "domains.txt")))
    words = ScoreFilter(UrlKeywordFilter(str(lists / "words.txt"), str(lists / "soft.txt"),
                                         str(lists / "subwords.txt")), score_field="url_rule")
    out = words(domains(ds))
    kept = out.df.compute()
    assert kept["url"].tolist() == ["http://ok.org/about", "http://ok.org/hotel"]
    assert kept["url_rule"].tolist() == ["", ""]
    assert out.dropped_counts() == {
        "domain_blocklist": 2, "url_keywords.soft_words": 1, "url_keywords.subword": 1,
        "url_keywords.word": 1}


def test_the_url_filters_score_the_url_column_unless_told_otherwise():
    f = DomainBlocklistFilter(domains=["a.com"])
    assert ScoreFilter(f).text_field == "url"
    assert ScoreFilter(f, text_field="source").text_field == "source"
    assert ScoreFilter(PornographicUrlsFilter()).text_field == "text"


def test_a_list_read_from_a_file_is_not_shipped_with_the_filter(lists):
    big = lists / "big.txt"
    big.write_text("".join(f"domain-{i}.example\n" for i in range(50_000)))
    f = DomainBlocklistFilter(str(big))
    f.score(pd.Series(["http://domain-7.example/"]))
    payload = pickle.dumps(f)
    assert len(payload) < 2_000
    copy = pickle.loads(payload)
    assert copy.score(pd.Series(["http://x.domain-49999.example/", "http://b.org"])).tolist() \
        == ["domain-49999.example", ""]


def test_a_missing_list_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.txt"):
        DomainBlocklistFilter(str(tmp_path / "nope.txt"))


def test_a_filter_without_any_list_is_refused():
    with pytest.raises(ValueError, match="needs a list"):
        UrlKeywordFilter()
