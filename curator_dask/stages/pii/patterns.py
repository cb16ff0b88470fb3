"""Patterned PII found over a whole partition at once: emails, phone numbers, IP
addresses, credit-card numbers, IBANs, US social security numbers and URLs.

How a partition is searched, per entity type:

1. an Arrow (RE2) regular expression that every match must contain marks the candidate
   documents, in one linear pass over the partition's UTF-8 buffer (most documents hold
   no entity of a given type, so the next step sees few of them);
2. the candidates are joined, NUL-separated, into one Python string and the entity's
   full pattern (lookarounds included) runs over it once with ``re.finditer``: the
   Python work is per match, never per document, and offsets come out in characters
   (code points), the unit a user slices a Python string with;
3. checksums and number rules run vectorised over all candidates of the partition:
   Luhn for card numbers, ISO 7064 mod-97 and the country's length for IBANs, the
   invalid area, group and serial rules for SSNs (numpy arrays of digits).

No pattern can match a NUL or cross it, so a match never spans two documents.

Entity names and the replacement tags are Presidio's (``EMAIL_ADDRESS`` becomes
``<EMAIL_ADDRESS>``), which NeMo Curator's PII modifier uses too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator_dask.errors import InvalidArgumentError
from curator_dask.text import buffers, lengths

__all__ = [
    "PATTERN_ENTITIES",
    "Spans",
    "find_pattern_spans",
    "iban_valid",
    "luhn_valid",
    "ssn_valid",
]

#: The entity types found by patterns, in the order overlapping matches are preferred
#: when they cover the same characters.
PATTERN_ENTITIES = ("EMAIL_ADDRESS", "URL", "IBAN_CODE", "CREDIT_CARD", "US_SSN",
                    "PHONE_NUMBER", "IP_ADDRESS")

_SEPARATOR = "\x00"

# -- the patterns ---------------------------------------------------------------------------
# Boundaries are ASCII: an entity glued to non-Latin text ("联系jane@example.com获取") is
# still found, and its offsets stay exact.

_EMAIL = (r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9_%+\-]+(?:\.[A-Za-z0-9_%+\-]+)*"
          r"@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}"
          r"(?![A-Za-z0-9\-]|\.[A-Za-z0-9])")
# A URL ends before trailing sentence punctuation and never contains whitespace or NUL.
_URL_TAIL = r"""[^\s\x00<>"'`]*[^\s\x00<>"'`.,;:!?)\]}]"""
_URL = (r"(?i)(?<![A-Za-z0-9])(?:(?:https?|ftp)://" + _URL_TAIL
        + r"|www\d{0,3}\.[a-z0-9\-]+(?:\.[a-z0-9\-]+)+(?:/" + _URL_TAIL + r")?)")
_IBAN = (r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?"
         r"(?![A-Za-z0-9])")
# 16-19 digits in groups of four, American Express (4-6-5) and Diners (4-6-4); the
# separator, if any, is the same throughout.
_CARD = (r"(?<![\w\-])(?:[2-6][0-9]{3}([ \-]?)[0-9]{4}\1[0-9]{4}\1[0-9]{4,7}"
         r"|3[47][0-9]{2}([ \-]?)[0-9]{6}\2[0-9]{5}"
         r"|3(?:0[0-5]|[689][0-9])[0-9]([ \-]?)[0-9]{6}\3[0-9]{4})(?![\w\-])")
_SSN = (r"(?<![\w\-])(?!000|666|9[0-9]{2})[0-9]{3}([\- ])(?!00)[0-9]{2}\1(?!0000)[0-9]{4}"
        r"(?![\w\-])")
# North American numbers (area and exchange codes start with 2-9), and international
# numbers written with a "+" and a country code (8 to 15 digits, checked afterwards).
_PHONE = (r"(?<![\w+\-])(?:(?:\+?1[ .\-]?)?(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[ .\-])"
          r"[2-9][0-9]{2}[ .\-][0-9]{4}"
          r"|\+[1-9][0-9]{0,2}(?:[ .\-]?\(?[0-9]{1,6}\)?){1,6})(?![\w\-])")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\.?[0-9]|[A-Za-z_])"
