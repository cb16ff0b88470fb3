"""Prometheus counters of stage work, kept in each worker process.

Distributed's worker HTTP server serves prometheus_client's default registry at
``/metrics``, so counters registered there by the stage runtime show up beside Dask's
own worker metrics (``http://<worker host>:<dashboard port>/metrics``):

- ``curator_stage_rows_total{stage=...}``: rows handed to the stage
- ``curator_stage_seconds_total{stage=...}``: seconds spent in the stage's tasks
- ``curator_stage_partitions_total{stage=...}``: partitions processed

Without prometheus_client installed the counters are skipped.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["count_stage_work", "stage_counters"]

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_counters: dict | None = None


def stage_counters() -> dict | None:
    """This process's counters (created on first use), or None without prometheus_client."""
    global _counters
    if _counters is not None:
        return _counters or None
    with _lock:
        if _counters is None:
            try:
                from prometheus_client import Counter
            except ImportError:
                logger.debug("prometheus_client is not installed: no stage counters")
                _counters = {}
                return None
            _counters = {
                "rows": Counter("curator_stage_rows", "Rows processed by a curator-dask stage",
                                ["stage"]),
                "seconds": Counter("curator_stage_seconds",
                                   "Seconds spent in a curator-dask stage's tasks", ["stage"]),
                "partitions": Counter("curator_stage_partitions",
                                      "Partitions processed by a curator-dask stage", ["stage"]),
            }
    return _counters or None


def count_stage_work(stage: str, rows: int, seconds: float, partitions: int) -> None:
    """Add one task's work to this process's counters."""
    counters = stage_counters()
    if counters is None:
        return
    counters["rows"].labels(stage=stage).inc(rows)
    counters["seconds"].labels(stage=stage).inc(seconds)
    counters["partitions"].labels(stage=stage).inc(partitions)
