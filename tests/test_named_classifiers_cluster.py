"""Named classifiers in a pipeline on a real 2-process CPU cluster: NeMo Curator's
columns in the output, filtered documents counted, label distributions in the result."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import write_jsonl

from curator_dask.executors import StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter
from curator_dask.stages.models import FineWebEduClassifier, QualityClassifier
from curator_dask.testing.published_models import (
    deberta_v3_config,
    save_backbone_config,
    save_fineweb_classifier,
    save_hub_mixin_classifier,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.mark.slow
def test_named_classifiers_run_on_cpu_workers(client, tmp_path):
    base = save_backbone_config(tmp_path / "base", deberta_v3_config())
    quality_dir = save_hub_mixin_classifier(tmp_path / "quality", base, ["High", "Medium", "Low"],
                                            seed=1)
    fineweb_dir = save_fineweb_classifier(tmp_path / "fineweb", seed=2)
    rng = np.random.default_rng(0)
    words = "the cat sat on a mat and the dog ran to the river market news 7 !".split()
    rows = [{"text": " ".join(rng.choice(words, size=int(k))), "n": i}
            for i, k in enumerate(rng.integers(1, 40, size=60))]
    for part in range(4):
        write_jsonl(tmp_path / "in" / f"part{part}.jsonl", rows[part::4])

    def stages():
        return [QualityClassifier(quality_dir, base_model_path=base, filter_by=["High", "Low"],
                                  prob_column=None),
                FineWebEduClassifier(fineweb_dir, quality_label_column="edu_label")]

    pipeline = Pipeline("classify").add_stage(JsonlReader(str(tmp_path / "in"),
                                                          files_per_partition=1))
    for stage in stages():
        pipeline.add_stage(stage)
    pipeline.add_stage(ParquetWriter(str(tmp_path / "out")))
    result = pipeline.run(StreamingExecutor(max_in_flight=2, progress=False))

    local = pd.DataFrame({"text": pd.Series([r["text"] for r in rows], dtype="str"),
                          "n": range(len(rows))})
    for stage in stages():
        local = stage.with_(name=stage.name).process(local)
    out = pd.concat(pd.read_parquet(p) for p in sorted((tmp_path / "out").glob("*.parquet")))
    out = out.sort_values("n")
    assert out["n"].tolist() == local["n"].tolist()
    assert out["quality_pred"].tolist() == local["quality_pred"].tolist()
    assert out["fineweb-edu-score-int"].tolist() == local["fineweb-edu-score-int"].tolist()
    assert out["edu_label"].tolist() == local["edu_label"].tolist()
    dropped_medium = len(rows) - len(local)
    assert result.dropped == ({"quality_classifier.Medium": dropped_medium}
                              if dropped_medium else {})
    labels = {name: count for name, count in result.counters.items()
              if name.startswith("quality_classifier.quality_pred=")}
    assert sum(labels.values()) == len(rows)
    assert labels.get("quality_classifier.quality_pred=Medium", 0) == dropped_medium