_H = r"[0-9A-Fa-f]{1,4}"
_IPV6 = (r"(?<![\w:])(?:"
         rf"(?:{_H}:){{7}}{_H}|(?:{_H}:){{1,7}}:|(?:{_H}:){{1,6}}:{_H}"
         rf"|(?:{_H}:){{1,5}}(?::{_H}){{1,2}}|(?:{_H}:){{1,4}}(?::{_H}){{1,3}}"
         rf"|(?:{_H}:){{1,3}}(?::{_H}){{1,4}}|(?:{_H}:){{1,2}}(?::{_H}){{1,5}}"
         rf"|{_H}:(?::{_H}){{1,6}}|:(?::{_H}){{1,7}}"
         rf"|::(?:ffff(?::0{{1,4}})?:)?{_OCTET}(?:\.{_OCTET}){{3}})"
         r"(?![\w:]|\.[0-9])")


@dataclass(frozen=True)
class _Pattern:
    entity: str
    regex: re.Pattern
    #: RE2 pattern that every match contains: selects the candidate documents.
    prefilter: str


_PATTERNS = (
    _Pattern("EMAIL_ADDRESS", re.compile(_EMAIL), r"[A-Za-z0-9_%+\-]@[A-Za-z0-9]"),
    _Pattern("URL", re.compile(_URL), r"(?i)(?:https?|ftp)://|www[0-9]{0,3}\.[a-z0-9]"),
    _Pattern("IBAN_CODE", re.compile(_IBAN), r"[A-Z]{2}[0-9]{2} ?[A-Z0-9]{4} ?[A-Z0-9]{4}"),
    _Pattern("CREDIT_CARD", re.compile(_CARD), r"[0-9]{4}[ \-]?[0-9]{4,6}[ \-]?[0-9]{4}"),
    _Pattern("US_SSN", re.compile(_SSN), r"[0-9]{3}[\- ][0-9]{2}[\- ][0-9]{4}"),
    _Pattern("PHONE_NUMBER", re.compile(_PHONE),
             r"[0-9]{3}[ .\-)] ?[0-9]{3}[ .\-][0-9]{4}|\+[0-9]"),
    _Pattern("IP_ADDRESS", re.compile(f"{_IPV4}|{_IPV6}"),
             r"[0-9]\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]|[0-9A-Fa-f]*:[0-9A-Fa-f]*:"),
)


# -- spans ----------------------------------------------------------------------------------

@dataclass
class Spans:
    """Entities found in a partition, as flat arrays: entity ``k`` of type
    ``types[kinds[k]]`` covers characters ``[starts[k], ends[k])`` of document
    ``docs[k]`` (positions in the partition, not index labels)."""

    docs: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    kinds: np.ndarray
    types: tuple[str, ...]

    @classmethod
    def empty(cls, types: Sequence[str]) -> Spans:
        none = np.zeros(0, np.int64)
        return cls(none, none.copy(), none.copy(), none.copy(), tuple(types))

    def __len__(self) -> int:
        return len(self.docs)

    def take(self, index) -> Spans:
        return Spans(self.docs[index], self.starts[index], self.ends[index],
                     self.kinds[index], self.types)

    @classmethod
    def concat(cls, parts: Sequence[Spans], types: Sequence[str]) -> Spans:
        """Spans of several searches, with their kinds renumbered into ``types``."""
        types = tuple(types)
        if not parts:
            return cls.empty(types)
        kinds = [np.array([types.index(t) for t in p.types], np.int64)[p.kinds]
                 if len(p) else p.kinds for p in parts]
        return cls(np.concatenate([p.docs for p in parts]),
                   np.concatenate([p.starts for p in parts]),
                   np.concatenate([p.ends for p in parts]), np.concatenate(kinds), types)

    def resolve_overlaps(self) -> Spans:
        """Keep non-overlapping spans, in document order: at each position the longest
        span wins, then the type listed first; a span overlapping a kept one is dropped."""
        if len(self) < 2:
            return self
        order = np.lexsort((self.kinds, self.starts - self.ends, self.starts, self.docs))
        s = self.take(order)
        keep = _non_overlapping(s.docs, s.starts, s.ends)
        return s.take(keep)


def _non_overlapping(docs, starts, ends) -> np.ndarray:
    """Which of the sorted spans (by document, start, longest first) to keep."""
    keep = np.ones(len(docs), bool)
    # Until a document's first overlap its kept spans are disjoint and sorted, so the
    # first overlap shows as a span starting before its predecessor's end: overlaps are
    # rare, and only the documents that have one are walked.
    same_doc = np.r_[False, docs[1:] == docs[:-1]]
    clash = same_doc & (starts < np.r_[0, ends[:-1]])
    for doc in np.unique(docs[clash]):
        end = -1
        for k in range(np.searchsorted(docs, doc), np.searchsorted(docs, doc, "right")):
            if starts[k] < end:
                keep[k] = False
            else:
                end = ends[k]
    return keep


