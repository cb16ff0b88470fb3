"""curator-dask: curate text corpora for language-model training on Dask."""

from curator_dask.cluster import get_client
from curator_dask.dataset import DocumentDataset, WriteResult
from curator_dask.errors import CuratorError
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

__all__ = [
    "AddId",
    "CuratorError",
    "DocumentDataset",
    "JsonlReader",
    "JsonlWriter",
    "ParquetReader",
    "ParquetWriter",
    "Pipeline",
    "ProcessingStage",
    "Resources",
    "RunResult",
    "Sequential",
    "WarcReader",
    "WriteResult",
    "get_client",
    "processing_stage",
]
