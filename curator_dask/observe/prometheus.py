"""Prometheus metrics of stage work: counters in each worker, gauges in the driver.

Distributed's worker HTTP server serves prometheus_client's default registry at
``/metrics``, so counters registered there by the stage runtime show up beside Dask's
own worker metrics (``http://<worker host>:<dashboard port>/metrics``):

- ``curator_stage_rows_total{stage=...}``: rows handed to the stage
- ``curator_stage_seconds_total{stage=...}``: seconds spent in the stage's tasks
- ``curator_stage_partitions_total{stage=...}``: partitions processed

The streaming executor sets gauges in the process that runs the pipeline, every second:

- ``curator_stage_busy_ratio{pipeline=...,stage=...}``: share of the stage's worker slots
  busy with its tasks over the last measurement window (``3 * balance_interval``)
- ``curator_stage_queue_length{pipeline=...,stage=...}``: partitions waiting in front of
  the stage

A cluster from ``get_client()`` runs its scheduler in that process, so the scheduler's
``/metrics`` (the dashboard port) serves them; with a remote scheduler, serve them from
the driver with ``prometheus_client.start_http_server(port)``.

Without prometheus_client installed the metrics are skipped.
"""

from __future__ import annotations

import functools
import logging
import threading

__all__ = ["clear_stage_gauges", "count_stage_work", "set_stage_gauges", "stage_counters",
           "stage_gauges"]

logger = logging.getLogger(__name__)

_lock = threading.Lock()


def stage_counters() -> dict | None:
    """This process's counters (created on first use), or None without prometheus_client."""
    with _lock:  # created once: a second registration of a metric name is an error
        return _make_counters() or None


@functools.cache
def _make_counters() -> dict:
    try:
        from prometheus_client import Counter
    except ImportError:
        logger.debug("prometheus_client is not installed: no stage counters")
        return {}
    return {
        "rows": Counter("curator_stage_rows", "Rows processed by a curator-dask stage",
                        ["stage"]),
        "seconds": Counter("curator_stage_seconds",
                           "Seconds spent in a curator-dask stage's tasks", ["stage"]),
        "partitions": Counter("curator_stage_partitions",
                              "Partitions processed by a curator-dask stage", ["stage"]),
    }


def count_stage_work(stage: str, rows: int, seconds: float, partitions: int) -> None:
    """Add one task's work to this process's counters."""
    counters = stage_counters()
    if counters is None:
        return
    counters["rows"].labels(stage=stage).inc(rows)
    counters["seconds"].labels(stage=stage).inc(seconds)
    counters["partitions"].labels(stage=stage).inc(partitions)


def stage_gauges() -> dict | None:
    """This process's gauges (created on first use), or None without prometheus_client."""
    with _lock:
        return _make_gauges() or None


@functools.cache
def _make_gauges() -> dict:
    try:
        from prometheus_client import Gauge
    except ImportError:
        return {}
    return {
        "busy": Gauge("curator_stage_busy_ratio",
                      "Share of a curator-dask stage's worker slots busy with its tasks",
                      ["pipeline", "stage"]),
        "queue": Gauge("curator_stage_queue_length",
                       "Partitions waiting in front of a curator-dask stage",
                       ["pipeline", "stage"]),
    }


def set_stage_gauges(pipeline: str, stage: str, busy_ratio: float | None,
                     queue_length: int) -> None:
    """Set one stage's gauges (a busy ratio of None, not measured yet, is left alone)."""
    gauges = stage_gauges()
    if gauges is None:
        return
    if busy_ratio is not None:
        gauges["busy"].labels(pipeline=pipeline, stage=stage).set(busy_ratio)
    gauges["queue"].labels(pipeline=pipeline, stage=stage).set(queue_length)


def clear_stage_gauges(pipeline: str, stages) -> None:
    """Remove the gauges of a finished run's stages, so dashboards show no stale values."""
    gauges = stage_gauges()
    if gauges is None:
        return
    for stage in stages:
        for gauge in gauges.values():
            gauge.remove(pipeline, stage)
