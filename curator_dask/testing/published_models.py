"""Tiny random copies of published classifiers, in their publishers' file layouts.

The named classifiers load models as their publishers ship them; no hub is reachable
where curator-dask is tested, so these helpers build each architecture from its config
at tiny sizes, with random weights, and save it the way its publisher did:

- NVIDIA's DeBERTa classifiers and the prompt task/complexity classifier: a module
  written as on their model cards (``nn.Module`` + ``PyTorchModelHubMixin``) saved with
  ``save_pretrained`` (``config.json`` with ``base_model``, ``model.safetensors``), with
  a DeBERTa-v3 SentencePiece tokenizer (``spm.model``); the backbone's ``config.json``
  alone in its own directory (:func:`save_backbone_config`);
- the FineWeb-Edu family: a BERT sequence classifier with one regression output;
- LlamaGuard: a Llama causal LM and SentencePiece tokenizer (``tokenizer.model``); Aegis:
  a PEFT LoRA adapter on it; the instruction data guard: its MLP, hub-mixin saved.

:func:`publisher_module` gives the publisher-style module classes, which tests use as the
independent reference forward pass (they never touch curator-dask's loading code).
Needs torch, transformers, sentencepiece (and peft for the adapter).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence

from fsspec.implementations.local import LocalFileSystem

from curator_dask.errors import InvalidArgumentError
from curator_dask.io import atomic
from curator_dask.io.atomic import staged_files

__all__ = [
    "DOMAIN_LABELS_SAMPLE",
    "PROMPT_TARGETS",
    "deberta_v3_config",
    "publisher_module",
    "save_aegis_adapter",
    "save_backbone_config",
    "save_deberta_tokenizer",
    "save_fineweb_classifier",
    "save_hub_mixin_classifier",
    "save_instruction_data_guard",
    "save_llama_guard",
    "save_prompt_complexity_classifier",
]

#: Some of the domain classifier's labels (the tests' models need not have all 26).
DOMAIN_LABELS_SAMPLE = ("Finance", "Health", "Sports", "Science", "Travel_and_Transportation")

#: The prompt classifier's heads, as its config.json lists them: (target, classes,
#: weights of the classes, divisor).
PROMPT_TARGETS = (
    ("task_type", 11, None, None),
    ("creativity_scope", 3, [0.0, 1.0, 2.0], 2),
    ("reasoning", 2, [0.0, 1.0], 1),
    ("contextual_knowledge", 2, [0.0, 1.0], 1),
    ("number_of_few_shots", 6, [0, 1, 2, 3, 4, 5], 5),
    ("domain_knowledge", 4, [0.0, 1.0, 2.0, 3.0], 3),
    ("no_label_reason", 1, [0.0], 1),
    ("constraint_ct", 2, [0.0, 1.0], 1),
)
TASK_TYPES = ("Brainstorming", "Chatbot", "Classification", "Closed QA", "Code Generation",
              "Extraction", "Open QA", "Other", "Rewrite", "Summarization", "Text Generation")

_CORPUS = ("the cat sat on a mat while the dog ran to the river and the city market was busy "
           "with news of sport science and weather quality good bad great poor text document "
           "model data money game team mountain instruction input response write a story "
           "about summarize this passage what is the capital of france explain how to bake "
           "bread 0 1 2 3 4 5 6 7 8 9 , . ! ? ; : ' \" ( ) - el gato y el perro la ciudad")


def deberta_v3_config(*, hidden_size: int = 32, layers: int = 2, heads: int = 2,
                      vocab_size: int = 128, intermediate_size: int | None = None,
                      initializer_range: float = 1.0):
    """A DeBERTa-v3 configuration (relative attention as in ``microsoft/deberta-v3-base``)
    at the given size.

    The defaults are tiny, with large random weights so that predictions differ between
    documents; ``hidden_size=768, layers=12, heads=12, vocab_size=128100,
    initializer_range=0.02`` is ``microsoft/deberta-v3-base`` (``vocab_size=251000``:
    ``microsoft/mdeberta-v3-base``).
    """
    from transformers import DebertaV2Config

    return DebertaV2Config(initializer_range=initializer_range,
        vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=layers,
        num_attention_heads=heads, intermediate_size=intermediate_size or 4 * hidden_size,
        hidden_act="gelu", max_position_embeddings=512, type_vocab_size=0,
        relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm",
        share_att_key=True, pos_att_type=["p2c", "c2p"], layer_norm_eps=1e-7,
        max_relative_positions=-1, position_biased_input=False, pad_token_id=0)


def save_backbone_config(path, config) -> str:
    """Save only a backbone's ``config.json`` (what ``base_model_path`` needs)."""
    with staged_files(path) as draft:
        config.save_pretrained(draft)
    return os.fspath(path)


def _train_sentencepiece(model_type: str, **special) -> bytes:
    import sentencepiece as spm

    sentences = [_CORPUS] + [" ".join(_CORPUS.split()[i::7]) for i in range(7)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences * 20), model_writer=model, vocab_size=200,
        hard_vocab_limit=False, model_type=model_type, character_coverage=1.0,
        minloglevel=2, **special)
    return model.getvalue()


