"""curator-dask: curate text corpora for language-model training on Dask."""

from curator_dask.dataset import DocumentDataset, WriteResult
from curator_dask.resources import Resources
from curator_dask.stages import AddId, ProcessingStage, Sequential, processing_stage

__version__ = "0.1.0"

__all__ = [
    "AddId",
    "DocumentDataset",
    "ProcessingStage",
    "Resources",
    "Sequential",
    "WriteResult",
    "processing_stage",
]
