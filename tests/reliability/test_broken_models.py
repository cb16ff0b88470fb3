"""A broken model directory is reported naming the directory and what is wrong with it:
on the client when the stage is made, before any document is read, or, for weights that
do not fit their config, when a worker loads them. The directory itself is never
modified.

Models are tiny random BERTs saved to temporary directories
(``curator_dask.testing.models``); each case copies one and breaks the copy.
"""

from __future__ import annotations

import json
import os
import shutil

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from curator_dask.stages.models import (
    ClassifierStage,
    EmbeddingStage,
    ModelDirectoryError,
)
from curator_dask.testing.models import save_tiny_classifier
from reliability.conftest import snapshot_bytes

LABELS = ["Low", "Medium", "High"]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    return save_tiny_classifier(tmp_path_factory.mktemp("classifier"), LABELS, seed=3)


@pytest.fixture
def model_copy(tmp_path, classifier_dir):
    """A copy of the tiny classifier to break."""
    return shutil.copytree(classifier_dir, tmp_path / "model")


def test_a_missing_directory_fails_at_construction_naming_the_path(tmp_path):
    missing = tmp_path / "models" / "qualty-deberta"
    with pytest.raises(ModelDirectoryError, match=r"qualty-deberta.*does not exist"):
        ClassifierStage(missing)
    assert not (tmp_path / "models").exists()


def test_a_directory_without_config_weights_or_tokenizer_lists_each_problem(tmp_path):
    (tmp_path / "README.md").write_text("not a model")
    before = snapshot_bytes(tmp_path)
    with pytest.raises(ModelDirectoryError) as err:
        ClassifierStage(tmp_path)
    message = str(err.value)
    assert str(tmp_path) in message
    for missing in ("no config.json", "no model weights", "no tokenizer files", "README.md"):
        assert missing in message
    assert snapshot_bytes(tmp_path) == before


def test_a_model_saved_without_its_tokenizer_is_reported(model_copy):
    for name in os.listdir(model_copy):
        if name.startswith("tokenizer"):
            os.remove(model_copy / name)
    before = snapshot_bytes(model_copy)
    with pytest.raises(ModelDirectoryError, match=r"no tokenizer files.*tokenizer.save_pretrained"):
        ClassifierStage(model_copy)
    # A stage that reads token ids made upstream needs no tokenizer.
    assert ClassifierStage(model_copy, pretokenized=True).labels == LABELS
    assert snapshot_bytes(model_copy) == before


def test_a_truncated_weights_file_is_reported(model_copy):
    weights = model_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    before = snapshot_bytes(model_copy)
    with pytest.raises(ModelDirectoryError, match=r"model.safetensors is truncated"):
        EmbeddingStage(model_copy)
    assert snapshot_bytes(model_copy) == before


def test_an_invalid_config_is_reported(model_copy):
    (model_copy / "config.json").write_text("{not json")
    before = snapshot_bytes(model_copy)
    with pytest.raises(ModelDirectoryError, match=r"config.json is not valid JSON"):
        ClassifierStage(model_copy)
    assert snapshot_bytes(model_copy) == before


def _misfit(model_copy) -> None:
    config = json.loads((model_copy / "config.json").read_text())
    config["hidden_size"] = 64  # the saved weights are 32 wide
    (model_copy / "config.json").write_text(json.dumps(config))


def test_weights_that_do_not_fit_the_config_fail_on_load_naming_the_path(model_copy):
    _misfit(model_copy)
    before = snapshot_bytes(model_copy)
    stage = ClassifierStage(model_copy, device="cpu")
    frame = pd.DataFrame({"text": pd.Series(["a cat"], dtype="str")})
    with pytest.raises(ModelDirectoryError, match=rf"could not load.*{model_copy.name}"):
        stage.process(frame)
    assert snapshot_bytes(model_copy) == before
