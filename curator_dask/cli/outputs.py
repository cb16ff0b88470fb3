"""What a command will write, checked before anything runs.

``curator-dask run`` and ``curator-dask dedup`` register every path they write (the
output and cache directories, the curation report, distributed's performance report)
with one :class:`~curator_dask.io.guard.OutputGuard` before a cluster starts: a path
that is, contains or lies inside an input or another of them raises
:class:`~curator_dask.io.errors.OutputOverlapsInputError` naming both, which the command
reports as a usage error (exit code 2). The guard is then entered for the run: it holds
the leases of the directories until the command ends, and the run joins it.
"""

from __future__ import annotations

from curator_dask.executors.layout import Layout
from curator_dask.io.guard import OutputGuard
from curator_dask.io.overlap import input_paths

__all__ = ["pipeline_outputs", "workflow_outputs"]


def pipeline_outputs(config, report: str | None, *, force: bool) -> OutputGuard:
    """The guard of a pipeline file's run (a :class:`~curator_dask.cli.config.PipelineConfig`)
    with its input, output, cache, performance report and curation ``report`` registered.
    ``force`` (or the file's executor ``force: true``) takes over stale leases."""
    planned = config.executor()
    guard = OutputGuard(force=force or getattr(planned, "force", False))
    planned.register_outputs(guard, Layout.of(config.pipeline.name, config.pipeline.stages),
                             config.performance_report)
    if report:
        guard.register(report, "report", kind="file")
    return guard


def workflow_outputs(workflow) -> OutputGuard:
    """The guard of a dedup workflow's run with its input, output (when it writes one) and
    cache directories registered."""
    # The dedup package is imported when a dedup command runs, not for every command.
    from curator_dask.dedup.cache import register_workflow

    guard = OutputGuard([input_paths(workflow.input_path, workflow.storage_options)],
                        force=workflow.force)
    register_workflow(guard, workflow)
    return guard
