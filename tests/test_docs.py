"""The documentation site builds with warnings as errors, API reference included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def test_mkdocs_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-4000:]
    for page in ("index.html", "concepts/index.html", "deploying/index.html",
                 "monitoring/index.html", "migrating/index.html", "benchmarks/index.html",
                 "api/dedup/index.html", "grafana-dashboard.json"):
        assert (tmp_path / page).exists(), page
    assert "ExactDeduplicationWorkflow" in (tmp_path / "api/dedup/index.html").read_text()


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


def test_grafana_dashboard_queries_metrics_that_exist():
    import json

    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    for metric in ("curator_stage_rows_total", "curator_stage_seconds_total",
                   "curator_stage_partitions_total"):
        assert metric in exprs
    prometheus_client = pytest.importorskip("prometheus_client")
    from curator_dask.observe.prometheus import count_stage_work

    count_stage_work("docs_check", rows=1, seconds=0.1, partitions=1)
    served = prometheus_client.generate_latest().decode()
    for metric in ("curator_stage_rows_total", "curator_stage_seconds_total",
                   "curator_stage_partitions_total"):
        assert f'{metric}{{stage="docs_check"}}' in served
