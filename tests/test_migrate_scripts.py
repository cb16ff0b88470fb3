"""Ten NeMo Curator scripts, rewritten by `curator-dask migrate` with no hand edits, run.

The scripts are NeMo-shaped copies under ``tests/nemo_scripts/`` (0.x examples and
tutorial, 1.x tutorials and documentation snippets; their headers name the source and
the local stand-ins for paths and hub models). Each test copies one into a fresh
directory with small real data, runs the real command (``curator-dask migrate --write``,
which must report nothing left to do), executes the result as a script (on a real local
cluster where the script starts one) and checks what it wrote. The table of these scripts
in ``docs/migrating.md`` is read here, so it lists exactly what is run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from curator_dask.sample import noisy_sample

ROOT = Path(__file__).parent.parent
SCRIPTS = Path(__file__).parent / "nemo_scripts"
PAGE = ROOT / "docs" / "migrating.md"
SECTION = "## Ten NeMo Curator scripts"


def script_rows() -> dict[str, dict]:
    """The table of the section: script -> its columns."""
    text = PAGE.read_text()
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ", len(SECTION))]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = {"source": cells[1], "options": cells[2].strip("`"),
                                         "hand_edited": cells[3], "unfixed": cells[4]}
    return rows


ROWS = script_rows()


def run(args: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def migrate(paths: list[Path], options: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "curator_dask.cli.main", "migrate", "--write",
                *options, *map(str, paths)], cwd)


# -- data -----------------------------------------------------------------------------------

def corpus(n: int = 60, seed: int = 0) -> pd.DataFrame:
    """Real text with planted exact and near duplicates and other languages, with ids."""
    docs = noisy_sample(n, seed=seed, other_language_fraction=0.1)
    return docs.assign(id=range(len(docs)))[["id", "text", "planted"]]


def write_jsonl(frame: pd.DataFrame, directory: Path, shards: int = 2) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(shards):
        part = frame.iloc[i::shards]
        part.to_json(directory / f"shard-{i}.jsonl", orient="records", lines=True)


def write_parquet(frame: pd.DataFrame, directory: Path, shards: int = 2) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(shards):
        frame.iloc[i::shards].reset_index(drop=True).to_parquet(directory / f"part-{i}.parquet")


def tinystories(path: Path, frame: pd.DataFrame) -> None:
    """A TinyStories-format file: stories separated by <|endoftext|> lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as out:
        for text in frame["text"]:
            out.write(text.strip() + "\n<|endoftext|>\n")


