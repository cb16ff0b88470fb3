"""``curator-dask demo``: curate the bundled sample on an embedded local Dask cluster."""

from __future__ import annotations

import gzip
import time
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from curator_dask import AddId, DocumentDataset, processing_stage
from curator_dask.cluster import dashboard_link, get_client

SAMPLE = "python-docs-sample.jsonl.gz"
SHARDS = 4


@dataclass
class StageSummary:
    stage: str
    docs_in: int
    docs_out: int
    seconds: float
    dropped: dict


@processing_stage(name="normalize_whitespace", output_columns={"word_count": "int64"})
def normalize_whitespace(df):
    """Collapse runs of spaces and tabs, trim each document, and count its words."""
    text = df["text"].str.replace(r"[ \t]+", " ", regex=True).str.strip()
    return df.assign(text=text, word_count=text.str.count(r"\S+").astype("int64"))


def unpack_sample(directory: Path) -> Path:
    """Write the bundled sample as a few uncompressed JSONL shards, to show partitioning."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = gzip.decompress(files("curator_dask.data").joinpath(SAMPLE).read_bytes()).splitlines(
        keepends=True)
    per_shard = -(-len(lines) // SHARDS)
    for shard in range(SHARDS):
        chunk = lines[shard * per_shard: (shard + 1) * per_shard]
        (directory / f"shard-{shard:02d}.jsonl").write_bytes(b"".join(chunk))
    return directory


def run_demo(output: str | Path, n_workers: int = 2, blocksize: str = "128KiB",
             echo=print) -> list[StageSummary]:
    """Read, assign ids, normalise, write Parquet; returns a summary per stage."""
    output = Path(output)
    input_dir = unpack_sample(output / "input")
    summaries: list[StageSummary] = []
    with get_client(n_workers=n_workers, threads_per_worker=1) as client:
        link = dashboard_link(client)
        if link:
            echo(f"Dask dashboard: {link}")
        started = time.perf_counter()
        ds = DocumentDataset.read_jsonl(str(input_dir), blocksize=blocksize).persist()
        n_in = len(ds.df)
        summaries.append(StageSummary(f"read_jsonl ({ds.npartitions} partitions)", n_in, n_in,
                                      time.perf_counter() - started, ds.dropped_counts()))
        for stage in (AddId("id"), normalize_whitespace):
            started = time.perf_counter()
            before = len(ds.df)
            ds = stage(ds).persist()
            after = len(ds.df)
            summaries.append(StageSummary(stage.stage_name, before, after,
                                          time.perf_counter() - started, {}))
        started = time.perf_counter()
        result = ds.to_parquet(str(output / "curated"), mode="overwrite")
        summaries.append(StageSummary(f"to_parquet ({len(result.files)} files)", len(ds.df),
                                      result.rows, time.perf_counter() - started,
                                      result.dropped))
    return summaries


def format_summary(summaries: list[StageSummary]) -> str:
    header = ("stage", "docs in", "docs out", "dropped", "seconds")
    rows = [
        (s.stage, f"{s.docs_in:,}", f"{s.docs_out:,}",
         ", ".join(f"{k}={v}" for k, v in s.dropped.items()) or "0", f"{s.seconds:.2f}")
        for s in summaries
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)