# -- searching ------------------------------------------------------------------------------

def _joined(arr: pa.Array) -> tuple[str, np.ndarray]:
    """The strings of ``arr`` joined by NUL as one Python string, and each string's
    first character in it."""
    data, offsets = buffers(arr)
    data = data[offsets[0]:offsets[-1]]
    inner = offsets[1:-1] - offsets[0]
    joined = np.insert(data, inner, np.uint8(0)).tobytes().decode("utf-8")
    char_starts = np.zeros(len(arr), np.int64)
    np.cumsum(lengths(arr)[:-1] + 1, out=char_starts[1:])
    return joined, char_starts


def _search(pattern: _Pattern, arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                          list[str]]:
    """(documents, starts, ends, matched texts) of ``pattern`` over ``arr``."""
    candidates = pc.match_substring_regex(arr, pattern.prefilter)
    rows = np.flatnonzero(candidates.to_numpy(zero_copy_only=False))
    if not len(rows):
        none = np.zeros(0, np.int64)
        return none, none, none, []
    joined, char_starts = _joined(arr.take(pa.array(rows)))
    found = [(m.start(), m.end(), m.group()) for m in pattern.regex.finditer(joined)]
    if not found:
        none = np.zeros(0, np.int64)
        return none, none, none, []
    starts = np.fromiter((f[0] for f in found), np.int64, len(found))
    ends = np.fromiter((f[1] for f in found), np.int64, len(found))
    which = np.searchsorted(char_starts, starts, side="right") - 1
    return rows[which], starts - char_starts[which], ends - char_starts[which], \
        [f[2] for f in found]


def find_pattern_spans(arr: pa.Array, entities: Sequence[str] = PATTERN_ENTITIES) -> Spans:
    """Every patterned entity of ``entities`` in a partition's text (an Arrow string
    array, nulls as empty), validated, overlaps not yet resolved.

    Examples
    --------
    >>> import pyarrow as pa
    >>> spans = find_pattern_spans(pa.array(["mail jane@example.com", "none here",
    ...                                      "card 4111 1111 1111 1111, not 4111 1111 1111 1112"]))
    >>> [(int(d), int(s), int(e), spans.types[k]) for d, s, e, k in
    ...  zip(spans.docs, spans.starts, spans.ends, spans.kinds)]
    [(0, 5, 21, 'EMAIL_ADDRESS'), (2, 5, 24, 'CREDIT_CARD')]
    """
    unknown = [e for e in entities if e not in PATTERN_ENTITIES]
    if unknown:
        raise InvalidArgumentError(
            f"no pattern for entity type(s) {unknown}; the patterned types are "
            f"{list(PATTERN_ENTITIES)}")
    parts = []
    for pattern in _PATTERNS:
        if pattern.entity not in entities:
            continue
        docs, starts, ends, texts = _search(pattern, arr)
        if not len(docs):
            continue
        if pattern.entity == "IBAN_CODE":
            ends = starts + _iban_lengths(texts)
        valid = _VALIDATORS.get(pattern.entity)
        if valid is not None:
            ok = valid([t[:n] for t, n in zip(texts, ends - starts, strict=True)] if
                       pattern.entity == "IBAN_CODE" else texts)
            docs, starts, ends = docs[ok], starts[ok], ends[ok]
        kinds = np.zeros(len(docs), np.int64)
        parts.append(Spans(docs, starts, ends, kinds, (pattern.entity,)))
    return Spans.concat(parts, entities)


# -- checks on candidates, vectorised ------------------------------------------------------------

