"""URL filters: blocked domains, and banned words in the URL (FineWeb's rule).

Both read the ``url`` column (that of :meth:`~curator_dask.DocumentDataset.read_warc`)
unless ``ScoreFilter(..., text_field=...)`` names another, and both take their lists
from files the user supplies: one entry per line, blank lines and lines starting with
``#`` ignored, any fsspec path (``.gz`` and other compression suffixes are decompressed).
A list file is read on the client (to fail early on a missing file) and again, once,
by each worker process: a multi-million-line blocklist is never shipped with the tasks.

``PornographicUrlsFilter`` (NeMo Curator's, in :mod:`.heuristic`) stays as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.errors import InvalidArgumentError
from curator_dask.stages.filters.base import DocumentFilter
from curator_dask.text import arrow_text, like_input

__all__ = ["DomainBlocklistFilter", "UrlKeywordFilter", "read_list"]

# scheme://[user@]host[:port]/...; the scheme is optional ("example.com/page").
_HOST = r"^(?:[a-zA-Z][a-zA-Z0-9+.\-]*://)?(?:[^@/?#]*@)?(?P<host>[^:/?#]*)"
# FineWeb (datatrove's URLFilter) splits URLs into words at runs of anything but ASCII
# letters and digits.
_NOT_WORD = "[^a-z0-9]+"


def read_list(path: str, *, storage_options: dict | None = None) -> list[str]:
    """The entries of a list file: one a line, stripped, without blanks and ``#`` comments.

    Examples
    --------
    >>> import fsspec
    >>> with fsspec.open("memory://lists/d.txt", "w") as f:
    ...     _ = f.write("# adult\\nexample.com\\n\\n  Other.ORG \\n")
    >>> read_list("memory://lists/d.txt")
    ['example.com', 'Other.ORG']
    """
    with fsspec.open(path, "rt", encoding="utf-8", compression="infer",
                     **(storage_options or {})) as handle:
        return [line.strip() for line in handle
                if line.strip() and not line.lstrip().startswith("#")]


class _ListFilter(DocumentFilter):
    """A filter built from lists given inline or as files (read again where it runs)."""

    default_field = "url"
    score_dtype = "str"

    def __init__(self, files: dict[str, str | None], inline: dict[str, Iterable[str] | None],
                 storage_options: dict | None):
        self.files = {k: v for k, v in files.items() if v is not None}
        self.inline = {k: list(v or ()) for k, v in inline.items()}
        self.storage_options = dict(storage_options or {})
        self._lists: dict[str, list[str]] | None = None
        if not any(self.files.values()) and not any(self.inline.values()):
            raise InvalidArgumentError(f"{type(self).__name__} needs a list: give a file "
                             f"({', '.join(f'{k}_file' for k in inline)}) or entries")
        self._lists = self._load()

    def _load(self) -> dict[str, list[str]]:
        lists = {key: list(values) for key, values in self.inline.items()}
        for key, path in self.files.items():
            lists[key] = lists[key] + read_list(path, storage_options=self.storage_options)
        return lists

    def lists(self) -> dict[str, list[str]]:
        if self._lists is None:
            self._lists = self._load()
        return self._lists

    def __getstate__(self):
        state = dict(self.__dict__)
        if self.files:  # read from the files again where the filter runs
            state = {k: v for k, v in state.items() if not k.startswith("_")}
            state["_lists"] = None
        return state

    def keep(self, scores):
        return scores.fillna("") == ""


class DomainBlocklistFilter(_ListFilter):
    """Drop documents whose URL's host is a blocked domain or inside one.

    A listed ``example.com`` blocks ``example.com`` and every subdomain
    (``www.example.com``, ``a.b.example.com``), as the UT1 blocklists that FineWeb uses
    mean; hosts and entries are compared in lower case, and a leading ``*.`` or ``.``
    of an entry is ignored. Score: the listed domain that matched (the longest), or
    ``""``.

    Parameters
    ----------
    blocklist_file : str, optional
        A file of domains, one a line.
    domains : list of str, optional
        More domains.
    storage_options : dict, optional
        fsspec options for reading the file.

    Examples
    --------
    >>> import pandas as pd
    >>> f = DomainBlocklistFilter(domains=["casino.example", "ads.net"])
    >>> urls = pd.Series(["https://www.Casino.example/x", "http://ads.net.org/", "ads.net/p"])
    >>> f.score(urls).tolist(), f.keep(f.score(urls)).tolist()
    (['casino.example', '', 'ads.net'], [False, True, False])
    """

    name = "domain_blocklist"

    def __init__(self, blocklist_file: str | None = None, domains: Sequence[str] | None = None,
                 storage_options: dict | None = None):
        super().__init__({"domains": blocklist_file}, {"domains": domains}, storage_options)
        self._index: pd.Index | None = None

    def _domains(self) -> pd.Index:
        if getattr(self, "_index", None) is None:
            cleaned = {d.lower().lstrip("*").strip(".") for d in self.lists()["domains"]}
            # get_indexer hashes the index once and keeps the table for later calls.
            self._index = pd.Index(sorted(cleaned - {""}), dtype=object)
        return self._index

    def score(self, text):
        urls = arrow_text(text)
        hosts = pc.struct_field(pc.extract_regex(urls, _HOST), [0])
        hosts = pc.utf8_rtrim(pc.ascii_lower(hosts), characters=".")
        index = self._domains()
        matched = np.full(len(urls), "", dtype=object)
        # Longest first: the host itself, then each parent domain in turn.
        for _ in range(int(pc.max(pc.count_substring(hosts, ".")).as_py() or 0) + 1):
            candidates = hosts.to_numpy(zero_copy_only=False)
            found = (index.get_indexer(candidates) >= 0) & (matched == "")
            matched[found] = candidates[found]
            hosts = pc.replace_substring_regex(hosts, r"^[^.]*(\.|$)", "", max_replacements=1)
        return like_input(matched, text, "str")


class UrlKeywordFilter(_ListFilter):
    """Drop documents whose URL holds banned words: FineWeb's URL rule (datatrove's
    ``URLFilter``, less its domain and URL lists, which :class:`DomainBlocklistFilter`
    covers).

    The URL, lower-cased, is split into words at every run of characters other than
    ASCII letters and digits. A document is dropped (rules in this order):

    - ``word``: one of its words is a banned word;
    - ``soft_words``: at least ``soft_word_threshold`` different soft-banned words are
      among its words;
    - ``subword``: a banned subword occurs anywhere in the URL with every character
      other than letters and digits removed (``p-o-r-n`` matches ``porn``).

    List entries are normalized the same way (lower case, letters and digits only).
    Datatrove compares the URL's words case-sensitively with lower-case lists, so an
    upper-case banned word passes it; here it does not. Score: the rule that rejects,
    or ``""``; the rule is the drop reason (``url_keywords.word``, ...).

    Parameters
    ----------
    banned_words_file, soft_banned_words_file, banned_subwords_file : str, optional
        List files (one entry a line).
    soft_word_threshold : int, default 2
    banned_words, soft_banned_words, banned_subwords : list of str, optional
        More entries.
    storage_options : dict, optional

    Examples
    --------
    >>> import pandas as pd
    >>> f = UrlKeywordFilter(banned_words=["casino"], soft_banned_words=["hot", "free"],
    ...                      banned_subwords=["xxx"])
    >>> urls = pd.Series(["http://a.com/Casino-night", "http://free.com/hot", "http://x-x-x.io",
    ...                   "http://casinos.com/hot"])
    >>> f.score(urls).tolist()
    ['word', 'soft_words', 'subword', '']
    """

    name = "url_keywords"

    def __init__(self, banned_words_file: str | None = None,
                 soft_banned_words_file: str | None = None,
                 banned_subwords_file: str | None = None, soft_word_threshold: int = 2,
                 banned_words: Sequence[str] | None = None,
                 soft_banned_words: Sequence[str] | None = None,
                 banned_subwords: Sequence[str] | None = None,
                 storage_options: dict | None = None):
        if not isinstance(soft_word_threshold, int) or soft_word_threshold < 1:
            raise InvalidArgumentError(f"soft_word_threshold must be a positive integer, got "
                             f"{soft_word_threshold!r}")
        self.soft_word_threshold = soft_word_threshold
        super().__init__(
            {"words": banned_words_file, "soft": soft_banned_words_file,
             "subwords": banned_subwords_file},
            {"words": banned_words, "soft": soft_banned_words, "subwords": banned_subwords},
            storage_options)
        self._compiled = None

    def _prepared(self):
        if getattr(self, "_compiled", None) is None:
            def normalized(key):
                return sorted({re.sub(_NOT_WORD, "", w.lower()) for w in self.lists()[key]}
                              - {""})

            subwords = normalized("subwords")
            self._compiled = (
                pa.array(normalized("words"), pa.large_string()),
                pd.Index(normalized("soft"), dtype=object),
                "|".join(re.escape(w) for w in subwords) if subwords else None,
            )
        return self._compiled

    def score(self, text):
        words_set, soft_index, subword_pattern = self._prepared()
        urls = pc.ascii_lower(arrow_text(text))
        n = len(urls)
        split = pc.split_pattern_regex(urls, _NOT_WORD)
        flat = pc.list_flatten(split)
        parents = pc.list_parent_indices(split).to_numpy()

        banned = pc.is_in(flat, value_set=words_set).to_numpy(zero_copy_only=False)
        word_hit = np.bincount(parents[banned], minlength=n) > 0

        soft_ids = soft_index.get_indexer(flat.to_numpy(zero_copy_only=False))
        present = soft_ids >= 0
        pairs = np.unique(parents[present] * max(len(soft_index), 1) + soft_ids[present])
        soft_count = np.bincount(pairs // max(len(soft_index), 1), minlength=n)
        soft_hit = soft_count >= self.soft_word_threshold

        if subword_pattern is not None:
            squeezed = pc.replace_substring_regex(urls, _NOT_WORD, "")
            sub_hit = pc.match_substring_regex(squeezed, subword_pattern).to_numpy(
                zero_copy_only=False)
        else:
            sub_hit = np.zeros(n, dtype=bool)

        rule = np.select([word_hit, soft_hit, sub_hit], ["word", "soft_words", "subword"],
                         default="")
        return like_input(rule.astype(object), text, "str")

    def drop_reasons(self, scores):
        return scores
