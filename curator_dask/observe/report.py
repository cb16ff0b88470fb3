"""The curation report: what each stage of a run kept and dropped, as a table and charts.

:func:`stage_rows` turns a :class:`~curator_dask.observe.run_result.RunResult` into one row
per stage (documents in, out, dropped by reason, seconds); :func:`format_stage_table`
lays them out for a terminal; :func:`write_report` writes a standalone HTML page with
Bokeh charts (documents kept per stage, drop reasons, duplicate cluster sizes, time per
stage) that opens offline: Bokeh's JavaScript is inlined.

This is separate from distributed's performance report (``Pipeline.run(report=...)``),
which shows the task stream and profiles of the cluster rather than the data.

Drop reasons are attributed to stages by name: a reason belongs to the stage it is named
after (``word_count`` to the ``word_count`` filter, ``language_id.low_score`` to
``language_id``), reader reasons (``reader.*``) to the reader, and a dedup stage's reason
(``exact_duplicate``) to that stage, counted from its rows in and out (a whole-dataset
stage's output may be re-read from disk without the counts on its partitions). What any
other stage removed beyond its named reasons is counted the same way, under its name.

Counters (events that dropped no document, such as entities redacted by type; see
:mod:`curator_dask.dropped`) are attributed to stages by the same naming rule and shown in
a "counted" column beside the drops. Counters that record a distribution
(``<stage>.<column>=<value>``, what classifiers count for their labels) are also drawn as
one chart per stage and column (:func:`label_distributions`).
"""

from __future__ import annotations

import html
import logging
import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field

from curator_dask.dropped import distribution_value
from curator_dask.io import atomic
from curator_dask.io.guard import OutputGuard
from curator_dask.observe.run_result import RunResult, describe_lost_workers

__all__ = [
    "StageRow",
    "cluster_sizes",
    "format_stage_table",
    "label_distributions",
    "stage_rows",
    "write_report",
]

logger = logging.getLogger(__name__)

_READER_PREFIX = "reader."


@dataclass
class StageRow:
    """One stage's line in the report.

    ``seconds`` is the time spent in the stage's tasks, summed over workers (for a
    whole-dataset stage, its wall time). ``counters`` are the stage's counted events that
    dropped no document (entities redacted, documents split).
    """

    stage: str
    kind: str
    docs_in: int
    docs_out: int
    seconds: float
    dropped: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)


def _dedup_reason(stage) -> str | None:
    last_run = getattr(stage, "last_run", None)
    return getattr(last_run, "reason", None)


def _dedup_removed(stage) -> dict[str, int]:
    """What a whole-dataset stage that drops for several reasons recorded, by reason."""
    removed = getattr(getattr(stage, "last_run", None), "removed", None)
    return {k: v for k, v in removed.items() if v} if isinstance(removed, dict) else {}


def _matched_stages(result: RunResult, stages: Sequence | None) -> list:
    """The stage objects beside ``result.stages``, in order (None where unknown)."""
    if stages is not None and len(stages) == len(result.stages):
        return list(stages)
    return [None] * len(result.stages)