def save_deberta_tokenizer(path, model_max_length: int = 512) -> str:
    """A DeBERTa-v3 style SentencePiece tokenizer (``spm.model``, ``tokenizer_config.json``,
    ``special_tokens_map.json``): ids 0-3 are [PAD], [CLS], [SEP], [UNK] as in DeBERTa-v3."""
    _write_bytes(os.path.join(path, "spm.model"), _train_sentencepiece(
        "unigram", pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]",
        bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]", user_defined_symbols=["[MASK]"]))
    special = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "[UNK]",
               "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
               "mask_token": "[MASK]"}
    _write_json(os.path.join(path, "special_tokens_map.json"), special)
    _write_json(os.path.join(path, "tokenizer_config.json"),
                {"tokenizer_class": "DebertaV2Tokenizer", "do_lower_case": False,
                 "model_max_length": model_max_length, **special})
    return os.fspath(path)


def _write_bytes(path: str, data: bytes) -> None:
    fs = LocalFileSystem()
    atomic.make_dirs(fs, os.path.dirname(path))
    atomic.write_bytes(fs, path, data)


def _write_json(path: str, value) -> None:
    """Keys in the order given: a published config lists its heads in head order."""
    _write_bytes(path, json.dumps(value, indent=2).encode("utf-8"))


def publisher_module(kind: str, base_config_dir: str | None = None):
    """The module class a publisher saved, written as on its model card.

    ``kind``: ``"first-token"`` (NVIDIA's DeBERTa classifiers: ``model``, ``dropout``,
    ``fc``), ``"multi-head"`` (prompt task/complexity: ``backbone``, ``head_i.fc``, mean
    pooling) or ``"guard"`` (the instruction data guard's MLP). The backbone is built from
    the config in ``base_config_dir`` where the card loads ``config["base_model"]`` from
    the hub. ``cls.from_pretrained(dir)`` loads a saved copy (the reference forward).
    """
    import torch
    from huggingface_hub import PyTorchModelHubMixin
    from transformers import AutoConfig, AutoModel

    def backbone():
        return AutoModel.from_config(AutoConfig.from_pretrained(base_config_dir))

    if kind == "first-token":
        class FirstToken(torch.nn.Module, PyTorchModelHubMixin):
            def __init__(self, config: dict):
                super().__init__()
                self.model = backbone()
                self.dropout = torch.nn.Dropout(config["fc_dropout"])
                self.fc = torch.nn.Linear(self.model.config.hidden_size,
                                          len(config["id2label"]))

            def forward(self, input_ids, attention_mask):
                features = self.model(input_ids, attention_mask).last_hidden_state
                return self.fc(self.dropout(features))[:, 0, :]

        return FirstToken
    if kind == "multi-head":
        class Head(torch.nn.Module):
            def __init__(self, size_in: int, classes: int):
                super().__init__()
                self.fc = torch.nn.Linear(size_in, classes)

        class MultiHeadModel(torch.nn.Module, PyTorchModelHubMixin):
            def __init__(self, config: dict):
                super().__init__()
                self.backbone = backbone()
                self.target_sizes = config["target_sizes"].values()
                self.heads = [Head(self.backbone.config.hidden_size, n)
                              for n in self.target_sizes]
                for i, head in enumerate(self.heads):
                    self.add_module(f"head_{i}", head)

            def forward(self, input_ids, attention_mask):
                states = self.backbone(input_ids=input_ids,
                                       attention_mask=attention_mask).last_hidden_state
                mask = attention_mask.unsqueeze(-1).expand(states.size()).float()
                pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                return [head.fc(pooled) for head in self.heads]

        return MultiHeadModel
    if kind == "guard":
        class Guard(torch.nn.Module, PyTorchModelHubMixin):
            def __init__(self, input_dim: int, dropout: float = 0.7):
                super().__init__()
                self.dropout = torch.nn.Dropout(dropout)
                self.input_layer = torch.nn.Linear(input_dim, input_dim)
                self.hidden_layer_0 = torch.nn.Linear(input_dim, 2000)
                self.hidden_layer_1 = torch.nn.Linear(2000, 500)
                self.hidden_layer_2 = torch.nn.Linear(500, 1)

            def forward(self, x):
                x = torch.nn.functional.normalize(x, dim=-1)
                x = torch.relu(self.input_layer(self.dropout(x)))
                x = torch.relu(self.hidden_layer_0(self.dropout(x)))
                x = torch.relu(self.hidden_layer_1(self.dropout(x)))
                return torch.sigmoid(self.hidden_layer_2(self.dropout(x)))

        return Guard
    raise InvalidArgumentError(f"unknown kind {kind!r}")


