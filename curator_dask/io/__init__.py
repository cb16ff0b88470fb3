"""Input and output: list files, plan partitions, read one partition, write one partition."""

from curator_dask.io.errors import (
    InputError,
    InvalidEncodingError,
    MalformedLineError,
    MissingColumnError,
    SchemaMismatchError,
)
from curator_dask.io.files import InputFile, list_files
from curator_dask.io.planner import FileSlice, PartitionSpec, plan_partitions

__all__ = [
    "InputError", "InvalidEncodingError", "MalformedLineError", "MissingColumnError",
    "SchemaMismatchError", "InputFile", "list_files", "FileSlice", "PartitionSpec",
    "plan_partitions",
]
