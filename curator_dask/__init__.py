"""curator-dask: curate text corpora for language-model training on Dask.

What this module exports is the public API. Subpackages with their own ``__all__`` hold
the rest: :mod:`curator_dask.stages` (filters, modifiers, models, ...),
:mod:`curator_dask.dedup`, :mod:`curator_dask.executors`, :mod:`curator_dask.io` and
:mod:`curator_dask.testing` (helpers for tests and examples).
"""

from __future__ import annotations

import importlib

from curator_dask.cluster import get_client
from curator_dask.cluster_session import ClusterSession
from curator_dask.dataset import DocumentDataset, WriteResult
from curator_dask.errors import CuratorError
from curator_dask.executors import (
    BatchExecutor,
    Executor,
    LocalExecutor,
    ResourceUnavailableError,
    StreamingExecutor,
)
from curator_dask.faults import SchedulerLostError, WorkerDiedError, WorkerMemoryError
from curator_dask.io.errors import InputError
from curator_dask.migrate.finder import install as _install_nemo_path_errors
from curator_dask.migrate.finder import top_level_hint as _top_level_hint
from curator_dask.pipeline import Pipeline, RunResult
from curator_dask.resources import Resources
from curator_dask.stages import AddId, ProcessingStage, Sequential, processing_stage
from curator_dask.stages.io_stages import (
    JsonlReader,
    JsonlWriter,
    ParquetReader,
    ParquetWriter,
    WarcReader,
)

__version__ = "0.1.0"

# `import curator_dask.modules` (a NeMo Curator path) says where its contents live here.
_install_nemo_path_errors()

# Loaded on first use: the dedup stages import numba (and the semantic one its kernels),
# which a pipeline without deduplication should not pay for at `import curator_dask`;
# the named classifiers live with the model stages, which a pipeline without models
# need not import.
_LAZY = {
    "ExactDedup": "curator_dask.dedup.stages",
    "FuzzyDedup": "curator_dask.dedup.stages",
    "SemanticDedup": "curator_dask.dedup.stages",
    **{name: "curator_dask.stages.models" for name in (
        "QualityClassifier", "DomainClassifier", "MultilingualDomainClassifier",
        "ContentTypeClassifier", "FineWebEduClassifier", "FineWebMixtralEduClassifier",
        "FineWebNemotronEduClassifier", "PromptTaskComplexityClassifier", "AegisClassifier",
        "InstructionDataGuardClassifier")},
}

__all__ = [
    "AddId",
    "AegisClassifier",
    "BatchExecutor",
    "ClusterSession",
    "ContentTypeClassifier",
    "CuratorError",
    "DocumentDataset",
    "DomainClassifier",
    "ExactDedup",
    "Executor",
    "FineWebEduClassifier",
    "FineWebMixtralEduClassifier",
    "FineWebNemotronEduClassifier",
    "FuzzyDedup",
    "InputError",
    "InstructionDataGuardClassifier",
    "JsonlReader",
    "JsonlWriter",
    "LocalExecutor",
    "MultilingualDomainClassifier",
    "ParquetReader",
    "ParquetWriter",
    "Pipeline",
    "ProcessingStage",
    "PromptTaskComplexityClassifier",
    "QualityClassifier",
    "ResourceUnavailableError",
    "Resources",
    "RunResult",
    "SchedulerLostError",
    "SemanticDedup",
    "Sequential",
    "StreamingExecutor",
    "WarcReader",
    "WorkerDiedError",
    "WorkerMemoryError",
    "WriteResult",
    "get_client",
    "processing_stage",
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'curator_dask' has no attribute {name!r}"
                         f"{_top_level_hint(name)}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
