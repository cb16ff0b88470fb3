"""Watching runs: per-stage metrics, progress, Prometheus counters, HTML reports."""

from curator_dask.observe.progress import Progress
from curator_dask.observe.prometheus import count_stage_work, stage_counters
from curator_dask.observe.report import format_stage_table, stage_rows, write_report
from curator_dask.observe.run_result import RunResult, StageMetrics, format_stages, stage_metrics

__all__ = ["Progress", "RunResult", "StageMetrics", "count_stage_work", "format_stage_table",
           "format_stages", "stage_counters", "stage_metrics", "stage_rows", "write_report"]