def stage_rows(result: RunResult, stages: Sequence | None = None) -> list[StageRow]:
    """One :class:`StageRow` per stage of ``result``, in pipeline order.

    Parameters
    ----------
    result : RunResult
    stages : sequence, optional
        The pipeline's stages (``pipeline.stages``), to find what whole-dataset stages
        recorded about their run (their drop reason).

    Examples
    --------
    >>> from curator_dask.observe.run_result import RunResult, StageMetrics
    >>> result = RunResult("p", "local", [
    ...     StageMetrics("read_jsonl", "read", rows_in=10, rows_out=10, busy_seconds=0.5),
    ...     StageMetrics("word_count", "process", rows_in=10, rows_out=7, busy_seconds=0.2),
    ...     StageMetrics("dedup", "barrier", rows_in=7, rows_out=6, busy_seconds=1.0),
    ... ], dropped={"word_count": 3})
    >>> for row in stage_rows(result):
    ...     print(row.stage, row.docs_in, row.docs_out, row.dropped)
    read_jsonl 10 10 {}
    word_count 10 7 {'word_count': 3}
    dedup 7 6 {'dedup': 1}
    """
    objects = _matched_stages(result, stages)
    rows = [StageRow(m.name, m.kind, m.rows_in, m.rows_out, m.busy_seconds)
            for m in result.stages]
    # A dedup stage's drops are its rows in less its rows out, whatever reached the
    # writer's counts (executors differ in whether its partitions carry them on).
    dedup_reasons = ({_dedup_reason(obj) for obj in objects} - {None}).union(
        *(_dedup_removed(obj) for obj in objects))
    reader = next((row for row in rows if row.kind == "read"), None)
    unattributed: dict[str, int] = {}
    for reason, count in result.dropped.items():
        if reason in dedup_reasons:
            continue
        owner = next((row for row in rows
                      if reason == row.stage or reason.startswith(row.stage + ".")), None)
        if owner is None and reader is not None and reason.startswith(_READER_PREFIX):
            owner = reader
        if owner is None:
            unattributed[reason] = count
            continue
        owner.dropped[reason] = owner.dropped.get(reason, 0) + count
    other_counters: dict[str, int] = {}
    for name, count in result.counters.items():
        owner = next((row for row in rows
                      if name == row.stage or name.startswith(row.stage + ".")), None)
        if owner is None:
            other_counters[name] = count
        else:
            owner.counters[name] = owner.counters.get(name, 0) + count
    for obj, row in zip(objects, rows, strict=True):
        if row.kind == "read":
            continue
        row.dropped.update(_dedup_removed(obj))
        rest = row.docs_in - row.docs_out - sum(row.dropped.values())
        if rest > 0:
            reason = _dedup_reason(obj) or row.stage
            row.dropped[reason] = row.dropped.get(reason, 0) + rest
    if unattributed or other_counters:
        logger.debug("drop reasons and counters not named after any stage: %s %s",
                     unattributed, other_counters)
        rows.append(StageRow("(other)", "other", 0, 0, 0.0, unattributed, other_counters))
    return rows


def _ranked(counts: dict[str, int]) -> list[str]:
    return [f"{name} = {count:,}" for name, count in
            sorted(counts.items(), key=lambda item: (-item[1], item[0]))] or ["-"]


def format_stage_table(rows: Sequence[StageRow]) -> str:
    """The rows as a text table: stage, docs in, docs out, dropped by reason, busy
    seconds (summed over the stage's tasks); and counters ("counted") when a stage
    recorded any.

    Examples
    --------
    >>> print(format_stage_table([StageRow("word_count", "process", 1000, 700, 0.25,
    ...                                    {"word_count": 300})]))
    stage         docs in    docs out  dropped             busy s (sum)
    ----------  ---------  ----------  ----------------  --------------
    word_count      1,000         700  word_count = 300            0.25
    >>> print(format_stage_table([StageRow("pii", "process", 10, 10, 0.5, {},
    ...                                    {"pii.EMAIL_ADDRESS": 4, "pii.URL": 2})]))
    stage      docs in    docs out  dropped    counted                  busy s (sum)
    -------  ---------  ----------  ---------  ---------------------  --------------
    pii             10          10  -          pii.EMAIL_ADDRESS = 4            0.50
                                               pii.URL = 2
    """
    from curator_dask.observe.tables import text_table

    with_counters = any(row.counters for row in rows)
    header = ("stage", "docs in", "docs out", "dropped", *(("counted",) if with_counters
                                                            else ()), BUSY_HEADER)
    lines = []
    for row in rows:
        columns = [_ranked(row.dropped), *([_ranked(row.counters)] if with_counters else [])]
        height = max(len(c) for c in columns)
        for i in range(height):
            cells = [c[i] if i < len(c) else "" for c in columns]
            if i == 0:
                lines.append((row.stage, f"{row.docs_in:,}", f"{row.docs_out:,}", *cells,
                              f"{row.seconds:.2f}"))
            else:
                lines.append(("", "", "", *cells, ""))
    return text_table(header, lines)


#: The seconds column: time in the stage's tasks summed over every worker (busy time,
#: not wall time; a whole-dataset stage's is its wall time).
BUSY_HEADER = "busy s (sum)"


def cluster_sizes(stages: Sequence, names: Sequence[str] | None = None
                  ) -> dict[str, dict[int, int]]:
    """Groups of each size found by the dedup stages among ``stages`` (by stage name).

    A dedup stage (:mod:`curator_dask.dedup.stages`) records them in ``last_run``
    when it runs; stages that have not run, or are not dedup stages, are left out.
    """
    out: dict[str, dict[int, int]] = {}
    for i, stage in enumerate(stages):
        sizes = getattr(getattr(stage, "last_run", None), "cluster_sizes", None)
        if sizes is not None:
            out[names[i] if names else stage.name] = dict(sizes)
    return out


