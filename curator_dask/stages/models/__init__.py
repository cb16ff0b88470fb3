"""Transformer model stages: classify and embed documents on GPU workers (or CPU).

- :class:`ClassifierStage`: a label per document from a sequence classifier; optional
  probabilities and filtering by label.
- :class:`EmbeddingStage`: a vector per document from an encoder.
- :class:`TokenizerStage`: token ids on a CPU worker, for a model stage made with
  ``pretokenized=True``.

Models load from local ``save_pretrained`` directories (checked when a stage is made),
once per worker process, and are shared by stages on the same directory. Inference sorts
each partition by token length, pads each batch only to its own longest document and
halves a batch that runs out of memory; see :mod:`.batching`. Needs
``pip install 'curator-dask[models]'`` (torch, transformers, safetensors); importing this
package does not import them.
"""

from curator_dask.stages.models.base import ModelStage, TokenizerStage
from curator_dask.stages.models.classifier import ClassifierStage
from curator_dask.stages.models.embedding import EmbeddingStage
from curator_dask.stages.models.loading import LOAD_LOG_ENV, loaded
from curator_dask.stages.models.model_dir import ModelDirectoryError, inspect_model_dir

__all__ = [
    "ClassifierStage",
    "EmbeddingStage",
    "LOAD_LOG_ENV",
    "ModelDirectoryError",
    "ModelStage",
    "TokenizerStage",
    "inspect_model_dir",
    "loaded",
]
