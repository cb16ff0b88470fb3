"""Input and output: list files, plan partitions, read one partition, write one partition."""

from curator_dask.io.errors import (
    CorruptFileError,
    InputError,
    InvalidEncodingError,
    MalformedLineError,
    MissingColumnError,
    SchemaConflictError,
    SchemaMismatchError,
    TextTypeError,
    TruncatedFileError,
    UnexpectedColumnError,
)
from curator_dask.io.files import InputFile, list_files
from curator_dask.io.planner import FileSlice, PartitionSpec, plan_partitions

__all__ = [
    "InputError", "InvalidEncodingError", "MalformedLineError", "MissingColumnError",
    "SchemaMismatchError", "SchemaConflictError", "TextTypeError", "UnexpectedColumnError",
    "CorruptFileError", "TruncatedFileError", "InputFile", "list_files", "FileSlice",
    "PartitionSpec", "plan_partitions",
]