def label_distributions(rows: Sequence[StageRow]) -> dict[str, dict[str, int]]:
    """The distributions the stages counted, by ``"<stage>.<column>"``: value -> documents.

    Examples
    --------
    >>> row = StageRow("quality", "process", 3, 3, 0.1, {},
    ...                {"quality.quality_pred=High": 2, "quality.quality_pred=Low": 1})
    >>> label_distributions([row])
    {'quality.quality_pred': {'High': 2, 'Low': 1}}
    """
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        for name, count in row.counters.items():
            parsed = distribution_value(name, row.stage)
            if parsed is not None:
                field, value = parsed
                out.setdefault(f"{row.stage}.{field}", {})[value] = count
    return out


# -- the HTML page ------------------------------------------------------------------------

def _table_html(rows: Sequence[StageRow]) -> str:
    with_counters = any(row.counters for row in rows)
    head = "".join(f"<th>{h}</th>" for h in ("stage", "docs in", "docs out",
                                              "dropped (by reason)",
                                              *(("counted",) if with_counters else ()),
                                              "busy seconds (summed over workers)"))

    def listed(counts: dict[str, int]) -> str:
        return "<br>".join(f"{html.escape(r)}: {n:,}" for r, n in
                           sorted(counts.items(), key=lambda i: -i[1])) or "-"

    body = []
    for row in rows:
        counted = f"<td>{listed(row.counters)}</td>" if with_counters else ""
        body.append(f"<tr><td>{html.escape(row.stage)}</td>"
                    f'<td class="number">{row.docs_in:,}</td>'
                    f'<td class="number">{row.docs_out:,}</td><td>{listed(row.dropped)}</td>'
                    f'{counted}<td class="number">{row.seconds:.2f}</td></tr>')
    style = ("<style>table.curation{border-collapse:collapse;font-family:sans-serif;"
             "font-size:13px;width:100%}table.curation td,table.curation th{border:1px solid "
             "#ccc;padding:4px 8px;text-align:left;vertical-align:top}"
             "table.curation td.number{text-align:right}</style>")
    return f'{style}<table class="curation"><tr>{head}</tr>{"".join(body)}</table>'


def _bar(title: str, labels: list[str], values: list[float], *, horizontal: bool,
         value_label: str, color: str):
    """A bar chart as wide as the page, under its title as a heading (a title drawn in
    the plot is cut where the chart is narrower than it)."""
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource, Div, HoverTool
    from bokeh.plotting import figure

    source = ColumnDataSource({"label": labels, "value": values})
    if horizontal:
        fig = figure(y_range=list(reversed(labels)), sizing_mode="stretch_width",
                     height=max(160, 28 * len(labels) + 70), toolbar_location=None)
        fig.hbar(y="label", right="value", height=0.7, source=source, color=color)
        fig.xaxis.axis_label = value_label
        fig.x_range.start = 0
    else:
        fig = figure(x_range=labels, sizing_mode="stretch_width", height=320,
                     toolbar_location=None)
        fig.vbar(x="label", top="value", width=0.7, source=source, color=color)
        fig.yaxis.axis_label = value_label
        fig.y_range.start = 0
        fig.xaxis.major_label_orientation = 0.8
    fig.add_tools(HoverTool(tooltips=[("", "@label"), (value_label, "@value{0,0.[00]}")]))
    return column(Div(text=f"<h3>{html.escape(title)}</h3>", sizing_mode="stretch_width"),
                  fig, sizing_mode="stretch_width")


def _lost_workers_html(result: RunResult) -> str:
    """A paragraph on the workers the run lost, or nothing."""
    lost = describe_lost_workers(result.lost_workers)
    return f"<p><b>{html.escape(lost)}.</b></p>" if lost else ""


