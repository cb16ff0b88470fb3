"""A small byte-level BPE tokenizer trained on the bundled sample, saved to a directory.

For tests, examples and the docs of the tokenizing writers: a real BPE tokenizer of the
GPT-2 kind (byte-level, so any text tokenizes, with ``<|endoftext|>`` as its BOS and EOS
token), trained here with the ``tokenizers`` library on the bundled sample of the Python
documentation; nothing comes from a model hub. Training is seeded by the data alone, so
the same arguments give the same tokenizer.
"""

from __future__ import annotations

import os

import fsspec

from curator_dask.io import atomic

__all__ = ["END_OF_TEXT", "save_bpe_tokenizer"]

#: The BOS/EOS token of the tokenizer :func:`save_bpe_tokenizer` saves.
END_OF_TEXT = "<|endoftext|>"


def save_bpe_tokenizer(path, vocab_size: int = 2000, *, limit: int | None = None) -> str:
    """Train a byte-level BPE tokenizer of ``vocab_size`` tokens on the bundled sample
    (its first ``limit`` documents) and save it to the directory ``path``.

    The directory gets ``tokenizer.json`` and ``tokenizer_config.json`` (naming
    ``<|endoftext|>`` as ``bos_token`` and ``eos_token``), what
    ``transformers.AutoTokenizer.from_pretrained(path)`` and curator-dask's tokenizing
    writers load. Returns the path.

    Examples
    --------
    >>> import tempfile
    >>> from tokenizers import Tokenizer
    >>> path = save_bpe_tokenizer(tempfile.mkdtemp(), vocab_size=500, limit=50)
    >>> tokenizer = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    >>> tokenizer.get_vocab_size()
    500
    >>> tokenizer.decode(tokenizer.encode("Dask curates text").ids)
    'Dask curates text'
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from curator_dask.sample import sample_documents

    texts = sample_documents(limit)["text"].tolist()
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[END_OF_TEXT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer, length=len(texts))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": END_OF_TEXT,
              "eos_token": END_OF_TEXT, "unk_token": END_OF_TEXT, "model_max_length": 2048}
    with atomic.staged_files(path) as draft:  # both files appear together, or neither
        tokenizer.save(os.path.join(draft, "tokenizer.json"))
        atomic.write_json(fsspec.filesystem("file"), os.path.join(draft, "tokenizer_config.json"),
                          config)
    return os.fspath(path)
