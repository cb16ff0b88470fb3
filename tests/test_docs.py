"""The documentation site builds strictly, API reference included, and the Grafana
dashboard charts every metric curator-dask exports."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).parent.parent
#: A Sphinx role as it would leak into a page: :class:`...`, :func:`...`, ...
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`")


@pytest.mark.slow
def test_mkdocs_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-4000:]
    for page in ("index.html", "concepts/index.html", "deploying/index.html",
                 "monitoring/index.html", "migrating/index.html", "benchmarks/index.html",
                 "api/dedup/index.html", "grafana-dashboard.json"):
        assert (tmp_path / page).exists(), page
    dedup = (tmp_path / "api/dedup/index.html").read_text()
    assert "ExactDeduplicationWorkflow" in dedup
    # Sphinx roles in docstrings are links (or code where the target has no page), never
    # raw text.
    leaked = {str(page.relative_to(tmp_path)): sorted(set(ROLE.findall(page.read_text())))
              for page in tmp_path.rglob("*.html") if ROLE.search(page.read_text())}
    assert leaked == {}
    assert 'href="../stages/#curator_dask.stages.base.WholeDatasetStage"' in dedup


def test_every_page_in_docs_is_in_the_navigation():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav):
        for item in nav:
            if isinstance(item, str):
                yield item
            else:
                for value in item.values():
                    yield from (pages(value) if isinstance(value, list) else [value])

    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk == listed


def exported_metrics() -> set[str]:
    """Every metric curator_dask.observe.prometheus defines, by the name a query uses."""
    source = (ROOT / "curator_dask" / "observe" / "prometheus.py").read_text()
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            kind = node.func.id
            assert kind not in ("Histogram", "Summary", "Info", "Enum"), (
                f"a new {kind}: say here which of its series the dashboard must chart")
            if kind in ("Counter", "Gauge"):
                name = node.args[0].value
                # prometheus_client serves a counter's value as <name>_total.
                names.add(name if kind == "Gauge" or name.endswith("_total") else f"{name}_total")
    return names


def dashboard_panels() -> list[dict]:
    return json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())["panels"]


def dashboard_queries() -> list[str]:
    return [target["expr"] for panel in dashboard_panels() for target in panel["targets"]]


def test_grafana_dashboard_charts_every_metric_curator_dask_exports():
    exported = exported_metrics()
    assert {"curator_stage_rows_total", "curator_stage_busy_ratio"} <= exported
    charted = {name for expr in dashboard_queries() for name in re.findall(r"\bcurator_\w+", expr)}
    assert exported - charted == set(), "exported but not on docs/grafana-dashboard.json"
    assert charted - exported == set(), "charted but not exported"


def test_grafana_dashboard_panels_have_unique_ids_and_do_not_overlap():
    panels = dashboard_panels()
    assert len({p["id"] for p in panels}) == len(panels)
    taken: dict[tuple[int, int], int] = {}
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, f"panel {panel['id']} is wider than the dashboard"
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in taken, f"panels {taken[x, y]} and {panel['id']} overlap"
                taken[x, y] = panel["id"]


def test_the_metrics_and_labels_the_dashboard_queries_are_served():
    prometheus_client = pytest.importorskip("prometheus_client")
    from curator_dask.observe.prometheus import count_stage_work, set_stage_gauges

    count_stage_work("docs_check", rows=1, seconds=0.1, partitions=1)
    set_stage_gauges("docs_pipeline", "docs_check", busy_ratio=0.5, queue_length=2)
    served = {sample.name: set(sample.labels)
              for family in prometheus_client.REGISTRY.collect() for sample in family.samples
              if sample.labels.get("stage") == "docs_check"}
    assert exported_metrics() <= set(served)
    for expr in dashboard_queries():
        grouped = {label.strip() for labels in re.findall(r"\bby \(([^)]*)\)", expr)
                   for label in labels.split(",")}
        for name in re.findall(r"\bcurator_\w+", expr):
            assert grouped <= served[name], f"{expr}: {name} has labels {sorted(served[name])}"


def python_blocks(page: str) -> list[str]:
    """The ```python blocks of a page under docs/."""
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / page).read_text(), re.S)


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1], ids=["interactively", "as-a-pipeline"])
def test_the_scripts_of_getting_started_run_when_saved_as_a_file(tmp_path, index):
    # A local cluster starts worker processes that import the main script: without the
    # __main__ guard, each would start a cluster of its own.
    script = python_blocks("index.md")[index]
    assert 'if __name__ == "__main__":' in script
    words = " ".join(f"word{i}" for i in range(60))
    rows = [{"text": f"{words} {i % 3}"} for i in range(9)]  # three texts, three copies each
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # One worker process on this small machine; the script is otherwise as the page has it.
    (tmp_path / "script.py").write_text(re.sub(r"n_workers=\d+", "n_workers=1", script))
    ran = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=240, check=False,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert ran.returncode == 0, ran.stderr[-3000:]
    kept = pd.read_parquet(tmp_path / "out")
    assert sorted(kept["text"].str[-1]) == ["0", "1", "2"]  # one copy of each text