def write_report(result: RunResult, path: str | os.PathLike, *, stages: Sequence | None = None,
                 title: str | None = None) -> str:
    """Write the curation report of ``result`` as one standalone HTML file.

    Parameters
    ----------
    result : RunResult
        What :meth:`Pipeline.run` returned (or ``pipeline.last_result``).
    path : str or path-like
        The HTML file to write (any fsspec URL); its directory is created. It must not
        be, contain or lie inside what the run read or wrote (its input, its output
        directory, or, in a ``curator-dask run``, any other output of the run): such a
        path is refused before anything is written, naming both paths. Written
        atomically.
    stages : sequence, optional
        The pipeline's stages (``pipeline.stages``): dedup stages among them add their
        duplicate cluster sizes to the report.
    title : str, optional
        Default: ``"curator-dask: <pipeline name>"``.

    Returns
    -------
    str
        The path written.
    """
    from bokeh.embed import file_html
    from bokeh.layouts import column
    from bokeh.models import Div
    from bokeh.resources import INLINE

    title = title or f"curator-dask: {result.pipeline}"
    rows = stage_rows(result, stages)
    metrics = [r for r in rows if r.kind != "other"]
    read = next((r.docs_out for r in metrics if r.kind == "read"), 0)
    summary = (f"<h1>{html.escape(title)}</h1><p>{read:,} documents read, "
               f"{result.rows:,} written to <code>{html.escape(str(result.output_path))}"
               f"</code> in {len(result.files):,} files; {result.executor} executor, "
               f"{result.wall_seconds:.1f} s wall time.</p>")
    summary += _lost_workers_html(result)
    parts = [Div(text=summary, sizing_mode="stretch_width"),
             Div(text=_table_html(rows), sizing_mode="stretch_width")]
    parts.append(_bar("Documents after each stage", [r.stage for r in metrics],
                      [r.docs_out for r in metrics], horizontal=False,
                      value_label="documents", color="#4c78a8"))
    reasons: dict[str, int] = {}
    for row in rows:
        for reason, count in row.dropped.items():
            reasons[reason] = reasons.get(reason, 0) + count
    if reasons:
        ordered = sorted(reasons.items(), key=lambda item: -item[1])
        parts.append(_bar("Documents dropped, by reason", [r for r, _ in ordered],
                          [n for _, n in ordered], horizontal=True, value_label="documents",
                          color="#e45756"))
    else:
        parts.append(Div(text="<p>No document was dropped.</p>"))
    distributions = label_distributions(rows)
    for label, counts in distributions.items():
        ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        parts.append(_bar(f"Label distribution: {label}", [v for v, _ in ordered],
                          [n for _, n in ordered], horizontal=True, value_label="documents",
                          color="#b279a2"))
    counted: dict[str, int] = {}
    for row in rows:
        for name, count in row.counters.items():
            if distribution_value(name, row.stage) is None:
                counted[name] = counted.get(name, 0) + count
    if counted:
        ordered = sorted(counted.items(), key=lambda item: -item[1])
        parts.append(_bar("Counted events (documents kept), by name", [n for n, _ in ordered],
                          [c for _, c in ordered], horizontal=True, value_label="count",
                          color="#54a24b"))
    matched = stages is not None and len(stages) == len(result.stages)
    sizes = cluster_sizes(stages if matched else [], [m.name for m in result.stages])
    for stage, counts in sizes.items():
        if counts:
            ordered_sizes = sorted(counts)
            parts.append(_bar(f"Duplicate cluster sizes: {stage} (groups of each size)",
                              [str(s) for s in ordered_sizes],
                              [counts[s] for s in ordered_sizes], horizontal=False,
                              value_label="groups", color="#72b7b2"))
        else:
            parts.append(Div(text=f"<p>{html.escape(stage)}: no duplicates found.</p>"))
    parts.append(_bar("Time per stage (seconds in its tasks, summed over workers)",
                      [r.stage for r in metrics], [round(r.seconds, 3) for r in metrics],
                      horizontal=True, value_label="seconds", color="#f58518"))
    page = file_html(column(*parts, sizing_mode="stretch_width"), resources=INLINE,
                     title=title)
    path = os.fspath(path)
    target = _report_path(result, path)
    atomic.make_dirs(target.fs, posixpath.dirname(target.path))
    atomic.write_bytes(target.fs, target.path, page.encode("utf-8"))
    logger.info("curation report written to %s", path)
    return path


def _report_path(result: RunResult, path: str):
    """``path`` checked as the run's report: by the run's guard when one is active (the
    CLI registers the report before the run), else against the run's input and output."""
    guard = OutputGuard.current()
    if guard is not None:
        return guard.claim(path, "report", kind="file")
    guard = OutputGuard(list(result.inputs))
    if result.output_path:
        guard.register(result.output_path, "output directory", lease=False)
    return guard.register(path, "report", kind="file")
