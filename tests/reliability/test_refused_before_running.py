"""A run the cluster cannot serve is refused before anything runs: no task starts, no
output directory is made, and the input is left as it was.
"""

from __future__ import annotations

import os

import pytest

from curator_dask import Resources, processing_stage
from curator_dask.executors import BatchExecutor, ResourceUnavailableError, StreamingExecutor
from curator_dask.pipeline import Pipeline
from curator_dask.stages.io_stages import JsonlReader, ParquetWriter


@pytest.mark.parametrize("executor", [StreamingExecutor, BatchExecutor])
def test_a_gpu_stage_on_a_cpu_only_cluster_is_refused_before_anything_runs(corpus, tmp_path,
                                                                           client, executor):
    ran = tmp_path / "ran"
    ran.mkdir()

    @processing_stage(name="classify", resources=Resources(gpus=0.5),
                      output_columns={"label": "str"})
    def classify(df):
        (ran / str(os.getpid())).touch()
        return df.assign(label="x")

    out = tmp_path / "out"
    p = (Pipeline("gpu").add_stage(JsonlReader(str(corpus.path), blocksize="1KiB"))
         .add_stage(classify).add_stage(ParquetWriter(str(out))))
    with pytest.raises(ResourceUnavailableError) as err:
        p.run(executor(progress=False))
    message = str(err.value)
    # The stage, what it asks for, what the workers offer, and the two ways out.
    assert "stage 'classify' asks for GPU=0.5 per task" in message
    assert "workers offer: CPU=1" in message
    assert "get_client(cluster_type='gpu' or 'mixed')" in message
    assert "cpu_fallback=True" in message
    assert not out.exists()
    assert os.listdir(ran) == []
    corpus.assert_unchanged()
