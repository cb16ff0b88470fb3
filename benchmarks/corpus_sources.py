"""Text on this machine as documents: sources, plain text, paragraphs, 24-gram fingerprints.

The lower half of ``diverse_corpus.py``: which files are read (:class:`Source`,
:func:`default_sources`), how one becomes plain text (:func:`file_text`: HTML through
resiliparse; troff, Perl POD and Python docstrings by hand; plain text as it is), how a
text is cut at paragraph boundaries into documents of web-like lengths
(:func:`split_documents`), which are kept (:func:`is_prose`), and the character 24-gram
hashes that tell near duplicates apart (:func:`shingle_hashes`, :func:`guard_keys`).
"""

from __future__ import annotations

import ast
import glob
import gzip
import os
import re
import sys
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from curator_dask.errors import CuratorError

MB = 1_000_000
MIN_WORDS, MEDIAN_WORDS, MAX_WORDS = 50, 250, 6000
MAX_FILE_BYTES = 16 * MB
SHINGLE = 24
GUARD_BANDS, GUARD_ROWS = 20, 5
PLAIN_SUFFIXES = frozenset({"", ".txt", ".md", ".rst", ".text", ".markdown", ".adoc", ".org",
                            ".debian", ".news", ".changes", ".readme", ".rdoc", ".pod"})


class CorpusError(CuratorError, ValueError):
    """The corpus cannot be built where or from what it was asked."""


@dataclass(frozen=True)
class Source:
    """One kind of text: the ``roots`` (folders or files) it is read from.

    ``suffixes`` keeps only files whose name (without ``.gz``) ends so; ``exclude`` lists
    folders not to enter. The format is the file's: ``.html`` is stripped of tags, ``.py``
    gives its docstrings, a name ending ``.<digit>...`` is troff, anything else plain text.
    """

    kind: str
    roots: tuple[str, ...]
    suffixes: tuple[str, ...] = ()
    exclude: tuple[str, ...] = field(default=())


def default_sources() -> list[Source]:
    """The text on this machine, by kind (a file goes to the first kind that lists it)."""
    home = Path.home()
    toolchains = sorted(str(p) for p in home.glob(".rustup/toolchains/*/share/doc/rust/html"))
    # One release only of each: two releases' pages are near copies of each other.
    rust = [t for t in toolchains if "/stable-" in t][:1] or toolchains[:1]
    pyenv = sorted(home.glob(".pyenv/versions/*/lib/python3*"),
                   key=lambda p: [int(n) for n in re.findall(r"\d+", p.name)])
    pythons = sorted(str(p) for p in Path("/usr/lib").glob("python3*"))
    pythons += [str(p) for p in pyenv[-1:]]  # the newest standard library, with its packages
    pythons += sorted(str(p / "site-packages") for p in pyenv[:-1])
    pythons += ["/usr/lib/google-cloud-sdk"]
    perl = ["/usr/share/perl", "/usr/share/perl5", *sorted(glob.glob("/usr/lib/*/perl"))]
    covered = ("/usr/share/doc", "/usr/share/man", "/usr/share/common-licenses", "/work",
               *rust, *pythons)
    return [
        Source("rust-doc", tuple(rust), (".html",)),
        Source("man", ("/usr/share/man",)),
        Source("debian-doc", ("/usr/share/doc",)),
        Source("license", ("/usr/share/common-licenses",)),
        Source("python-docstring", tuple(pythons), (".py",)),
        Source("perl-pod", tuple(perl), (".pm", ".pod")),
        Source("markup", ("/usr", str(home)), (".md", ".rst", ".txt"), covered),
    ]


def as_sources(sources) -> list[Source]:
    if sources is None:
        return default_sources()
    if isinstance(sources, dict):
        return [Source(kind, tuple(str(r) for r in roots)) for kind, roots in sources.items()]
    return list(sources)


def list_files(sources: list[Source], outside: Path) -> list[tuple[str, str]]:
    """``(kind, path)`` of every regular file of the sources, sorted, each file once."""
    seen, found = set(), []
    for source in sources:
        exclude = {os.path.realpath(e) for e in source.exclude} | {str(outside)}
        paths = []
        for root in source.roots:
            if os.path.isfile(root):
                paths.append(root)
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs
                                 if os.path.realpath(os.path.join(folder, d)) not in exclude)
                paths.extend(os.path.join(folder, f) for f in files)
        for path in sorted(paths):
            name = path[:-3] if path.endswith(".gz") else path
            if (os.path.islink(path) or path in seen or not os.path.isfile(path)
                    or (source.suffixes and not name.endswith(source.suffixes))):
                continue
            seen.add(path)
            found.append((source.kind, path))
    return found


