"""Pipeline files are checked against the type hints of what they configure: every value
of the wrong type is a usage error (exit code 2) at ``--dry-run``, naming the file, the
line, the parameter and the type it expects, before any cluster starts."""

from __future__ import annotations

import textwrap

import pytest

from curator_dask.cli.config import load_config
from curator_dask.cli.main import main
from curator_dask.cli.registry import REQUIRED, parameters_of, stage_catalog


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory with one JSONL file under ``data/``."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "one two three"}\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def dry_run(workdir, body: str, capsys) -> tuple[int, str]:
    path = workdir / "bad.yaml"
    path.write_text(textwrap.dedent(body).lstrip())
    code = main(["run", str(path), "--dry-run"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("body, line, expected", [
    ("""
     reader: {type: jsonl, path: data/}
     stages:
       - AddId
       - WordCountFilter: {min_words: twenty}
     """, 4, "WordCountFilter: min_words expects int, got 'twenty'"),
    ("""
     reader:
       type: jsonl
       path: data/
       blocksize: lots
     stages: []
     """, 4, "blocksize expects int >= 1 <= 2**40 | str (a size such as '256MiB', of at most "
             "1 TiB) | None, got 'lots'"),
    ("""
     reader:
       type: jsonl
       path: data/
       blocksize: [1, 2]
     stages: []
     """, 4, "jsonl reader: blocksize expects int >= 1 <= 2**40 | str (a size such as "
             "'256MiB', of at most 1 TiB) | None, got [1, 2]"),
    ("""
     reader: {type: jsonl, path: data/}
     stages: []
     writer:
       type: parquet
       path: out/
       mode: replace
     """, 6, "parquet writer: mode expects one of 'error', 'overwrite', 'overwrite_all', "
             "'append', got 'replace'"),
    ("""
     reader: {type: jsonl, path: data/}
     stages: []
     cluster:
       n_workers: many
     """, 4, "cluster: n_workers expects int >= 0 | None, got 'many'"),
    ("""
     reader: {type: jsonl, path: data/}
     stages: []
     executor:
       type: streaming
       max_in_flight: 2.5
     """, 5, "streaming executor: max_in_flight expects int >= 1 | None, got 2.5"),
    ("""
     reader: {type: jsonl, path: data/}
     stages:
       - LanguageIdFilter:
           languages: [en, 5]
     """, 4, "LanguageIdFilter: languages expects Sequence[str] | None, got ['en', 5] "
             "(item 1: input should be a valid string)"),
    ("""
     reader: {type: jsonl, path: data/}
     stages:
       - WordCountFilter:
           min_words: 3
           invert: sometimes
     """, 5, "WordCountFilter: invert expects bool, got 'sometimes'"),
    ("""
     reader: {type: jsonl, path: data/}
     stages:
       - ExactDedup: {hash_method: sha1}
     """, 3, "ExactDedup: hash_method expects one of 'md5', 'xxh3_128', got 'sha1'"),
    ("""
     reader: {type: jsonl, path: data/}
     stages:
       - AddId:
           batch_size: two
     """, 4, "AddId: batch_size expects int >= 1 | None, got 'two'"),
    ("""
     reader:
       type: jsonl
     stages: []
     """, 1, "the reader needs a 'path:'"),
    ("""
     reader:
       type: jsonl
       path: no-such-dir/
     stages: []
     """, 3, "reader path: input path does not exist: 'no-such-dir/'"),
    ("""
     reader:
       type: parquet
       path: data/
     stages: []
     """, 3, "reader path: no files ending in .parquet"),
])
def test_each_bad_value_is_a_usage_error_naming_file_line_parameter_and_type(
        workdir, capsys, body, line, expected):
    code, err = dry_run(workdir, body, capsys)
    assert code == 2, err
    assert f"bad.yaml, line {line}: " in err
    assert expected in err


def test_values_reach_the_stages_as_their_type_hints_take_them(workdir):
    (workdir / "p.yaml").write_text(textwrap.dedent("""
        reader: {type: jsonl, path: data/, blocksize: 1MiB}
        stages:
          - LanguageIdFilter: {languages: [en, de], min_score: 1}
          - GopherRepetitionFilter: {top_n_grams: [[2, 0.25]]}
        cluster: {n_workers: 2}
    """).lstrip())
    config = load_config(workdir / "p.yaml")
    config.check_inputs()
    lang, gopher = config.pipeline.stages[1:]
    assert lang.min_score == 1.0 and isinstance(lang.min_score, float)
    assert tuple(lang.languages) == ("en", "de")
    assert [tuple(pair) for pair in gopher.filter_obj.top_n_grams] == [(2, 0.25)]
    assert config.cluster_options == {"n_workers": 2}


def test_every_parameter_a_pipeline_file_can_set_has_a_type_hint():
    # The hints are what the file is checked against: a parameter without one would let
    # any value through to fail on a worker.
    from curator_dask.cli.config import READERS, WRITERS, cluster_options, executor_types

    unchecked = [f"{name}.{p.name}" for name, spec in stage_catalog().items()
                 for p in (*spec.parameters, *spec.options) if p.hint is None]
    for group in (READERS, WRITERS, executor_types()):
        unchecked += [f"{cls.__name__}.{p.name}" for cls in group.values()
                      for p in parameters_of(cls, skip=("self", "client")) if p.hint is None]
    unchecked += [f"get_client.{p.name}" for p in cluster_options() if p.hint is None]
    # UnicodeReformatter's config is an ftfy object: only Python code can pass one.
    assert unchecked == ["UnicodeReformatter.config"]


def test_a_default_is_accepted_whatever_the_hint_says():
    spec = stage_catalog()["GopherQualityFilter"]
    assert all(p.check(p.default) is p.default for p in spec.parameters
               if p.default is not REQUIRED)
