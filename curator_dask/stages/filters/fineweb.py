"""FineWeb's quality rules as one filter that names the rule dropping each document.

Source: Penedo et al. 2024, "The FineWeb Datasets" (arXiv:2406.17557), section 3.5;
rules, order and defaults follow datatrove's ``FineWebQualityFilter``
(``src/datatrove/pipeline/filters/fineweb_quality_filter.py``).

Difference from datatrove, on purpose: words (for ``list_ratio``) are ``text.split()``,
as in :mod:`.gopher`; datatrove's default English tokenizer also splits punctuation off
words, so it counts more words and drops fewer documents on this rule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from curator_dask.stages.filters.gopher import RuleSetFilter
from curator_dask.text import (
    arrow_text,
    count_classes,
    lengths,
    nonblank_lines,
    ratio,
    register_chars,
    words,
)

__all__ = ["FineWebQualityFilter"]

#: datatrove's ``TERMINAL_PUNCTUATION`` (``datatrove/utils/text.py``), as code point
#: ranges: the characters a line may end with to count as punctuated.
_TERMINAL = register_chars("datatrove_terminal_punctuation", *[
    (0x21, 0x21), (0x2E, 0x2E), (0x3F, 0x3F), (0x589, 0x589), (0x61D, 0x61F),
    (0x6D4, 0x6D4), (0x700, 0x702), (0x7F9, 0x7F9), (0x837, 0x837), (0x839, 0x839),
    (0x83D, 0x83E), (0x964, 0x965), (0x104A, 0x104B), (0x1362, 0x1362), (0x1367, 0x1368),
    (0x166E, 0x166E), (0x1735, 0x1736), (0x17D4, 0x17D6), (0x17D9, 0x17DA),
    (0x1803, 0x1803), (0x1809, 0x1809), (0x1944, 0x1945), (0x1AA8, 0x1AAB),
    (0x1B5A, 0x1B5B), (0x1B5E, 0x1B5F), (0x1B7D, 0x1B7E), (0x1C3B, 0x1C3C),
    (0x1C7E, 0x1C7F), (0x203C, 0x203D), (0x2047, 0x2049), (0x2E2E, 0x2E2E),
    (0x2E3C, 0x2E3C), (0x2E53, 0x2E54), (0x3002, 0x3002), (0xA4FF, 0xA4FF),
    (0xA60E, 0xA60F), (0xA6F3, 0xA6F3), (0xA6F7, 0xA6F7), (0xA876, 0xA877),
    (0xA8CE, 0xA8CF), (0xA92F, 0xA92F), (0xA9C8, 0xA9C9), (0xAA5D, 0xAA5F),
    (0xAAF0, 0xAAF1), (0xABEB, 0xABEB), (0xFE52, 0xFE52), (0xFE56, 0xFE57),
    (0xFF01, 0xFF01), (0xFF0E, 0xFF0E), (0xFF1F, 0xFF1F), (0xFF61, 0xFF61),
    (0x10A56, 0x10A57), (0x10F55, 0x10F59), (0x10F86, 0x10F89), (0x11047, 0x11048),
    (0x110BE, 0x110C1), (0x11141, 0x11143), (0x111C5, 0x111C6), (0x111CD, 0x111CD),
    (0x111DE, 0x111DF), (0x11238, 0x11239), (0x1123B, 0x1123C), (0x112A9, 0x112A9),
    (0x1144B, 0x1144C), (0x115C2, 0x115C3), (0x115C9, 0x115D7), (0x11641, 0x11642),
    (0x1173C, 0x1173E), (0x11944, 0x11944), (0x11946, 0x11946), (0x11A42, 0x11A43),
    (0x11A9B, 0x11A9C), (0x11C41, 0x11C42), (0x11EF7, 0x11EF8), (0x11F43, 0x11F44),
    (0x16A6E, 0x16A6F), (0x16AF5, 0x16AF5), (0x16B37, 0x16B38), (0x16B44, 0x16B44),
    (0x16E98, 0x16E98), (0x1BC9F, 0x1BC9F), (0x1DA88, 0x1DA88),
])


class FineWebQualityFilter(RuleSetFilter):
    """FineWeb's quality rules, in this order, over the non-blank lines
    (``text.split("\\n")``, lines that ``strip()`` to nothing left out):

    1. ``empty``: no non-blank line;
    2. ``line_punct_ratio``: fewer than ``line_punct_thr`` (12%) of the lines end with
       terminal punctuation (``.``, ``!``, ``?`` and their equivalents in other
       scripts); with ``line_punct_exclude_zero`` a document with none passes;
    3. ``short_line_ratio``: more than ``short_line_thr`` (67%) of the lines are at most
       ``short_line_length`` (30) characters long;
    4. ``char_dup_ratio``: the characters of lines that repeat an earlier line, over the
       characters of the text less its newlines, above ``char_duplicates_ratio`` (0.01);
    5. ``list_ratio``: newlines per word above ``new_line_ratio`` (0.3).

    Score: the first rule a document fails, or missing (NA); ``ScoreFilter`` counts drops
    as ``fineweb_quality.<rule>``. :meth:`measure` gives the statistics as columns.

    Examples
    --------
    >>> import pandas as pd
    >>> prose = "The council met on Monday to discuss the bridge and the new road plans."
    >>> menu = "\\n".join(["Home", "News", "Sport", "Contact"])
    >>> FineWebQualityFilter().score(pd.Series([prose, menu, ""])).tolist()
    [nan, 'line_punct_ratio', 'empty']
    """

    name = "fineweb_quality"

    def __init__(self, line_punct_thr: float = 0.12, line_punct_exclude_zero: bool = False,
                 short_line_thr: float = 0.67, short_line_length: int = 30,
                 char_duplicates_ratio: float = 0.01, new_line_ratio: float = 0.3):
        self.line_punct_thr = line_punct_thr
        self.line_punct_exclude_zero = line_punct_exclude_zero
        self.short_line_thr = short_line_thr
        self.short_line_length = short_line_length
        self.char_duplicates_ratio = char_duplicates_ratio
        self.new_line_ratio = new_line_ratio

    def measure(self, text) -> pd.DataFrame:
        """Columns: ``lines`` (non-blank), ``line_punct_ratio``, ``short_line_ratio``,
        ``char_dup_ratio`` and ``list_ratio`` (NaN where there is nothing to divide by)."""
        arr = arrow_text(text)
        lines = nonblank_lines(arr)
        n_lines = lines.per_doc_count()
        last_chars = pc.utf8_slice_codeunits(lines.values, -1)
        punctuated = count_classes(last_chars, _TERMINAL)[:, 0] > 0
        short = lines.nchars <= self.short_line_length
        duplicate_chars = lines.per_doc_sum(lines.nchars * ~lines.first_in_doc())
        newlines = pc.count_substring(arr, "\n").to_numpy(zero_copy_only=False)
        chars_less_newlines = lengths(arr) - newlines
        n_words = words(arr).per_doc_count()
        return pd.DataFrame({
            "lines": n_lines,
            "line_punct_ratio": ratio(lines.per_doc_sum(punctuated), n_lines, empty=np.nan),
            "short_line_ratio": ratio(lines.per_doc_sum(short), n_lines, empty=np.nan),
            "char_dup_ratio": ratio(duplicate_chars, chars_less_newlines, empty=np.nan),
            "list_ratio": ratio(newlines, n_words, empty=np.nan),
        })

    def _rules(self, stats: pd.DataFrame) -> list[tuple[str, np.ndarray]]:
        punct = stats["line_punct_ratio"].to_numpy()
        low_punct = punct < self.line_punct_thr
        if self.line_punct_exclude_zero:
            low_punct &= punct != 0
        return [
            ("empty", stats["lines"].to_numpy() == 0),
            ("line_punct_ratio", low_punct),
            ("short_line_ratio", stats["short_line_ratio"].to_numpy() > self.short_line_thr),
            ("char_dup_ratio", stats["char_dup_ratio"].to_numpy() > self.char_duplicates_ratio),
            ("list_ratio", stats["list_ratio"].to_numpy() > self.new_line_ratio),
        ]
