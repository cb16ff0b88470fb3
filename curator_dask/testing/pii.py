"""Documents with planted PII at known character offsets, for tests and benchmarks.

Each planted entity is a valid value of its type (card numbers pass Luhn, IBANs mod-97,
SSNs the number rules) written in one of the usual formats; documents also hold *decoys*
that look like entities but are not (a card number failing Luhn, an SSN with area 000,
an IBAN with a wrong check, ``256.1.2.3``, version numbers, times, dates), so precision is
tested as well as recall. Filler is either generated words (no entity can hide in it) or
the caller's real text.

Everything is drawn from a seeded generator: the same arguments give the same documents.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import numpy as np
import pandas as pd

from curator_dask.errors import InvalidArgumentError
from curator_dask.stages.pii.patterns import IBAN_LENGTHS, PATTERN_ENTITIES

__all__ = ["UNICODE_NEIGHBOURS", "make_entity", "planted_pii"]

_LOWER = list("abcdefghijklmnopqrstuvwxyz")
_US_AREA_CODES = [201, 202, 206, 212, 213, 214, 303, 305, 312, 404, 415, 503, 512, 602, 617,
                  646, 702, 713, 718, 818, 917, 919]
_TLDS = ["com", "org", "net", "io", "de", "co.uk", "edu"]

#: Non-ASCII neighbours put around entities: accents, combining marks, CJK, emoji (outside
#: the Basic Multilingual Plane), right-to-left scripts and a zero-width joiner sequence.
UNICODE_NEIGHBOURS = ["café", "naïve", "e\u0301te\u0301", "日本語", "😀", "👩‍💻", "שלום",
                      "مرحبا", "Ωmega", "straße", "\u200f", "ﬁn"]


def _word(rng: np.random.Generator, lo: int = 3, hi: int = 9) -> str:
    return "".join(rng.choice(_LOWER, size=int(rng.integers(lo, hi))))


def _digits(rng: np.random.Generator, n: int, first_nonzero: bool = False) -> str:
    d = rng.integers(0, 10, size=n)
    if first_nonzero:
        d[0] = rng.integers(1, 10)
    return "".join(map(str, d))


def _luhn_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        v = int(ch)
        if i % 2 == 0:  # doubled once the check digit is appended
            v = v * 2 - 9 if v * 2 > 9 else v * 2
        total += v
    return str((10 - total % 10) % 10)


def _iban_check(country: str, bban: str) -> str:
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{98 - int(numeric) % 97:02d}"


def make_entity(kind: str, rng: np.random.Generator) -> str:
    """One valid value of ``kind`` (a patterned entity type), in a random usual format."""
    if kind == "EMAIL_ADDRESS":
        local = rng.choice([_word(rng), f"{_word(rng)}.{_word(rng)}",
                            f"{_word(rng)}_{_digits(rng, 2)}", f"{_word(rng)}+{_word(rng, 2, 5)}"])
        return f"{local}@{_word(rng)}.{rng.choice(_TLDS)}"
    if kind == "PHONE_NUMBER":
        # Numbers in assigned ranges (libphonenumber calls them valid), so a checker that
        # knows the numbering plans accepts them too.
        area = str(rng.choice(_US_AREA_CODES))
        exchange = str(rng.integers(200, 1000))
        if exchange == "555" or exchange.endswith("11"):
            exchange = "734"
        line = _digits(rng, 4)
        form = int(rng.integers(0, 6))
        if form == 0:
            return f"({area}) {exchange}-{line}"
        if form == 1:
            return f"{area}-{exchange}-{line}"
        if form == 2:
            return f"{area}.{exchange}.{line}"
        if form == 3:
            return f"+1 {area} {exchange} {line}"
        if form == 4:
            return f"+44 20 {rng.choice([3, 7, 8])}{_digits(rng, 3)} {_digits(rng, 4)}"
        return f"+4930{rng.integers(10_000_000, 100_000_000)}"
    if kind == "IP_ADDRESS":
        if rng.random() < 0.5:
            return ".".join(str(int(v)) for v in rng.integers(0, 256, size=4))
        groups = rng.integers(0, 65536, size=8)
        if rng.random() < 0.5:
            groups[2:5] = 0  # compressible with "::"
        address = ipaddress.IPv6Address(":".join(f"{g:x}" for g in groups))
        return address.compressed if rng.random() < 0.7 else address.exploded
    if kind == "CREDIT_CARD":
        brand = int(rng.integers(0, 4))
        if brand == 2:  # American Express: 15 digits, 4-6-5
            body = rng.choice(["34", "37"]) + _digits(rng, 12)
            number = body + _luhn_digit(body)
            sep = rng.choice(["", " ", "-"])
            return sep.join([number[:4], number[4:10], number[10:]])
        prefix = ["4", f"5{rng.integers(1, 6)}", None, "6011"][brand]
        body = prefix + _digits(rng, 15 - len(prefix))
        number = body + _luhn_digit(body)
        sep = rng.choice(["", " ", "-"])
        return sep.join(number[i:i + 4] for i in range(0, 16, 4))
    if kind == "IBAN_CODE":
        country = str(rng.choice(["DE", "GB", "FR", "NL", "ES", "IT", "CH", "NO"]))
        n = IBAN_LENGTHS[country] - 4
        # Letters where the country's format has them (GB and NL bank codes, Italy's CIN).
        letters = {"GB": 4, "NL": 4, "IT": 1}.get(country, 0)
        bban = "".join(rng.choice(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), size=letters)) + \
            _digits(rng, n - letters)
        iban = country + _iban_check(country, bban) + bban
        if rng.random() < 0.5:
            return " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))
        return iban
    if kind == "US_SSN":
        while True:
            area = int(rng.integers(1, 900))
            if area != 666:
                break
        ssn = f"{area:03d}{rng.integers(1, 100):02d}{rng.integers(1, 10000):04d}"
        if len(set(ssn)) == 1 or ssn in ("123456789", "078051120"):
            ssn = "536228726"
        sep = rng.choice(["-", " "])
        return f"{ssn[:3]}{sep}{ssn[3:5]}{sep}{ssn[5:]}"
    if kind == "URL":
        form = int(rng.integers(0, 3))
        host = f"{_word(rng)}.{rng.choice(_TLDS)}"
        path = "/".join(_word(rng) for _ in range(int(rng.integers(0, 3))))
        if form == 0:
            return f"https://{host}/{path}" + (f"?q={_word(rng)}&n={rng.integers(0, 99)}"
                                                if rng.random() < 0.5 else "")
        if form == 1:
            return f"http://{_word(rng)}.{host}" + (f"/{path}" if path else "")
        return f"www.{host}" + (f"/{path}" if path else "")
    raise InvalidArgumentError(f"no generator for {kind!r}")


def _decoy(rng: np.random.Generator) -> str:
    """Something entity-shaped that is not an entity of any patterned type, after a word
    (a number right after a planted phone number would read as more of its digits)."""
    return f"{_word(rng)} {_decoy_value(rng)}"


def _decoy_value(rng: np.random.Generator) -> str:
    kind = int(rng.integers(0, 10))
    if kind == 0:  # card number with a wrong check digit
        body = "4" + _digits(rng, 14)
        bad = str((int(_luhn_digit(body)) + 1 + int(rng.integers(0, 9))) % 10)
        number = body + bad
        return " ".join(number[i:i + 4] for i in range(0, 16, 4))
    if kind == 1:  # SSN with an invalid area, group or serial
        return rng.choice([f"000-{_digits(rng, 2, True)}-{_digits(rng, 4, True)}",
                           f"666-{_digits(rng, 2, True)}-{_digits(rng, 4, True)}",
                           f"9{_digits(rng, 2)}-{_digits(rng, 2, True)}-{_digits(rng, 4, True)}",
                           f"{rng.integers(100, 600)}-00-{_digits(rng, 4, True)}",
                           f"{rng.integers(100, 600)}-{_digits(rng, 2, True)}-0000"])
    if kind == 2:  # IBAN with a wrong check
        bban = _digits(rng, 18)
        good = _iban_check("DE", bban)
        return f"DE{(int(good) + 1) % 97 + 2:02d}{bban}" if good != "96" else f"DE00{bban}"
    if kind == 3:
        return f"{rng.integers(256, 999)}.{rng.integers(0, 256)}.{rng.integers(0, 256)}." \
               f"{rng.integers(0, 256)}"
    if kind == 4:
        return f"version {rng.integers(1, 4)}.{rng.integers(0, 20)}.{rng.integers(0, 9)}"
    if kind == 5:
        return f"at {rng.integers(0, 24):02d}:{rng.integers(0, 60):02d}:{rng.integers(0, 60):02d}"
    if kind == 6:
        return f"on {rng.integers(1990, 2030)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d}"
    if kind == 7:
        cents, year = rng.integers(0, 100), rng.integers(1900, 2100)
        return f"costs ${rng.integers(1, 999)}.{cents:02d} in {year}"
    if kind == 8:  # a North American number whose exchange starts with 1
        return f"{rng.integers(2, 10)}{_digits(rng, 2)}-1{_digits(rng, 2)}-{_digits(rng, 4)}"
    return f"user at example dot com, std::vector, a.b.c, {_word(rng)}@"


def planted_pii(n_docs: int = 300, *, seed: int = 0, filler: Sequence[str] | None = None,
                entities: Sequence[str] = PATTERN_ENTITIES, per_doc: tuple[int, int] = (0, 4),
                decoys: bool = True, unicode_rate: float = 0.3) -> pd.DataFrame:
    """Documents with entities planted at known offsets.

    Parameters
    ----------
    n_docs : int
    seed : int
    filler : sequence of str, optional
        Real text to plant into (cycled): each document is one of these with the
        entities inserted at word boundaries. Default: generated words, which hold no
        entity, so every entity found that was not planted is a false positive.
    entities : sequence of str
        Types to plant.
    per_doc : (int, int)
        Entities per document, drawn uniformly from ``[lo, hi]``.
    decoys : bool
        Mix entity-shaped non-entities into generated filler.
    unicode_rate : float
        Share of entities with a non-ASCII neighbour (see :data:`UNICODE_NEIGHBOURS`).

    Returns
    -------
    pandas.DataFrame
        ``text`` and ``planted``: a list of ``(type, start, end)`` character offsets.

    Examples
    --------
    >>> docs = planted_pii(5, seed=1)
    >>> row = docs.iloc[0]
    >>> all(isinstance(row.text[s:e], str) for _, s, e in row.planted)
    True
    """
    rng = np.random.default_rng(seed)
    texts, planted = [], []
    for d in range(n_docs):
        if filler is not None:
            base = filler[d % len(filler)].split(" ")
        else:
            base = [_word(rng) for _ in range(int(rng.integers(20, 80)))]
            for i in range(0, len(base), int(rng.integers(8, 15))):
                base[i] = base[i] + "."
            if decoys:
                for _ in range(int(rng.integers(0, 3))):
                    base.insert(int(rng.integers(0, len(base) + 1)), _decoy(rng))
        count = int(rng.integers(per_doc[0], per_doc[1] + 1))
        slots = np.bincount(rng.integers(0, len(base) + 1, size=count), minlength=len(base) + 1)
        text, spans = "", []
        for i in range(len(base) + 1):
            for _ in range(slots[i]):
                kind = str(rng.choice(list(entities)))
                value = make_entity(kind, rng)
                before, after = " ", " "
                if rng.random() < unicode_rate:
                    before = f" {rng.choice(UNICODE_NEIGHBOURS)} "
                    after = str(rng.choice([" ", ", ", f" {rng.choice(UNICODE_NEIGHBOURS)} "]))
                text += before
                spans.append((kind, len(text), len(text) + len(value)))
                text += value + after
            if i < len(base):
                text += base[i] + (" " if i + 1 < len(base) else "")
        texts.append(text)
        planted.append(spans)
    return pd.DataFrame({"text": pd.array(texts, dtype="str"), "planted": planted})