# ---------------------------------------------------------------------------- text of a file

_TROFF_NAMED = {"em": "\u2014", "en": "\u2013", "bu": "\u2022", "aq": "'", "dq": '"',
                "lq": "\u201c", "rq": "\u201d", "oq": "\u2018", "cq": "\u2019", "co": "\u00a9",
                "rg": "\u00ae", "tm": "\u2122", "mu": "\u00d7", "de": "\u00b0", "hy": "-",
                "ha": "^", "ti": "~", "rs": "\\", "ga": "`", "aa": "\u00b4", "pl": "+",
                "mi": "-", "eq": "=", "<=": "\u2264", ">=": "\u2265", "->": "\u2192"}
_TROFF_ESCAPE = re.compile(
    r"\\\((..)|\\\[([^\]]*)\]|\\[fF](?:\[[^\]]*\]|\(..|.)|\\s[+-]?\d+|\\\*(?:\[[^\]]*\]|\(..|.)"
    r"|\\[nk](?:\[[^\]]*\]|\(..|.)|\\[hvwlLoDbxXZR]'[^']*'|\\\".*|\\[&%c|^:/,dutz!{}]|\\(.)")
_TROFF_SIMPLE = {"-": "-", "e": "\\", " ": " ", "~": " ", "0": " ", "'": "\u00b4", "`": "`",
                 ".": ".", "\\": "\\"}
_TROFF_HEADINGS = {"SH", "SS", "Sh", "Ss"}
_TROFF_BREAKS = {"PP", "LP", "P", "sp", "br", "TP", "IP", "HP", "Pp", "Lp", "TQ", "bp", "Bl",
                 "El", "It", "Bd", "Ed", "RS", "RE", "EX", "EE", "nf", "fi"}
_TROFF_FONTS = {"B", "I", "SM", "SB", "BR", "BI", "IB", "IR", "RB", "RI", "UR", "MT"}
_TROFF_QUIET = {"TH", "Dd", "Dt", "Os", "in", "ft", "ne", "ds", "nr", "if", "ie", "el", "so",
                "ta", "ad", "na", "hy", "nh", "ll", "ti", "PD", "UC", "IX", "tr", "cs", "ss",
                "lf", "mso", "pc", "ps", "vs", "ev", "rm", "als", "ce", "UE", "ME", "hw", "pl"}
_QUOTED_ARGS = re.compile(r'"([^"]*)"|(\S+)')


def _troff_inline(line: str) -> str:
    def replace(match):
        named = match.group(1) or match.group(2)
        if named is not None:
            return _TROFF_NAMED.get(named, "")
        return _TROFF_SIMPLE.get(match.group(3) or "", "")
    return _TROFF_ESCAPE.sub(replace, line)


def troff_to_text(source: str) -> str:
    """Plain text of a manual page (man or mdoc macros), paragraphs on blank lines."""
    out, skipping = [], False
    for line in source.splitlines():
        if skipping:
            skipping = not line.startswith("..")
            continue
        if line[:1] not in ".'":
            out.append(_troff_inline(line))
            continue
        parts = line[1:].strip().split(None, 1)
        name, args = ([*parts, "", ""])[:2] if parts else ("", "")
        if name in ("de", "de1", "ig", "am"):
            skipping = True
        elif name in _TROFF_HEADINGS:
            out += ["", _troff_inline(args.replace('"', "")), ""]
        elif name in _TROFF_BREAKS:
            out.append("")
            if name == "IP" and args:
                out.append(_troff_inline(_QUOTED_ARGS.match(args).group(0).strip('"')))
        elif name in _TROFF_FONTS:
            words = [a or b for a, b in _QUOTED_ARGS.findall(args)]
            out.append(_troff_inline((" " if len(name) != 2 else "").join(words)))
        elif name not in _TROFF_QUIET and not name.startswith(("\\", '"')) and args:
            out.append(_troff_inline(args.replace('"', "")))  # mdoc and the like: keep words
    return "\n".join(out)


def html_to_text(html: str) -> str:
    """Visible text of an HTML page, block elements on their own lines (resiliparse)."""
    try:
        from resiliparse.extract.html2text import extract_plain_text
    except ImportError as error:  # pragma: no cover - resiliparse is in the test extra
        raise CorpusError("the corpus needs resiliparse to read HTML: "
                          "pip install 'curator-dask[html]'") from error
    return extract_plain_text(html, preserve_formatting=True, main_content=False,
                              alt_texts=False, links=False, noscript=False)


