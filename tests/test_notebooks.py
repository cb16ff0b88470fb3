"""Notebooks run top to bottom and are committed without outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_has_no_stale_outputs(path):
    notebook = json.loads(path.read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert code, f"{path.name} has no code"
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code), \
        f"{path.name} is committed with outputs; clear them"
    namespace: dict = {}
    for cell in code:
        exec(compile("".join(cell["source"]), f"{path.name}:{cell['id']}", "exec"), namespace)


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS][:1] == ["01-quickstart.ipynb"]
