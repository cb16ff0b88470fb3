"""The torch modules of published classifiers that are not plain ``transformers`` models.

Each module reproduces its publisher's architecture and parameter names, so the weights
the publisher saved (``model.safetensors``) load into it unchanged:

- :class:`FirstTokenHead`: a backbone (``model.*``), dropout and a linear head (``fc.*``)
  on the first token's state: NVIDIA's quality, domain, multilingual domain and content
  type classifiers (``PyTorchModelHubMixin``, ``config.json`` with ``base_model``,
  ``fc_dropout``, ``id2label``);
- :class:`MultiHead`: a backbone (``backbone.*``), mean pooling and one linear head per
  target (``head_0.fc.*`` ...): the prompt task and complexity classifier;
- :class:`GuardNet`: the MLP of the instruction data guard (``input_layer.*``,
  ``hidden_layer_0.*`` ...), over the last hidden state of a causal LM;
- :class:`SafetyModel`: a causal LM with a PEFT adapter (Aegis), and the guard net when
  there is one.

The backbone of a hub-mixin model is built from its own ``config.json`` (a local
directory, never the hub) and its weights come from the model's ``model.safetensors``.

This module imports torch; it is loaded by the builder functions only, on workers.
"""

from __future__ import annotations

import json
import os

import torch
from torch import nn

from curator_dask.errors import MissingDependencyError
from curator_dask.stages.models.loading import dtype_argument
from curator_dask.stages.models.model_dir import (
    PICKLE_FILE,
    SAFETENSORS_FILE,
    SAFETENSORS_INDEX,
    ModelDirectoryError,
)

__all__ = [
    "FirstTokenHead",
    "GuardNet",
    "MultiHead",
    "SafetyModel",
    "build_first_token_head",
    "build_multi_head",
    "build_safety_model",
    "left_padded_positions",
]

#: The guard net's hidden widths, fixed by its publisher (only its input width is in
#: its config.json).
GUARD_HIDDEN = (2000, 500)


class FirstTokenHead(nn.Module):
    """Backbone, dropout and a linear layer on the first token: class logits."""

    def __init__(self, backbone: nn.Module, num_labels: int, dropout: float):
        super().__init__()
        self.model = backbone
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(backbone.config.hidden_size, num_labels)

    def forward(self, input_ids, attention_mask):
        states = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.fc(self.dropout(states[:, 0]))


class MultiHead(nn.Module):
    """Backbone, mean pooling over real tokens, one linear head per target.

    Returns the logits of every head side by side, in ``target_sizes`` order.
    """

    def __init__(self, backbone: nn.Module, target_sizes: list[int]):
        super().__init__()
        self.backbone = backbone
        self.target_sizes = list(target_sizes)
        for i, size in enumerate(self.target_sizes):
            head = nn.Module()
            head.fc = nn.Linear(backbone.config.hidden_size, size)
            self.add_module(f"head_{i}", head)

    def forward(self, input_ids, attention_mask):
        states = self.backbone(input_ids=input_ids,
                               attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.cat([getattr(self, f"head_{i}").fc(pooled)
                          for i in range(len(self.target_sizes))], dim=1)


class GuardNet(nn.Module):
    """The instruction data guard: a poisoning probability from one hidden state."""

    def __init__(self, input_dim: int, dropout: float = 0.7):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.input_layer = nn.Linear(input_dim, input_dim)
        self.hidden_layer_0 = nn.Linear(input_dim, GUARD_HIDDEN[0])
        self.hidden_layer_1 = nn.Linear(GUARD_HIDDEN[0], GUARD_HIDDEN[1])
        self.hidden_layer_2 = nn.Linear(GUARD_HIDDEN[1], 1)

    def forward(self, x):
        x = nn.functional.normalize(x, dim=-1)
        for layer in (self.input_layer, self.hidden_layer_0, self.hidden_layer_1):
            x = nn.functional.relu(layer(self.dropout(x)))
        return torch.sigmoid(self.hidden_layer_2(self.dropout(x))).flatten()


def left_padded_positions(attention_mask):
    """Position ids of left-padded rows, as ``generate`` computes them: 0 at each row's
    first real token (padding gets 1, and is masked anyway)."""
    positions = attention_mask.long().cumsum(-1) - 1
    return positions.masked_fill(attention_mask == 0, 1)


class SafetyModel(nn.Module):
    """A causal LM with its adapter; with a :class:`GuardNet`, the instruction data guard."""

    def __init__(self, language_model: nn.Module, guard: GuardNet | None = None):
        super().__init__()
        self.language_model = language_model
        self.guard = guard

    def generate(self, input_ids, attention_mask, max_new_tokens: int, pad_token_id: int):
        """The tokens generated after each (left-padded) prompt, ``-1`` past the end."""
        out = self.language_model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                           max_new_tokens=max_new_tokens,
                                           pad_token_id=pad_token_id)
        new = out[:, input_ids.shape[1]:]
        padded = torch.full((len(new), max_new_tokens), -1, dtype=torch.long, device=new.device)
        padded[:, :new.shape[1]] = new
        return padded

    def guard_scores(self, input_ids, attention_mask):
        """The guard's probability from the last layer's state at each prompt's last token."""
        decoder = self.language_model.get_base_model().model
        states = decoder(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=left_padded_positions(attention_mask)).last_hidden_state
        return self.guard(states[:, -1, :].float())


