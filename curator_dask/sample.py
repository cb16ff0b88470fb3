"""The bundled sample of real text, and a noisy copy of it that gives every stage work.

The sample (``curator_dask/data/python-docs-sample.jsonl.gz``, 818 documents from the
Python documentation, PSF licence; see ``curator_dask/data/SOURCE.md``) is clean English
prose. :func:`noisy_sample` plants what a web crawl would hold beside such text, each
document labelled in a ``planted`` column so a run's drops can be checked against it:

==================  ============================================================
``planted``         what it is
==================  ============================================================
``original``        a document of the sample, unchanged
``exact_duplicate`` a byte-for-byte copy of an original (1 to 3 copies of it)
``near_duplicate``  an original with about one word in 60 replaced or deleted
                    (character 24-gram Jaccard similarity about 0.85)
``junk``            keyboard mash, symbol runs, a line repeated, link lists,
                    number tables, two-word stubs
``other_language``  paragraphs in French, German or Spanish
==================  ============================================================

Everything is drawn from a seeded generator, so the same arguments give the same
documents.

Examples
--------
>>> docs = noisy_sample(limit=100)
>>> docs["planted"].value_counts().to_dict()["original"]
100
>>> noisy_sample(limit=100).equals(docs)
True
"""

from __future__ import annotations

import gzip
import io
import string
from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd

from curator_dask.io import atomic
from curator_dask.io.guard import guarded

__all__ = ["SAMPLE_FILE", "noisy_sample", "sample_documents", "write_shards"]

#: The bundled sample, inside the ``curator_dask.data`` package.
SAMPLE_FILE = "python-docs-sample.jsonl.gz"

# Written for this sample; short paragraphs on everyday subjects, no source text.
_OTHER_LANGUAGES = {
    "fr": [
        "Le marché du samedi matin attire les habitants de tout le quartier.",
        "Les enfants jouent dans le parc pendant que leurs parents discutent sur les bancs.",
        "Il faut réserver une table à l'avance, car le restaurant est toujours complet.",
        "La bibliothèque municipale prête des livres, des disques et des jeux de société.",
        "Le train pour Lyon part à huit heures et arrive avant midi.",
        "Nous avons planté des tomates, des courgettes et quelques herbes aromatiques.",
        "La réunion est reportée à jeudi prochain en raison des congés.",
        "Le musée présente une exposition consacrée aux peintres de la côte normande.",
    ],
    "de": [
        "Der Wochenmarkt findet jeden Samstag auf dem Platz vor dem Rathaus statt.",
        "Im Sommer fahren viele Familien an die Ostsee oder in die Berge.",
        "Die Bibliothek hat ihre Öffnungszeiten verlängert und bietet neue Kurse an.",
        "Bitte schließen Sie die Fenster, bevor Sie das Büro verlassen.",
        "Der Zug nach München hat heute leider zwanzig Minuten Verspätung.",
        "Wir haben im Garten Äpfel, Birnen und Pflaumen geerntet.",
        "Das Konzert im Stadtpark musste wegen des Regens abgesagt werden.",
        "Die neue Brücke verbindet die beiden Ufer des Flusses seit dem Frühjahr.",
    ],
    "es": [
        "El mercado del barrio abre todos los días desde las ocho de la mañana.",
        "Los vecinos organizaron una fiesta en la plaza para celebrar el verano.",
        "La biblioteca ofrece talleres de lectura para niños los miércoles por la tarde.",
        "Hay que comprar pan, leche y fruta antes de que cierre la tienda.",
        "El autobús hacia la costa sale cada hora desde la estación central.",
        "Este año la cosecha de aceitunas ha sido mejor que la del año pasado.",
        "El museo de la ciudad amplió su colección de cerámica antigua.",
        "Mañana lloverá en el norte y hará sol en el resto del país.",
    ],
}


def sample_documents(limit: int | None = None) -> pd.DataFrame:
    """The bundled sample as a frame with ``text`` and ``source`` columns.

    Parameters
    ----------
    limit : int, optional
        Only the first ``limit`` documents.

    Examples
    --------
    >>> docs = sample_documents()
    >>> len(docs), list(docs.columns)
    (818, ['text', 'source'])
    """
    raw = gzip.decompress(files("curator_dask.data").joinpath(SAMPLE_FILE).read_bytes())
    docs = pd.read_json(io.BytesIO(raw), lines=True, dtype={"text": str, "source": str})
    if limit is not None:
        docs = docs.head(limit)
    return docs.astype({"text": "str", "source": "str"}).reset_index(drop=True)


