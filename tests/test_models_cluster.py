"""Model stages on a real multi-process Dask cluster (2 CPU worker processes).

Counts model loads per worker process with the loader's debug log
(``CURATOR_DASK_MODEL_LOAD_LOG``): one file per real ``from_pretrained``.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import write_jsonl

from curator_dask.executors import StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
from curator_dask.stages.models import (
    LOAD_LOG_ENV,
    ClassifierStage,
    TokenizerStage,
    loaded,
)
from curator_dask.testing.models import save_tiny_classifier

LABELS = ["Low", "Medium", "High"]


def _set_env(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@pytest.mark.slow
def test_each_worker_process_loads_a_shared_model_once(client, tmp_path, caplog):
    model_dir = save_tiny_classifier(tmp_path / "model", LABELS, seed=3)
    rng = np.random.default_rng(0)
    words = "the cat sat on a mat and the dog ran to the river market news".split()
    rows = [{"text": " ".join(rng.choice(words, size=int(k))), "n": i}
            for i, k in enumerate(rng.integers(1, 60, size=120))]
    for part in range(8):
        write_jsonl(tmp_path / "in" / f"part{part}.jsonl", rows[part::8])
    log_dir = str(tmp_path / "loads")
    client.run(_set_env, LOAD_LOG_ENV, log_dir)
    try:
        pipeline = (Pipeline("models")
                    .add_stage(JsonlReader(str(tmp_path / "in"), files_per_partition=1))
                    .add_stage(TokenizerStage(model_dir))
                    # Asks for a GPU: no worker has one, so cpu_fallback puts it on CPU.
                    .add_stage(ClassifierStage(model_dir, pretokenized=True, name="quality",
                                               device="cpu",
                                               filter_by=["Medium", "High"]))
                    .add_stage(ClassifierStage(model_dir, name="again", device="cpu",
                                               pred_column="label_again", prob_column="p"))
                    .add_stage(ParquetWriter(str(tmp_path / "out"))))
        with caplog.at_level(logging.WARNING, logger="curator_dask"):
            result = pipeline.run(StreamingExecutor(max_in_flight=4, progress=False))
    finally:
        client.run(_set_env, LOAD_LOG_ENV, None)

    loads = [json.loads(Path(log_dir, f).read_text()) for f in os.listdir(log_dir)]
    per_process = Counter((record["pid"], record["kind"]) for record in loads)
    worker_pids = set(client.run(os.getpid).values())
    assert {pid for pid, _ in per_process} <= worker_pids
    # Three stages on one directory, 8 partitions: each process loaded the model and the
    # tokenizer at most once.
    assert set(per_process.values()) == {1}
    assert {kind for _, kind in per_process} == {"sequence-classification", "tokenizer"}
    # The executor tore the stages down: no worker holds the model any more.
    for held in client.run(loaded).values():
        assert not any(model_dir in key for key in held)
    assert "running it on CPU (cpu_fallback=True)" in caplog.text

    # Part by part: a part that filter_by emptied has a null-typed "p" column (an empty
    # object column), which pyarrow cannot unify with the other parts' list<float>.
    parts = sorted((tmp_path / "out").glob("part-*.parquet"))
    out = pd.concat([pd.read_parquet(part) for part in parts]).sort_values("n")
    texts = [row["text"] for row in rows]
    local = ClassifierStage(model_dir, device="cpu").process(
        pd.DataFrame({"text": pd.Series(texts, dtype="str"), "n": range(len(rows))}))
    kept = local[local["label"].isin(["Medium", "High"])]
    assert out["n"].tolist() == kept["n"].tolist()
    assert out["label"].tolist() == kept["label"].tolist() == out["label_again"].tolist()
    assert result.dropped == {"quality.Low": int((local["label"] == "Low").sum())}
    assert "input_ids" not in out.columns
