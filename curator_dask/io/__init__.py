"""Input and output: list files, plan partitions, read one partition, write one partition."""

from curator_dask.io.errors import (
    CorruptFileError,
    InputError,
    InputNotFoundError,
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
from curator_dask.io.partitions import FileSlice, PartitionSpec
from curator_dask.io.planner import plan_partitions

__all__ = [
    "CorruptFileError",
    "FileSlice",
    "InputError",
    "InputFile",
    "InputNotFoundError",
    "InvalidEncodingError",
    "MalformedLineError",
    "MissingColumnError",
    "PartitionSpec",
    "SchemaConflictError",
    "SchemaMismatchError",
    "TextTypeError",
    "TruncatedFileError",
    "UnexpectedColumnError",
    "list_files",
    "plan_partitions",
]

# What a write must not destroy or mix (the output contract, see curator_dask.io.writers).
from curator_dask.io.errors import (
    ForeignFilesError,
    OutputOverlapsInputError,
    ResumeMismatchError,
)
from curator_dask.io.guard import OutputCollisionError, OutputGuard
from curator_dask.io.lease import LeaseLostError, OutputInUseError
from curator_dask.io.overlap import InputPaths, check_output_path, input_paths

__all__ += [
    "ForeignFilesError",
    "InputPaths",
    "LeaseLostError",
    "OutputCollisionError",
    "OutputGuard",
    "OutputInUseError",
    "OutputOverlapsInputError",
    "ResumeMismatchError",
    "check_output_path",
    "input_paths",
]
