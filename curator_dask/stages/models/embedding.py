"""EmbeddingStage: one vector per document from an encoder (sentence-transformers style).

The model is any Hugging Face ``AutoModel`` encoder saved in a local directory, e.g.
all-MiniLM-L6-v2. The document vector is the mean of the last hidden states over the
document's tokens (``pooling="mean"``, what sentence-transformers does for MiniLM) or the
first token's (``pooling="cls"``), L2-normalised by default, so a dot product is the
cosine similarity. For a sentence-transformers directory the default ``max_length`` is
its ``max_seq_length`` (``sentence_bert_config.json``), so vectors match
``SentenceTransformer.encode``.
"""

from __future__ import annotations

import os

import numpy as np

from curator_dask.errors import InvalidArgumentError
from curator_dask.resources import Resources
from curator_dask.stages.models.backend import VECTOR_DTYPE, column_like
from curator_dask.stages.models.base import ModelStage

__all__ = ["EmbeddingStage"]

POOLINGS = ("mean", "cls")


class EmbeddingStage(ModelStage):
    """Add a float32 embedding vector per document.

    Parameters
    ----------
    model_path : str or path-like
        Local ``save_pretrained`` directory of an encoder and its tokenizer.
    pooling : {"mean", "cls"}, default "mean"
        Mean of the token states (padding excluded) or the first token's state.
    embedding_column : str, default "embedding"
    normalize : bool, default True
        L2-normalise each vector.
    text_field : str, default "text"
    model_inference_batch_size : int, default 256
    max_chars : int or None, default 6000
    device, dtype, max_tokens_per_batch, max_length
        See :class:`~curator_dask.stages.models.base.ModelStage`.
    pretokenized, input_ids_column, trust_remote_code, name, resources
        See :class:`~curator_dask.stages.models.base.ModelStage`.

    Examples
    --------
    >>> from curator_dask.stages.models import EmbeddingStage
    >>> embedded = EmbeddingStage("models/all-MiniLM-L6-v2")(ds)  # doctest: +SKIP
    >>> embedded.df["embedding"].head(1).iloc[0].shape              # doctest: +SKIP
    (384,)
    """

    model_kind = "encoder"
    output_suffix = "embedding"

    def __init__(self, model_path: str | os.PathLike, pooling: str = "mean",
                 embedding_column: str = "embedding",
                 normalize: bool = True, *, text_field: str = "text",
                 model_inference_batch_size: int = 256, max_chars: int | None = 6000,
                 device: str = "auto", dtype: str = "auto",
                 max_tokens_per_batch: int | None = None, max_length: int | None = None,
                 pretokenized: bool = False, input_ids_column: str = "input_ids",
                 trust_remote_code: bool = False, name: str | None = None,
                 resources: Resources | None = None):
        if pooling not in POOLINGS:
            raise InvalidArgumentError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        super().__init__(model_path, text_field=text_field,
                         model_inference_batch_size=model_inference_batch_size,
                         max_tokens_per_batch=max_tokens_per_batch, max_chars=max_chars,
                         max_length=max_length, device=device, dtype=dtype,
                         pretokenized=pretokenized, input_ids_column=input_ids_column,
                         trust_remote_code=trust_remote_code, name=name, resources=resources)
        self.pooling = pooling
        self.embedding_column = embedding_column
        self.normalize = bool(normalize)
        self.output_columns = {embedding_column: VECTOR_DTYPE}

    def _default_max_length(self) -> int:
        sentence_config = self.model_dir.read_json("sentence_bert_config.json") or {}
        seq_length = sentence_config.get("max_seq_length")
        if isinstance(seq_length, int) and seq_length > 0:
            return min(seq_length, super()._default_max_length())
        return super()._default_max_length()

    def forward_batch(self, input_ids, attention_mask):
        import torch

        states = self._model.model(input_ids=input_ids,
                                   attention_mask=attention_mask).last_hidden_state.float()
        if self.pooling == "cls":
            pooled = states[:, 0]
        else:
            mask = attention_mask.unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled

    def attach(self, df, vectors):
        if vectors is None:
            vectors = np.empty((0, self.model_dir.hidden_size or 0), dtype=np.float32)
        return df.assign(**{self.embedding_column: column_like(vectors, df, "vectors")})