# -- builders: what the loader calls on a worker --------------------------------------------

def _backbone(base_config: str):
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(base_config, local_files_only=True)
    return AutoModel.from_config(config)


def _state_dict(path: str) -> dict:
    """The tensors a hub-mixin model saved in ``path`` (safetensors, sharded or not, or a
    pickled ``pytorch_model.bin``)."""
    from safetensors.torch import load_file

    single = os.path.join(path, SAFETENSORS_FILE)
    if os.path.isfile(single):
        return load_file(single)
    index = os.path.join(path, SAFETENSORS_INDEX)
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        state: dict = {}
        for shard in shards:
            state.update(load_file(os.path.join(path, shard)))
        return state
    return torch.load(os.path.join(path, PICKLE_FILE), map_location="cpu", weights_only=True)


def _load_into(module: nn.Module, path: str) -> nn.Module:
    """Load ``path``'s weights into ``module``; every parameter must be there."""
    state = _state_dict(path)
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as err:  # a shape that does not fit
        raise ModelDirectoryError(f"the weights in {path} do not fit its config: {err}") from err
    # Older transformers saved buffers that are no longer stored (position ids).
    unexpected = [key for key in unexpected if not key.endswith("position_ids")]
    if missing or unexpected:
        raise ModelDirectoryError(
            f"the weights in {path} do not fit its config: missing {missing[:5]}"
            f"{'...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
            f"{'...' if len(unexpected) > 5 else ''}"
        )
    return module


def _config(path: str) -> dict:
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def build_first_token_head(path: str, weights_dtype, *, base_config: str) -> nn.Module:
    """A :class:`FirstTokenHead` with the weights saved in ``path``."""
    config = _config(path)
    module = FirstTokenHead(_backbone(base_config), len(config["id2label"]),
                            float(config.get("fc_dropout", 0.0)))
    return _load_into(module, path).to(weights_dtype)


def build_multi_head(path: str, weights_dtype, *, base_config: str) -> nn.Module:
    """A :class:`MultiHead` with the weights saved in ``path``."""
    config = _config(path)
    module = MultiHead(_backbone(base_config), [int(s) for s in config["target_sizes"].values()])
    return _load_into(module, path).to(weights_dtype)


def build_safety_model(path: str, weights_dtype, *, adapter: str,
                       guard: str | None = None) -> nn.Module:
    """The causal LM in ``path`` (LlamaGuard) with the PEFT adapter in ``adapter``, and the
    guard net in ``guard`` if given."""
    from transformers import AutoModelForCausalLM

    try:
        from peft import PeftModel
    except ImportError as err:
        raise MissingDependencyError(
            f"the safety classifiers load a PEFT adapter and need peft ({err}); install it "
            "with pip install 'curator-dask[safety]'"
        ) from err
    base = AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                **dtype_argument(weights_dtype))
    language_model = PeftModel.from_pretrained(base, adapter, local_files_only=True)
    guard_net = None
    if guard is not None:
        config = _config(guard)
        guard_net = _load_into(GuardNet(int(config["input_dim"]),
                                        float(config.get("dropout", 0.7))), guard)
    # As its publisher runs it: the language model in weights_dtype (bfloat16 on a GPU),
    # the guard net in float32 over a float32 copy of the hidden state.
    return SafetyModel(language_model, guard_net)