def read_all(directory: Path) -> pd.DataFrame:
    files = sorted(p for p in directory.rglob("*") if p.suffix in (".jsonl", ".parquet")
                   and not p.name.startswith("."))
    frames = [pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_json(p, lines=True)
              for p in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


BACKBONE = "microsoft/deberta-v3-base"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    """Local stand-ins for the hub models, in their publishers' layouts: tiny random
    DeBERTa classifiers with NeMo Curator's labels, and their backbone's config.json,
    keyed as ``--model`` names them."""
    pytest.importorskip("transformers", reason="the classifier scripts need the models extra")
    from curator_dask.testing.published_models import (
        deberta_v3_config,
        save_backbone_config,
        save_hub_mixin_classifier,
    )

    root = tmp_path_factory.mktemp("models")
    backbone = save_backbone_config(root / "deberta-v3-base", deberta_v3_config())
    return {
        BACKBONE: backbone,
        "QualityClassifier": save_hub_mixin_classifier(root / "quality", backbone,
                                                       ("High", "Medium", "Low"), seed=1),
        "DomainClassifier": save_hub_mixin_classifier(
            root / "domain", backbone, ("Games", "Sports", "News", "Science"), seed=2),
    }


def predicted(name: str, models: dict[str, str], docs: pd.DataFrame,
              column: str) -> dict[str, str]:
    """The named classifier's label of each document's text, run here on the same local
    model: what the migrated script must have written (copies of a text get its label)."""
    import curator_dask

    stage = getattr(curator_dask, name)(models[name], base_model_path=models[BACKBONE],
                                        device="cpu")
    labelled = stage.process(docs[["id", "text"]].reset_index(drop=True))
    return dict(zip(labelled["text"], labelled[column], strict=True))


def labelled_as(labels: dict[str, str], docs: pd.DataFrame, kept_labels) -> list[str]:
    """The documents (with their copies) whose label is one of ``kept_labels``, sorted."""
    return sorted(text for text in docs["text"] if labels[text] in kept_labels)


@pytest.fixture(scope="module")
def spacy_dir(tmp_path_factory) -> str:
    """A stand-in for en_core_web_lg: a blank English pipeline with an (untrained) NER."""
    spacy = pytest.importorskip("spacy", reason="PiiModifier's PERSON needs the pii extra")
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("ner")
    ner.add_label("PERSON")
    nlp.initialize()
    path = tmp_path_factory.mktemp("spacy") / "en_blank"
    nlp.to_disk(path)
    return str(path)


# -- the scripts ----------------------------------------------------------------------------

@dataclass
class Script:
    """How to run one script: what to copy, the data it reads, its arguments, the check."""

    copy: str
    entry: str
    prepare: callable
    check: callable
    args: list[str] = field(default_factory=list)
    checked_with_models: bool = False  # check(work, docs, models)


def data(write, directory: str, columns: list[str], n: int = 60, seed: int = 0):
    """A script's ``prepare``: the corpus's ``columns`` written by ``write`` to
    ``directory`` of the working directory; the documents for its check."""
    def prepare(work: Path) -> pd.DataFrame:
        docs = corpus(n, seed=seed)
        write(docs[columns], work / directory)
        return docs

    return prepare


def assert_near_duplicates_removed(kept: pd.DataFrame, docs: pd.DataFrame) -> None:
    """Documents went, none came from elsewhere, no text is there twice, and planted near
    duplicates were among those that went."""
    assert 0 < len(kept) < len(docs)
    assert kept["text"].is_unique
    assert set(kept["text"]) <= set(docs["text"])
    near = docs[docs["planted"] == "near_duplicate"]
    assert len(near) and not set(near["text"]) <= set(kept["text"])  # some of them went




def _exact_0x_check(work: Path, docs: pd.DataFrame) -> None:
    kept = read_all(work / "output")
    assert sorted(kept["text"]) == sorted(set(docs["text"]))  # each distinct text once
    assert len(kept) < len(docs)




def _fuzzy_0x_check(work: Path, docs: pd.DataFrame) -> None:
    kept = read_all(work / "output")
    assert_near_duplicates_removed(kept, docs)




def _quality_0x_check(work: Path, docs: pd.DataFrame, models: dict[str, str]) -> None:
    kept = read_all(work / "output")
    labels = predicted("QualityClassifier", models, docs, "quality_pred")
    # exactly the documents the model rates High or Medium, with NeMo Curator 0.x's columns
    assert sorted(kept["text"]) == labelled_as(labels, docs, {"High", "Medium"})
    assert kept["quality_pred"].tolist() == [labels[text] for text in kept["text"]]
    probabilities = np.stack(kept["quality_prob"].to_list())
    assert probabilities.shape == (len(kept), 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, rtol=1e-5)
    # write_to_filename: one output file per input file, named after it
    assert {p.name for p in (work / "output").glob("*.jsonl")} <= {"shard-0.jsonl",
                                                                    "shard-1.jsonl"}


def _languages_0x(work: Path):
    from curator_dask.stages.langid import bundled_model_path

    docs = corpus(seed=2)
    write_jsonl(docs[["id", "text"]], work / "data")
    shutil.copy(bundled_model_path(), work / "lid.176.ftz")
    return docs


def _languages_0x_check(work: Path, docs: pd.DataFrame) -> None:
    languages = {p.name for p in (work / "output").iterdir() if p.is_dir()}
    assert "EN" in languages and len(languages) >= 2
    english = read_all(work / "output" / "EN")
    assert set(english["language"]) == {"EN"}
    written = read_all(work / "output")
    assert set(written["text"]) <= set(docs["text"])


def _tinystories_0x(work: Path):
    docs = corpus(seed=3)
    tinystories(work / "tinystories_0x" / "data" / "TinyStories-valid.txt", docs)
    return docs


def _tinystories_0x_check(work: Path, docs: pd.DataFrame) -> None:
    curated = read_all(work / "tinystories_0x" / "data" / "jsonl" / "val" / "curated")
    assert 0 < len(curated) < len(docs)
    assert curated["text"].is_unique  # exact duplicates removed
    assert curated["text"].str.strip().str[-1].isin(list('.!?"”')).all()


def _tinystories_1x(work: Path):
    docs = corpus(seed=4)
    tinystories(work / "data" / "raw" / "TinyStories-valid.txt", docs)
    return docs


def _tinystories_1x_check(work: Path, docs: pd.DataFrame) -> None:
    curated = read_all(work / "data" / "curated")
    assert 0 < len(curated) < len(docs)
    assert not curated["text"].str.contains("\u201c").any()
    assert set(curated["file_name"]) == {"TinyStories-valid.txt"}




def _heuristic_1x_check(work: Path, docs: pd.DataFrame) -> None:
    kept = read_all(work / "high_quality_output")
    assert 0 < len(kept) < len(docs)
    assert (kept["word_count"] >= 80).all()
    assert set(kept["id"]) <= set(docs["id"])




def _exact_guide_1x_check(work: Path, docs: pd.DataFrame) -> None:
    assert (work / "results" / "ExactDuplicateIds").is_dir()
    kept = read_all(work / "deduplicated")
    assert sorted(kept["text"]) == sorted(set(docs["text"]))




def _math_1x_check(work: Path, docs: pd.DataFrame) -> None:
    assert (work / "ids" / "FuzzyDuplicateIds").is_dir()  # duplicates were found
    assert_near_duplicates_removed(read_all(work / "out"), docs)




def _classifier_1x_check(work: Path, docs: pd.DataFrame, models: dict[str, str]) -> None:
    kept = read_all(work / "games_and_sports")
    labels = predicted("DomainClassifier", models, docs, "domain_pred")
    assert sorted(kept["text"]) == labelled_as(labels, docs, {"Games", "Sports"})
    assert kept["domain_pred"].tolist() == [labels[text] for text in kept["text"]]
    assert set(kept.columns) == {"text", "id", "domain_pred"}  # 1.x: no probabilities
    assert set(kept["id"]) <= set(docs["id"])


def rendered(options: str, stand_ins: dict[str, str]) -> list[str]:
    """The table's migrate options, ``--model NAME=DIR`` given this test's directories."""
    out = []
    for token in options.split() if options != "-" else []:
        name, sep, value = token.partition("=")
        out.append(f"{name}={stand_ins[name]}" if sep and value == "DIR" else token)
    return out


WORKERS = ["--n-workers", "2"]
CASES = {
    "exact_deduplication_0x.py": Script(
        "exact_deduplication_0x.py", "exact_deduplication_0x.py",
        data(write_jsonl, "data", ["id", "text"]), _exact_0x_check, WORKERS),
    "fuzzy_deduplication_0x.py": Script(
        "fuzzy_deduplication_0x.py", "fuzzy_deduplication_0x.py",
        data(write_parquet, "data", ["id", "text"], seed=1), _fuzzy_0x_check, WORKERS),
    "quality_example_0x.py": Script(
        "quality_example_0x.py", "quality_example_0x.py",
        data(write_jsonl, "data", ["id", "text"], 40), _quality_0x_check, ["--n-workers", "1"],
        checked_with_models=True),
    "identify_languages_0x.py": Script(
        "identify_languages_0x.py", "identify_languages_0x.py", _languages_0x,
        _languages_0x_check, WORKERS),
    "tinystories_0x/": Script("tinystories_0x", "tinystories_0x/main.py", _tinystories_0x,
                              _tinystories_0x_check, WORKERS),
    "tinystories_1x/": Script("tinystories_1x", "tinystories_1x/main.py", _tinystories_1x,
                              _tinystories_1x_check, ["--data_root", "data"]),
    "heuristic_filtering_1x.py": Script(
        "heuristic_filtering_1x.py", "heuristic_filtering_1x.py",
        data(write_jsonl, "input_data", ["id", "text"], seed=5), _heuristic_1x_check),
    "exact_dedup_guide_1x.py": Script(
        "exact_dedup_guide_1x.py", "exact_dedup_guide_1x.py",
        data(write_parquet, "input_data", ["text"], seed=6), _exact_guide_1x_check),
    "math_deduplication_1x.py": Script(
        "math_deduplication_1x.py", "math_deduplication_1x.py",
        data(write_jsonl, "in", ["text"], seed=7), _math_1x_check,
        ["--input", "in", "--cache_dir", "cache", "--duplicate_ids_dir", "ids", "--output",
         "out", "--input_filetype", "jsonl", "--char_ngrams", "20"]),
    "distributed_classifier_1x.py": Script(
        "distributed_classifier_1x.py", "distributed_classifier_1x.py",
        data(write_jsonl, "books_dataset", ["id", "text"], 40, seed=8), _classifier_1x_check,
        checked_with_models=True),
}


def test_the_docs_table_lists_the_ten_scripts_with_nothing_done_by_hand():
    assert set(ROWS) == set(CASES)
    assert len(ROWS) == 10
    for name, row in ROWS.items():
        assert (SCRIPTS / CASES[name].copy).exists(), name
        assert row["hand_edited"] == "0" and row["unfixed"] == "0", name


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_migrated_nemo_curator_script_runs_unchanged(name, tmp_path, models, spacy_dir):
    case = CASES[name]
    source = SCRIPTS / case.copy
    target = tmp_path / case.copy
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy(source, target)
    docs = case.prepare(tmp_path)
    options = rendered(ROWS[name]["options"], {**models, "PiiModifier": spacy_dir})
    migrated = migrate([target], options, tmp_path)
    assert migrated.returncode == 0, migrated.stderr + migrated.stdout
    assert "nemo_curator" not in "".join(p.read_text() for p in
                                         ([target] if target.is_file() else
                                          target.rglob("*.py")))
    entry = tmp_path / case.entry
    ran = run([sys.executable, str(entry), *case.args], cwd=tmp_path)
    assert ran.returncode == 0, f"{name} failed:\n{ran.stderr[-6000:]}\n{ran.stdout[-2000:]}"
    case.check(tmp_path, docs, *([models] if case.checked_with_models else []))