def _randomize(module, seed: int, scale: float) -> None:
    """Large random weights, so predictions spread over the labels."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)


def save_hub_mixin_classifier(path, base_config_dir: str, labels: Sequence[str], *,
                              base_model: str = "microsoft/deberta-v3-base",
                              fc_dropout: float = 0.2, seed: int = 0) -> str:
    """A DeBERTa classifier as NVIDIA saved theirs (quality, domain, content type)."""
    import torch

    config = {"base_model": base_model, "fc_dropout": fc_dropout,
              "id2label": {str(i): label for i, label in enumerate(labels)},
              "label2id": {label: i for i, label in enumerate(labels)}}
    torch.manual_seed(seed)
    model = publisher_module("first-token", base_config_dir)(config)
    _randomize(model.fc, seed, scale=1.0)
    with staged_files(path) as draft:
        model.save_pretrained(draft)
    save_deberta_tokenizer(path)
    return os.fspath(path)


def save_prompt_complexity_classifier(path, base_config_dir: str, *, seed: int = 0,
                                      base_model: str = "microsoft/DeBERTa-v3-base") -> str:
    """The prompt task/complexity classifier's layout: 8 heads on a DeBERTa-v3 backbone."""
    import torch

    config = {
        "base_model": base_model,
        "target_sizes": {name: size for name, size, _, _ in PROMPT_TARGETS},
        "task_type_map": {str(i): task for i, task in enumerate(TASK_TYPES)},
        "weights_map": {name: weights for name, _, weights, _ in PROMPT_TARGETS if weights},
        "divisor_map": {name: divisor for name, _, _, divisor in PROMPT_TARGETS if divisor},
    }
    torch.manual_seed(seed)
    model = publisher_module("multi-head", base_config_dir)(config)
    for i, head in enumerate(model.heads):
        _randomize(head, seed + i, scale=1.0)
    with staged_files(path) as draft:
        model.save_pretrained(draft)
    # The published config.json lists the heads in head order; this huggingface_hub
    # sorts the keys when it saves, which would no longer say which head is which.
    _write_json(os.path.join(path, "config.json"), config)
    save_deberta_tokenizer(path)
    return os.fspath(path)


def save_fineweb_classifier(path, *, seed: int = 0, hidden_size: int = 32,
                            layers: int = 2) -> str:
    """A FineWeb-Edu style classifier: BERT with one regression output (as
    ``HuggingFaceFW/fineweb-edu-classifier``, on Snowflake arctic-embed-m's architecture)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from curator_dask.testing.models import small_tokenizer

    tokenizer = small_tokenizer(model_max_length=512)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden_size,
                        num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=4 * hidden_size, max_position_embeddings=512,
                        num_labels=1, problem_type="regression",
                        pad_token_id=tokenizer.pad_token_id, initializer_range=0.5)
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config)
    _randomize(model.classifier, seed, scale=0.4)
    with torch.no_grad():  # centre the scores on the 0-5 range
        model.classifier.bias.fill_(2.5)
    with staged_files(path) as draft:
        model.save_pretrained(draft)
        tokenizer.save_pretrained(draft)
    return os.fspath(path)


def save_llama_guard(path, *, seed: int = 0, hidden_size: int = 32, layers: int = 2) -> str:
    """A tiny LlamaGuard: a Llama causal LM and a SentencePiece BPE tokenizer
    (``tokenizer.model``; ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2 as in Llama 2)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    _write_bytes(os.path.join(path, "tokenizer.model"), _train_sentencepiece(
        "bpe", unk_id=0, bos_id=1, eos_id=2, pad_id=-1, byte_fallback=False))
    _write_json(os.path.join(path, "tokenizer_config.json"),
                {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True,
                 "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
                 "unk_token": "<unk>", "model_max_length": 4096})
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(path))
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden_size,
                         intermediate_size=2 * hidden_size, num_hidden_layers=layers,
                         num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=4096, bos_token_id=1, eos_token_id=2,
                         rms_norm_eps=1e-5)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    _randomize(model, seed, scale=0.3)
    with staged_files(path) as draft:
        model.save_pretrained(draft)
    return os.fspath(path)


def save_aegis_adapter(path, llama_guard_dir: str, *, seed: int = 0) -> str:
    """A PEFT LoRA adapter on :func:`save_llama_guard`'s model, as Aegis ships one
    (``adapter_config.json``, ``adapter_model.safetensors``), with random non-zero
    weights (a fresh LoRA's B matrices are zero: it would change nothing)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(llama_guard_dir)
    config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.05, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    model = get_peft_model(base, config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    with staged_files(path) as draft:
        model.save_pretrained(draft)
    return os.fspath(path)


def save_instruction_data_guard(path, input_dim: int, *, seed: int = 0) -> str:
    """The instruction data guard's MLP as its publisher saved it (``config.json`` with
    ``input_dim`` and ``dropout``, ``model.safetensors``)."""
    import torch

    torch.manual_seed(seed)
    model = publisher_module("guard")(input_dim=input_dim, dropout=0.7)
    _randomize(model, seed, scale=0.1)
    with staged_files(path) as draft:
        model.save_pretrained(draft)
    return os.fspath(path)
