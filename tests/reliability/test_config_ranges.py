"""Pipeline-file numbers out of range are usage errors (exit 2) at ``--dry-run``, naming the
file, the line and the parameter: infinite and NaN numbers, sizes and counts below their
range, absurd sizes, integers beyond 64 bits and booleans where numbers are wanted.

The generic rules hold for every numeric parameter of every section (the reader, the
cluster, the executors, every stage of the catalog); the bounds for the parameters that
carry them in their type hints (``curator_dask.bounds``).
"""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curator_dask.cli.config import ConfigError, cluster_options, executor_types, load_config_text
from curator_dask.cli.main import main
from curator_dask.cli.registry import parameters_of, stage_catalog
from curator_dask.stages.io_stages import JsonlReader

# Values no numeric parameter takes, as a pipeline file spells them; "1e400" is a string
# in YAML, which a parameter that also takes text may accept (as text).
NEVER_A_NUMBER = [".inf", "-.inf", ".nan", "true", "false", str(2**70), str(-(2**70))]
NOT_TEXT = ["1e400"]


def numeric(parameter) -> bool:
    text = parameter.annotation
    return ("int" in text or "float" in text) and "bool" not in text


def sections():
    """``(section, template, parameter)`` for every numeric parameter a pipeline file can
    set; the template puts the value on line 4."""
    out = [("reader", "reader:\n  type: jsonl\n  path: data/\n  {k}: {v}\nstages: []\n", p)
           for p in parameters_of(JsonlReader) if numeric(p)]
    out += [("cluster", "reader: {{type: jsonl, path: data/}}\nstages: []\ncluster:\n  {k}: {v}\n",
             p) for p in cluster_options() if numeric(p)]
    for name, cls in executor_types().items():
        out += [("executor", f"reader: {{{{type: jsonl, path: data/}}}}\nstages: []\nexecutor:\n"
                 f"  {{k}}: {{v}}\n  type: {name}\n", p)
                for p in parameters_of(cls, skip=("self", "client")) if numeric(p)]
    for name, spec in stage_catalog().items():
        out += [("stage", f"reader: {{{{type: jsonl, path: data/}}}}\nstages:\n  - {name}:\n"
                 f"      {{k}}: {{v}}\n", p)
                for p in (*spec.parameters, *spec.options) if numeric(p)]
    return out


SECTIONS = sections()


def test_the_sweep_covers_every_section():
    assert {section for section, _, _ in SECTIONS} == {"reader", "cluster", "executor", "stage"}


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(case=st.sampled_from(SECTIONS), value=st.sampled_from(NEVER_A_NUMBER + NOT_TEXT))
def test_no_numeric_parameter_takes_a_non_number(case, value):
    _, template, parameter = case
    if value in NOT_TEXT and "str" in parameter.annotation:
        return
    with pytest.raises(ConfigError) as caught:
        load_config_text(template.format(k=parameter.name, v=value), "p.yaml")
    message = str(caught.value)
    assert caught.value.line == 4 and message.startswith("p.yaml, line 4: "), message
    assert parameter.name in message, message


def dry_run(tmp_path, monkeypatch, capsys, body: str) -> tuple[int, str]:
    """``curator-dask run p.yaml --dry-run`` on ``body`` beside a one-line input in
    ``data/``: the exit code and stderr."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "one"}\n')
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(body)
    code = main(["run", "p.yaml", "--dry-run"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("section, key, value", [
    ("reader", "blocksize", "1e400"),
    ("reader", "blocksize", "'1e30'"),
    ("reader", "blocksize", "-1"),
    ("reader", "blocksize", "0"),
    ("reader", "blocksize", "'-1KiB'"),
    ("reader", "blocksize", "'2TiB'"),
    ("reader", "files_per_partition", "0"),
    ("reader", "files_per_partition", "-2"),
    ("cluster", "n_workers", "-1"),
    ("cluster", "threads_per_worker", "0"),
    ("cluster", "memory_limit", "-5"),
    ("cluster", "memory_limit", "'-1KiB'"),
    ("cluster", "memory_limit", "1e30"),
    ("cluster", "worker_lifetime", "-10"),
    ("cluster", "worker_lifetime", "'soon'"),
    ("cluster", "no_workers_timeout", "'-1s'"),
    ("executor", "max_in_flight", "0"),
    ("stage", "batch_size", "0"),
])
def test_sizes_and_counts_out_of_range_exit_2_at_dry_run(tmp_path, monkeypatch, capsys,
                                                         section, key, value):
    reader = "reader: {type: jsonl, path: data/}\n"
    body = {
        "reader": f"reader:\n  type: jsonl\n  path: data/\n  {key}: {value}\nstages: []\n",
        "cluster": f"{reader}stages: []\ncluster:\n  {key}: {value}\n",
        "executor": f"{reader}stages: []\nexecutor:\n  {key}: {value}\n",
        "stage": f"{reader}stages:\n  - AddId:\n      {key}: {value}\n",
    }[section]
    code, err = dry_run(tmp_path, monkeypatch, capsys, textwrap.dedent(body))
    assert code == 2, err
    assert "p.yaml, line 4: " in err and key in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("stage, key, value", [
    ("FuzzyDedup", "minhashes_per_band", str(10**11)),  # a signature of 2e12 hashes
    ("FuzzyDedup", "num_bands", "0"),
    ("FuzzyDedup", "char_ngrams", "-1"),
    ("FuzzyDedup", "jaccard_threshold", "1.5"),
    ("RepeatingTopNGramsFilter", "n", "0"),
])
def test_a_stage_parameter_out_of_its_range_exits_2_at_dry_run(tmp_path, monkeypatch, capsys,
                                                               stage, key, value):
    code, err = dry_run(tmp_path, monkeypatch, capsys, f"reader: {{type: jsonl, path: data/}}\n"
                        f"stages:\n  - {stage}:\n      {key}: {value}\n")
    assert code == 2, err
    assert "p.yaml, line " in err and key in err and stage in err, err