def python_docstrings(source: str) -> str:
    """The module, class and function docstrings of a Python file, one paragraph each."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return ""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return "\n\n".join(doc for node in ast.walk(tree) if isinstance(node, kinds)
                       if (doc := ast.get_docstring(node)))


_POD_CODE = re.compile(r"([A-Z])(?:<([^<>]*)>|<<+\s+(.*?)\s+>>+)")  # X<...> or X<< ... >>
_POD_ESCAPES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/"}


def _pod_inline(text: str) -> str:
    def replace(match):
        letter, inner = match.group(1), match.group(2) or match.group(3) or ""
        if letter == "E":
            return _POD_ESCAPES.get(inner, "")
        return inner.split("|")[0] if letter == "L" else inner
    previous = None
    while previous != text:  # codes nest: B<I<...>>
        previous, text = text, _POD_CODE.sub(replace, text)
    return text


def pod_to_text(source: str) -> str:
    """Plain text of the POD documentation in a Perl module (``=head1`` ... ``=cut``)."""
    out, inside = [], False
    for line in source.splitlines():
        if line.startswith("=") and line[1:2].isalpha():
            command, _, rest = line[1:].partition(" ")
            inside = command != "cut"
            if command.startswith(("head", "item")):
                out += ["", _pod_inline(rest), ""]
            else:
                out.append("")
        elif inside:
            out.append(_pod_inline(line))
    return "\n".join(out)


def file_text(path: str) -> str:  # noqa: PLR0911 (one return per format)
    """The plain text of one file, by its format; ``""`` for code, data, binary or huge.

    Plain text is a file named without a suffix (``copyright``, ``AUTHORS``) or with one of
    ``PLAIN_SUFFIXES``; stylesheets, scripts and data files are not prose.
    """
    if os.path.getsize(path) > MAX_FILE_BYTES:
        return ""
    with open(path, "rb") as handle:
        raw = handle.read()
    name = path
    if path.endswith(".gz"):
        name = path[:-3]
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            return ""
    if b"\0" in raw[:8192] or len(raw) > MAX_FILE_BYTES:
        return ""
    text = raw.decode("utf-8", errors="replace")
    if text.count("\ufffd") > len(text) // 100:
        return ""
    lower = os.path.basename(name).lower()
    suffix = os.path.splitext(lower)[1]
    if suffix in (".html", ".htm", ".xhtml"):
        return html_to_text(text)
    if suffix == ".py":
        return python_docstrings(text)
    if suffix in (".pm", ".pod"):
        return pod_to_text(text)
    if re.fullmatch(r"\.[1-9][a-z]*", suffix):
        return troff_to_text(text)
    return text if suffix in PLAIN_SUFFIXES else ""


# ------------------------------------------------------------------------- documents of a text

_BLANK_LINES = re.compile(r"\n[ \t]*\n\s*")
_LETTER = re.compile(r"[^\W\d_]")


def is_prose(text: str) -> bool:
    """At least ``MIN_WORDS`` words, mostly letters, words of plausible length."""
    words = text.split()
    if len(words) < MIN_WORDS:
        return False
    visible = sum(map(len, words))
    return len(_LETTER.findall(text)) >= 0.5 * visible and visible / len(words) <= 15


def _paragraphs(text: str) -> list[str]:
    """Paragraphs on blank lines; a paragraph over ``MAX_WORDS`` words is cut at lines."""
    text = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n"))
    paragraphs = []
    for paragraph in _BLANK_LINES.split(text.strip()):
        lines, count = [], 0
        for line in paragraph.split("\n"):
            lines.append(line)
            count += len(line.split())
            if count >= MAX_WORDS:
                paragraphs.append("\n".join(lines))
                lines, count = [], 0
        if lines:
            paragraphs.append("\n".join(lines))
    return [p for p in paragraphs if p.strip()]


def split_documents(text: str, rng: np.random.Generator) -> list[str]:
    """Cut a text at paragraph boundaries into documents of log-normally drawn lengths."""
    def target() -> int:
        return int(np.clip(rng.lognormal(np.log(MEDIAN_WORDS), 0.9), 60, MAX_WORDS))

    documents, current, count, goal = [], [], 0, target()
    for paragraph in _paragraphs(text):
        current.append(paragraph)
        count += len(paragraph.split())
        if count >= goal:
            documents.append("\n\n".join(current))
            current, count, goal = [], 0, target()
    if current:
        if documents and count < MIN_WORDS:  # a short tail belongs to what it ends
            documents[-1] += "\n\n" + "\n\n".join(current)
        else:
            documents.append("\n\n".join(current))
    return documents


# ------------------------------------------------------------------- character 24-gram hashes

_P = np.uint64(0x100000001B3)
_P_INVERSE = np.uint64(pow(0x100000001B3, -1, 2**64))
_POWERS: dict[str, np.ndarray] = {"p": np.ones(1, np.uint64), "q": np.ones(1, np.uint64)}


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(_POWERS["p"]) < n:
        size = max(n, 2 * len(_POWERS["p"]))
        with np.errstate(over="ignore"):
            for name, base in (("p", _P), ("q", _P_INVERSE)):
                factors = np.full(size, base, np.uint64)
                factors[0] = 1
                _POWERS[name] = np.cumprod(factors, dtype=np.uint64)
    return _POWERS["p"][:n], _POWERS["q"][:n]


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: the polynomial hash's linear structure is mixed away."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def shingle_hashes(text: str) -> np.ndarray:
    """Distinct 64-bit hashes of the text's character 24-grams (the whole text if shorter).

    A polynomial rolling hash in O(n): with prefix sums ``S_k = sum c_t P^-t`` (mod 2^64),
    the window at ``i`` is ``(S_{i+24} - S_i) * P^(i+23)``.
    """
    codes = np.frombuffer(text.encode("utf-32-le"), np.uint32).astype(np.uint64) + np.uint64(1)
    width = min(SHINGLE, len(codes))
    if width == 0:
        return np.zeros(0, np.uint64)
    with np.errstate(over="ignore"):
        p, q = _powers(len(codes))
        prefix = np.concatenate([np.zeros(1, np.uint64), np.cumsum(codes * q, dtype=np.uint64)])
        windows = (prefix[width:] - prefix[:-width]) * p[width - 1:]
        return sorted_unique(_mix(windows))


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy 2.4's hash-based ``unique`` is 100x slower here)."""
    ordered = np.sort(values)
    keep = np.ones(len(ordered), bool)
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two sets of distinct hashes."""
    shared = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - shared
    return shared / union if union else 1.0


def guard_keys(hashes: np.ndarray) -> np.ndarray:
    """``GUARD_BANDS`` band keys of a one-permutation MinHash of the shingle hashes."""
    bins = GUARD_BANDS * GUARD_ROWS
    minima = np.full(bins, np.iinfo(np.uint64).max, np.uint64)
    ascending = np.sort(hashes)
    bin_of = ascending % np.uint64(bins)
    by_bin = np.argsort(bin_of, kind="stable")  # ascending hashes within each bin
    first = np.ones(len(by_bin), bool)
    np.not_equal(bin_of[by_bin][1:], bin_of[by_bin][:-1], out=first[1:])
    minima[bin_of[by_bin][first].astype(np.intp)] = ascending[by_bin][first] // np.uint64(bins)
    weights = _mix(np.arange(1, GUARD_ROWS + 1, dtype=np.uint64))
    with np.errstate(over="ignore"):
        return _mix((_mix(minima).reshape(GUARD_BANDS, GUARD_ROWS) * weights).sum(
            axis=1, dtype=np.uint64))


def near_duplicate_mask(keys: np.ndarray) -> np.ndarray:
    """True for each row whose band key, in any band, equals an earlier row's."""
    duplicate = np.zeros(len(keys), bool)
    rows = np.arange(len(keys))
    for band in range(keys.shape[1]):
        order = np.lexsort((rows, keys[:, band]))
        repeats = keys[order[1:], band] == keys[order[:-1], band]
        duplicate[order[1:][repeats]] = True
    return duplicate


def check_output(directory: Path, sources: list[Source]) -> None:
    """An output that equals, contains or lies inside a source would mix with its input."""
    for source in sources:
        for root in source.roots:
            root_path = Path(root).resolve()
            if (directory == root_path or root_path in directory.parents
                    or directory in root_path.parents):
                raise CorpusError(f"--out {directory} overlaps the {source.kind} source "
                                  f"{root_path}; write the corpus outside the sources")


def fingerprint_files(files: list[tuple[str, str]]) -> dict:
    counts = Counter(kind for kind, _ in files)
    sizes = Counter()
    for kind, path in files:
        sizes[kind] += os.stat(path).st_size
    return {kind: {"files": counts[kind], "bytes": sizes[kind]} for kind in sorted(counts)}