def _digit_matrix(texts: Sequence[str], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Digits of each text, right-aligned in a ``(len(texts), width)`` int array (zeros
    on the left), and how many digits each has."""
    digits = pc.replace_substring_regex(pa.array(texts, pa.string()), r"[^0-9]", "")
    counts = lengths(digits)
    padded = pc.utf8_lpad(digits, width, "0")
    data, _ = buffers(padded.cast(pa.large_string()))
    matrix = data.reshape(len(texts), width).astype(np.int64) - ord("0")
    return matrix, counts


def luhn_valid(texts: Sequence[str]) -> np.ndarray:
    """The Luhn checksum of each text's digits (separators ignored), vectorised.

    Examples
    --------
    >>> luhn_valid(["4111 1111 1111 1111", "4111-1111-1111-1112", "378282246310005"]).tolist()
    [True, False, True]
    """
    if not len(texts):
        return np.zeros(0, bool)
    width = 20
    matrix, _ = _digit_matrix(texts, width)
    # Counting from the rightmost digit, every second digit is doubled (minus 9 if > 9).
    doubled = np.zeros(width, bool)
    doubled[width - 2::-2] = True
    values = matrix.copy()
    values[:, doubled] *= 2
    values[values > 9] -= 9
    return values.sum(axis=1) % 10 == 0


#: IBAN lengths by country (ISO 13616 registry).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
    "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}


def iban_valid(texts: Sequence[str]) -> np.ndarray:
    """IBAN checks of each text (spaces ignored), vectorised: the country's length and the
    ISO 7064 mod-97 check (the rearranged number modulo 97 is 1).

    Examples
    --------
    >>> iban_valid(["GB82 WEST 1234 5698 7654 32", "GB82 WEST 1234 5698 7654 33",
    ...             "DE89370400440532013000"]).tolist()
    [True, False, True]
    """
    if not len(texts):
        return np.zeros(0, bool)
    compact = pc.replace_substring(pa.array(texts, pa.string()), " ", "")
    n_chars = lengths(compact)
    country = pc.utf8_slice_codeunits(compact, 0, 2).to_pylist()
    expected = np.array([IBAN_LENGTHS.get(c, -1) for c in country], np.int64)
    width = 34
    rearranged = pc.binary_join_element_wise(pc.utf8_slice_codeunits(compact, 4),
                                             pc.utf8_slice_codeunits(compact, 0, 4), "")
    padded = pc.utf8_rpad(pc.utf8_slice_codeunits(rearranged, 0, width), width, "\x00")
    data, _ = buffers(padded.cast(pa.large_string()))
    chars = data.reshape(len(texts), width).astype(np.int64)
    is_digit = (chars >= ord("0")) & (chars <= ord("9"))
    is_letter = (chars >= ord("A")) & (chars <= ord("Z"))
    values = np.where(is_digit, chars - ord("0"), chars - ord("A") + 10)
    remainder = np.zeros(len(texts), np.int64)
    for column in range(width):
        present = is_digit[:, column] | is_letter[:, column]
        scale = np.where(is_letter[:, column], 100, 10)
        remainder = np.where(present, (remainder * scale + values[:, column]) % 97, remainder)
    return (n_chars == expected) & (remainder == 1)


def _iban_lengths(texts: Sequence[str]) -> np.ndarray:
    """Characters of each IBAN candidate to keep: all of it, or, where it holds more
    characters than its country's IBAN, the prefix of that many (spaces not counted).
    The pattern's optional last group can take in a short word after the number
    ("DE89 3704 0044 0532 0130 00 BIC"): the check then runs on the number alone."""
    out = np.fromiter((len(t) for t in texts), np.int64, len(texts))
    for i, text in enumerate(texts):
        expected = IBAN_LENGTHS.get(text[:2])
        if expected is None or len(text) - text.count(" ") <= expected:
            continue
        kept = 0
        for j, ch in enumerate(text):
            kept += ch != " "
            if kept == expected:
                out[i] = j + 1
                break
    return out


def ssn_valid(texts: Sequence[str]) -> np.ndarray:
    """US SSN rules the pattern cannot state: not all one digit, and not one of the
    numbers published as examples (as Presidio's ``UsSsnRecognizer``). The invalid area
    (000, 666, 900-999), group (00) and serial (0000) rules are in the pattern.

    Examples
    --------
    >>> ssn_valid(["536-22-8726", "111-11-1111", "078-05-1120"]).tolist()
    [True, False, False]
    """
    if not len(texts):
        return np.zeros(0, bool)
    matrix, _ = _digit_matrix(texts, 9)
    same = (matrix == matrix[:, :1]).all(axis=1)
    number = matrix @ (10 ** np.arange(8, -1, -1, dtype=np.int64))
    published = np.isin(number, [123456789, 987654320, 78051120])
    return ~same & ~published


def _phone_valid(texts: Sequence[str]) -> np.ndarray:
    # International numbers have 8 to 15 digits (E.164); North American ones 10 or 11.
    digits = pc.replace_substring_regex(pa.array(texts, pa.string()), r"[^0-9]", "")
    counts = lengths(digits)
    return (counts >= 8) & (counts <= 15)


_VALIDATORS = {
    "CREDIT_CARD": luhn_valid,
    "IBAN_CODE": iban_valid,
    "US_SSN": ssn_valid,
    "PHONE_NUMBER": _phone_valid,
}
