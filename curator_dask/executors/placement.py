"""Where a stage's tasks may run: its resources checked against the workers, and its span.

- Only resources given at submission restrict tasks (with query planning, annotations
  made while building a dataframe are dropped), so every task is submitted, or
  persisted, with its stage's resources, the reads and writes included.
- A task whose resources no worker offers waits forever: placement is checked against
  the workers' advertised resources before anything is submitted (:func:`check_placement`).
- Spans group tasks by key prefix, and the scheduler keeps the placement of keys it has
  seen: each stage gets its own prefix (:func:`~curator_dask.stages.base.key_prefix`)
  and each run a fresh token, ``<stage>-<token>-<first input partition>``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import dask

from curator_dask.errors import ResourceUnavailableError
from curator_dask.resources import Resources
from curator_dask.stages.base import Stage

__all__ = ["check_placement", "span_annotation"]

logger = logging.getLogger(__name__)


def _offers(worker: dict, wanted: dict) -> bool:
    return all(worker.get(name, 0) >= amount for name, amount in wanted.items())


def check_placement(stages: Sequence[Stage], names: dict[int, str],
                    workers: dict[str, dict]) -> dict[int, dict]:
    """The Dask resources each stage's tasks will ask for, checked against the workers.

    A stage whose resources no worker offers raises :class:`ResourceUnavailableError`
    naming the stage and the resource, unless it has ``cpu_fallback = True`` and needs a
    GPU: then it runs with one CPU, and a warning says so.

    When no worker advertises any resource at all (a plain ``LocalCluster()``), there is
    no GPU worker to keep CPU work away from: CPU stages run unrestricted (``{}``) and
    a stage that needs a GPU fails as above.
    """
    if not workers:
        raise ResourceUnavailableError(
            "no workers are connected to the scheduler; start workers (or wait for them "
            "with client.wait_for_workers(n)) before running the pipeline"
        )
    unrestricted = not any(workers.values())
    offered = sorted({f"{k}={v:g}" for w in workers.values() for k, v in w.items()})
    resolved: dict[int, dict] = {}
    for stage in stages:
        resources: Resources = stage.resources
        wanted = resources.to_dask()
        if unrestricted and not resources.requires_gpu:
            wanted = {}
        elif not any(_offers(w, wanted) for w in workers.values()):
            fallback = {"CPU": 1.0}
            if (resources.requires_gpu and stage.cpu_fallback
                    and any(_offers(w, fallback) for w in workers.values())):
                logger.warning("stage %r asks for %s but no worker offers it; running it on "
                               "CPU (cpu_fallback=True)", names[id(stage)], resources)
                wanted = fallback
            else:
                missing = ", ".join(f"{k}={v:g}" for k, v in wanted.items())
                hint = ("start GPU workers (get_client(cluster_type='gpu' or 'mixed')) or "
                        "give the stage cpu_fallback=True" if resources.requires_gpu else
                        "give every CPU worker the resource: LocalCluster(resources="
                        "{'CPU': 1}), or start workers with --resources CPU=<threads> "
                        "(get_client() does both; for dask-jobqueue pass "
                        "worker_extra_args=['--resources', 'CPU=<cores>'])")
                raise ResourceUnavailableError(
                    f"stage {names[id(stage)]!r} asks for {missing} per task, but no worker "
                    f"offers that (workers offer: {', '.join(offered) or 'no resources'}); "
                    f"{hint}"
                )
        resolved[id(stage)] = wanted
    return resolved


def span_annotation(*tags: str) -> dict:
    """The annotation of a new span, to re-enter it for every submission of a stage.

    ``distributed.span`` makes a new span each time it is entered; a stage submits its
    tasks over the whole run, so the executor enters the span once and reuses it.
    """
    from distributed import span

    with span(*tags):
        return dict(dask.get_annotations()["span"])