def _near_duplicate(text: str, rng: np.random.Generator) -> str:
    """Replace or delete about one word in 60 (at least one): Jaccard ~0.85 on 24-grams."""
    words = text.split(" ")
    edits = max(1, len(words) // 60)
    for position in sorted(rng.choice(len(words), size=min(edits, len(words)),
                                      replace=False), reverse=True):
        if rng.random() < 0.5:
            del words[position]
        else:
            words[position] = "".join(rng.choice(list(string.ascii_lowercase), size=6))
    return " ".join(words)


def _junk(kind: int, rng: np.random.Generator) -> str:
    letters = list(string.ascii_letters)
    if kind == 0:  # keyboard mash
        return " ".join("".join(rng.choice(letters, size=rng.integers(2, 12)))
                        for _ in range(rng.integers(60, 200)))
    if kind == 1:  # symbol runs
        symbols = list("#$%&*+<=>@^|~…")
        return " ".join("".join(rng.choice(symbols, size=rng.integers(1, 6)))
                        + rng.choice(["", " word"]) for _ in range(rng.integers(60, 150)))
    if kind == 2:  # one line, repeated
        line = rng.choice(["Click here to subscribe to our newsletter!",
                           "Buy now and save 50% on every order today.",
                           "This page has moved. Please update your bookmarks."])
        return "\n".join([str(line)] * int(rng.integers(20, 60)))
    if kind == 3:  # a list of links
        return "\n".join(f"https://example.com/{''.join(rng.choice(letters, size=8))}/"
                         f"{int(rng.integers(1000, 9999))}.html"
                         for _ in range(rng.integers(20, 60)))
    if kind == 4:  # a table of numbers
        return "\n".join(" ".join(str(int(v)) for v in rng.integers(0, 100000, size=8))
                         for _ in range(rng.integers(20, 50)))
    return rng.choice(["Page not found", "Loading...", "Home | About | Contact", "Sign in"])


def _other_language(language: str, rng: np.random.Generator) -> str:
    sentences = _OTHER_LANGUAGES[language]
    picked = rng.choice(len(sentences), size=int(rng.integers(4, len(sentences) + 1)),
                        replace=False)
    return " ".join(sentences[i] for i in picked)


def noisy_sample(limit: int | None = None, *, exact_duplicate_fraction: float = 0.08,
                 near_duplicate_fraction: float = 0.08, junk_fraction: float = 0.06,
                 other_language_fraction: float = 0.03, seed: int = 0) -> pd.DataFrame:
    """The sample with planted duplicates, near duplicates, junk and other languages.

    Parameters
    ----------
    limit : int, optional
        Start from the first ``limit`` documents of the sample (the planted documents
        are counted as fractions of these).
    exact_duplicate_fraction, near_duplicate_fraction : float
        Fraction of the originals that get 1 to 3 exact copies, or one to two near
        duplicates.
    junk_fraction, other_language_fraction : float
        Junk and foreign-language documents to add, as a fraction of the originals.
    seed : int, default 0

    Returns
    -------
    pandas.DataFrame
        ``text``, ``source`` and ``planted`` (see the module docstring), shuffled.
    """
    rng = np.random.default_rng(seed)
    originals = sample_documents(limit)
    n = len(originals)
    rows: list[dict] = [{"text": t, "source": s, "planted": "original"}
                        for t, s in zip(originals["text"], originals["source"], strict=True)]

    def pick(fraction: float) -> list[int]:
        return sorted(rng.choice(n, size=min(n, round(n * fraction)), replace=False).tolist())

    for i in pick(exact_duplicate_fraction):
        for _ in range(int(rng.integers(1, 4))):
            rows.append({"text": originals["text"][i], "source": originals["source"][i],
                         "planted": "exact_duplicate"})
    for i in pick(near_duplicate_fraction):
        for _ in range(int(rng.integers(1, 3))):
            rows.append({"text": _near_duplicate(originals["text"][i], rng),
                         "source": originals["source"][i], "planted": "near_duplicate"})
    for j in range(round(n * junk_fraction)):
        rows.append({"text": _junk(j % 6, rng), "source": f"junk/{j}", "planted": "junk"})
    languages = sorted(_OTHER_LANGUAGES)
    for j in range(round(n * other_language_fraction)):
        language = languages[j % len(languages)]
        rows.append({"text": _other_language(language, rng), "source": f"{language}/{j}",
                     "planted": "other_language"})
    docs = pd.DataFrame(rows).astype({"text": "str", "source": "str", "planted": "str"})
    return docs.iloc[rng.permutation(len(docs))].reset_index(drop=True)


def write_shards(docs: pd.DataFrame, directory: str | Path, shards: int = 4) -> Path:
    """Write ``docs`` as ``shards`` JSONL files (``shard-00.jsonl``...) in ``directory``."""
    directory = Path(directory)
    with guarded(str(directory), "sample directory") as out:
        for old in directory.glob("shard-*.jsonl"):
            atomic.remove(out.fs, str(old))
        per_shard = -(-len(docs) // shards)
        for shard in range(shards):
            chunk = docs.iloc[shard * per_shard:(shard + 1) * per_shard]
            text = chunk.to_json(orient="records", lines=True, force_ascii=False)
            atomic.write_bytes(out.fs, out.join(f"shard-{shard:02d}.jsonl"),
                               text.encode("utf-8"))
    return directory
