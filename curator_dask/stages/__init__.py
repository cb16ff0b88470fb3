"""Stages: the stage API and the catalog of partition-wise operations."""

from curator_dask.stages.base import (
    FunctionStage,
    ProcessingStage,
    Sequential,
    processing_stage,
)
from curator_dask.stages.ids import AddId

__all__ = ["AddId", "FunctionStage", "ProcessingStage", "Sequential", "processing_stage"]
