"""``get_client(cluster_type="gpu" / "mixed")`` on a real NVIDIA GPU with dask-cuda.

A mixed cluster runs a pipeline's CPU stages on CPU workers and its model stage on the
GPU worker; a GPU cluster runs semantic dedup with torch on CUDA and keeps the documents
the numpy path keeps. Skipped without a CUDA GPU or without dask-cuda. Run on a GPU
machine with ``python -m pytest tests/test_gpu_cluster.py -m gpu``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from curator_dask import get_client  # noqa: E402
from curator_dask.dedup import SemanticDeduplicationWorkflow  # noqa: E402
from curator_dask.dedup.semantic.duplicates import vector_series  # noqa: E402
from curator_dask.executors import StreamingExecutor  # noqa: E402
from curator_dask.pipeline import Pipeline  # noqa: E402
from curator_dask.stages.filters import ScoreFilter, WordCountFilter  # noqa: E402
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter  # noqa: E402
from curator_dask.stages.models import LOAD_LOG_ENV, ClassifierStage  # noqa: E402
from curator_dask.testing.models import save_tiny_classifier  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(importlib.util.find_spec("dask_cuda") is None,
                       reason="needs dask-cuda (pip install 'curator-dask[gpu]')"),
]

WORDS = "the cat sat on a mat while the dog ran to the river and the city market".split()


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(k))) for k in rng.integers(1, 80, n)]


def test_a_mixed_cluster_runs_the_filter_on_cpu_workers_and_the_model_on_the_gpu(
        tmp_path, monkeypatch):
    texts = _texts(600, seed=7)
    frame = pd.DataFrame({"text": texts, "n": np.arange(len(texts))})
    (tmp_path / "in").mkdir()
    for part in range(4):
        frame[part::4].to_json(tmp_path / "in" / f"p{part}.jsonl", orient="records", lines=True)
    model = save_tiny_classifier(tmp_path / "model", ["Low", "Medium", "High"], seed=3)
    loads = tmp_path / "loads"
    monkeypatch.setenv(LOAD_LOG_ENV, str(loads))  # worker processes inherit it

    with get_client(cluster_type="mixed", n_workers=2, dashboard_address=None) as client:
        resources = {w["name"]: w["resources"]
                     for w in client.scheduler_info()["workers"].values()}
        result = (Pipeline("mixed")
                  .add_stage(JsonlReader(str(tmp_path / "in"), files_per_partition=1))
                  .add_stage(ScoreFilter(WordCountFilter(min_words=5), text_field="text"))
                  .add_stage(ClassifierStage(model, prob_column="p"))
                  .add_stage(ParquetWriter(str(tmp_path / "out")))
                  .run(StreamingExecutor(progress=False)))

    gpu_workers = [r for r in resources.values() if r.get("GPU")]
    cpu_workers = [r for r in resources.values() if r.get("CPU")]
    assert len(gpu_workers) == torch.cuda.device_count() and len(cpu_workers) == 2
    assert all(r["GPU_MEMORY_GB"] > 0 for r in gpu_workers)
    kept = frame[frame["text"].str.split().str.len() >= 5]
    assert result.rows == len(kept)
    out = pd.read_parquet(tmp_path / "out").sort_values("n", ignore_index=True)
    assert out["n"].tolist() == kept["n"].tolist()
    # Every load of the model was on the GPU worker's device (its tokenizer, which
    # the stage loads beside it, is logged as on the CPU).
    records = [json.loads(p.read_text()) for p in loads.iterdir()]
    models = [r["device"] for r in records if r["kind"] != "tokenizer"]
    assert models and set(models) == {"cuda"}
    monkeypatch.delenv(LOAD_LOG_ENV)  # the reference below loads the model here, on the CPU
    on_cpu = ClassifierStage(model, prob_column="p", device="cpu").process(
        kept.reset_index(drop=True))
    assert (out["label"].to_numpy() == on_cpu["label"].to_numpy()).mean() > 0.99


def _embeddings(n_topics=20, per_topic=60, dim=32, duplicates=40, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(n_topics, dim))
    vectors = np.concatenate([t + 0.6 * rng.normal(size=(per_topic, dim)) for t in topics])
    sources = rng.choice(len(vectors), duplicates, replace=False)
    vectors = np.concatenate([vectors, vectors[sources] + 0.01 * rng.normal(
        size=(duplicates, dim))]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    frame = pd.DataFrame({"id": np.arange(len(vectors), dtype=np.int64),
                          "text": [f"doc {i}" for i in range(len(vectors))]})
    frame["embeddings"] = vector_series(vectors, frame.index)
    return frame


def _kept_ids(raw: Path, work: Path, device: str) -> set[int]:
    result = SemanticDeduplicationWorkflow(
        str(raw), str(work / "cache"), str(work / "out"), input_filetype="parquet",
        n_clusters=8, perform_removal=True, eps_thresholds=[0.01], eps_to_extract=0.01,
        device=device).run()
    assert result.kept_documents + result.duplicate_documents == result.input_documents
    return set(pd.read_parquet(work / "out")["id"])


def test_semantic_dedup_on_a_gpu_cluster_keeps_what_the_numpy_path_keeps(tmp_path):
    frame = _embeddings()
    raw = tmp_path / "raw"
    raw.mkdir()
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for i, rows in enumerate(np.array_split(np.arange(len(frame)), 4)):
        pq.write_table(table.take(rows), raw / f"part-{i}.parquet")

    with get_client(cluster_type="gpu", dashboard_address=None) as client:
        on_gpu = _kept_ids(raw, tmp_path / "gpu", "cuda")
        workers = client.scheduler_info()["workers"].values()
        assert all(w["resources"].get("GPU") == 1 for w in workers)
    with get_client(n_workers=2, dashboard_address=None):
        on_cpu = _kept_ids(raw, tmp_path / "cpu", "cpu")

    assert on_gpu == on_cpu
    assert len(frame) - len(on_gpu) >= 40  # every planted copy found (and its original kept)
    assert os.path.isdir(tmp_path / "gpu" / "cache")
