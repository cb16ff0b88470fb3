"""Aegis and the instruction data guard on a tiny LlamaGuard with a random LoRA adapter
(``curator_dask.testing.published_models``): the loading and the heads, compared with
``peft`` generation run one document at a time as NeMo Curator runs it."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from curator_dask.stages.models import (  # noqa: E402
    AegisClassifier,
    InstructionDataGuardClassifier,
    ModelDirectoryError,
)
from curator_dask.stages.models.safety import aegis_prompt, parse_verdicts  # noqa: E402
from curator_dask.testing.published_models import (  # noqa: E402
    publisher_module,
    save_aegis_adapter,
    save_instruction_data_guard,
    save_llama_guard,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TEXTS = ["how do I bake bread", "write a story about the river and the city market " * 3,
         "", "what is the capital of france", "summarize this passage: the cat sat"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = save_llama_guard(tmp_path_factory.mktemp("llama-guard"), seed=1)
    adapter = save_aegis_adapter(tmp_path_factory.mktemp("aegis"), base, seed=2)
    guard = save_instruction_data_guard(tmp_path_factory.mktemp("guard"), 32, seed=3)
    return base, adapter, guard


def reference_model(base, adapter):
    model = transformers.AutoModelForCausalLM.from_pretrained(base)
    return peft.PeftModel.from_pretrained(model, adapter).eval()


def frame(texts) -> pd.DataFrame:
    return pd.DataFrame({"text": pd.Series(texts, dtype="str")})


@pytest.mark.slow
def test_aegis_generates_what_the_adapted_model_generates(models):
    base, adapter, _ = models
    stage = AegisClassifier(adapter, base_model_path=base, device="cpu", keep_raw_pred=True,
                            max_new_tokens=6, max_length=512, model_inference_batch_size=2)
    out = stage.process(frame(TEXTS))
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    model = reference_model(base, adapter)
    expected = []
    with torch.no_grad():
        for text in TEXTS:
            enc = tokenizer(aegis_prompt(text), truncation=True, max_length=512,
                            return_tensors="pt")
            generated = model.generate(**enc, max_new_tokens=6, pad_token_id=0)
            expected.append(tokenizer.decode(generated[0, enc["input_ids"].shape[1]:],
                                             skip_special_tokens=True))
    assert out["_aegis_raw_pred"].tolist() == expected
    assert out["aegis_pred"].tolist() == parse_verdicts(pd.Series(expected)).tolist()


def test_aegis_verdicts_parse_as_nemo_curator_parses_them():
    answers = pd.Series(["safe", " safe\nmore", "unsafe\nO13", "unsafe\n O7 ", "unsafe",
                         "unsafe\nO14", "unsafe\nO1, O2", "", "Safe"])
    assert parse_verdicts(answers).tolist() == ["safe", "safe", "O13", "O7", "unknown",
                                                "unknown", "unknown", "unknown", "unknown"]


@pytest.mark.slow
def test_the_guard_scores_the_last_state_nemo_curator_reads(models):
    base, adapter, guard = models
    stage = InstructionDataGuardClassifier(guard, adapter_path=adapter, base_model_path=base,
                                           device="cpu", model_inference_batch_size=3)
    out = stage.process(frame(TEXTS))
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    model = reference_model(base, adapter)
    net = publisher_module("guard").from_pretrained(guard).eval()
    expected = []
    with torch.no_grad():
        for text in TEXTS:
            enc = tokenizer(text, truncation=True, max_length=4096, return_tensors="pt")
            response = model.generate(**enc, max_new_tokens=1, pad_token_id=0,
                                      output_hidden_states=True, return_dict_in_generate=True)
            state = response.hidden_states[0][-1][:, -1, :].float()
            expected.append(float(net(state).flatten()[0]))
    np.testing.assert_allclose(out["instruction_data_guard_poisoning_score"], expected,
                               rtol=1e-4, atol=1e-5)
    assert out["is_poisoned"].tolist() == [score >= 0.5 for score in expected]


def test_safety_models_need_their_base_model_and_adapter(models, tmp_path):
    base, adapter, guard = models
    with pytest.raises(ModelDirectoryError, match=r"meta-llama/LlamaGuard-7b.*base_model_path"):
        AegisClassifier(adapter, cache_dir=tmp_path / "hub")
    with pytest.raises(ModelDirectoryError, match=r"adapter_config.json.*hf download nvidia/"
                                                  r"Aegis-AI-Content-Safety-LlamaGuard-"
                                                  r"Permissive-1.0"):
        AegisClassifier(guard, base_model_path=base,
                        aegis_variant="nvidia/Aegis-AI-Content-Safety-LlamaGuard-Permissive-1.0")
    with pytest.raises(ModelDirectoryError, match=r"hf download nvidia/instruction-data-guard"):
        InstructionDataGuardClassifier(adapter_path=adapter, base_model_path=base,
                                       cache_dir=tmp_path / "hub")
