"""Transformer model stages: classify and embed documents on GPU workers (or CPU).

- :class:`ClassifierStage`: a label per document from a sequence classifier; optional
  probabilities and filtering by label.
- The named classifiers of NeMo Curator, running their publishers' models from local
  directories: :class:`QualityClassifier`, :class:`DomainClassifier`,
  :class:`MultilingualDomainClassifier`, :class:`ContentTypeClassifier`,
  :class:`FineWebEduClassifier`, :class:`FineWebMixtralEduClassifier`,
  :class:`FineWebNemotronEduClassifier`, :class:`PromptTaskComplexityClassifier`,
  :class:`AegisClassifier`, :class:`InstructionDataGuardClassifier`.
- :class:`EmbeddingStage`: a vector per document from an encoder.
- :class:`TokenizerStage`: token ids on a CPU worker, for a model stage made with
  ``pretokenized=True``.

Models load from local ``save_pretrained`` directories (checked when a stage is made),
once per worker process, and are shared by stages on the same directory. Inference sorts
each partition by token length, pads each batch only to its own longest document and
halves a batch that runs out of memory; see :mod:`.batching`. Stages in a row over the
same text and tokenizer tokenize once (:mod:`.token_cache`). Needs
``pip install 'curator-dask[models]'`` (torch, transformers, safetensors); importing this
package does not import them.
"""

from curator_dask.stages.models.base import ModelStage, TokenizerStage
from curator_dask.stages.models.classifier import ClassifierOptionError, ClassifierStage
from curator_dask.stages.models.deberta import (
    ContentTypeClassifier,
    DomainClassifier,
    MultilingualDomainClassifier,
    QualityClassifier,
)
from curator_dask.stages.models.embedding import EmbeddingStage
from curator_dask.stages.models.fineweb import (
    FineWebEduClassifier,
    FineWebMixtralEduClassifier,
    FineWebNemotronEduClassifier,
)
from curator_dask.stages.models.loading import LOAD_LOG_ENV, loaded
from curator_dask.stages.models.model_dir import ModelDirectoryError, inspect_model_dir
from curator_dask.stages.models.prompt_complexity import PromptTaskComplexityClassifier
from curator_dask.stages.models.published import PUBLISHED
from curator_dask.stages.models.safety import AegisClassifier, InstructionDataGuardClassifier
from curator_dask.stages.models.token_cache import TOKEN_CACHE_ENV, tokenization_counts

__all__ = [
    "LOAD_LOG_ENV",
    "PUBLISHED",
    "TOKEN_CACHE_ENV",
    "AegisClassifier",
    "ClassifierOptionError",
    "ClassifierStage",
    "ContentTypeClassifier",
    "DomainClassifier",
    "EmbeddingStage",
    "FineWebEduClassifier",
    "FineWebMixtralEduClassifier",
    "FineWebNemotronEduClassifier",
    "InstructionDataGuardClassifier",
    "ModelDirectoryError",
    "ModelStage",
    "MultilingualDomainClassifier",
    "PromptTaskComplexityClassifier",
    "QualityClassifier",
    "TokenizerStage",
    "inspect_model_dir",
    "loaded",
    "tokenization_counts",
]
