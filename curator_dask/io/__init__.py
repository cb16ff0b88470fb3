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
    "InputError", "InvalidEncodingError", "MalformedLineError", "MissingColumnError",
    "SchemaMismatchError", "SchemaConflictError", "TextTypeError", "UnexpectedColumnError",
    "CorruptFileError", "TruncatedFileError", "InputFile", "list_files", "FileSlice",
    "PartitionSpec", "plan_partitions", "InputNotFoundError",
]

# What a write must not destroy or mix (the output contract, see curator_dask.io.writers).
from curator_dask.io.errors import (  # noqa: E402
    ForeignFilesError,
    OutputOverlapsInputError,
    ResumeMismatchError,
)
from curator_dask.io.guard import OutputCollisionError, OutputGuard  # noqa: E402
from curator_dask.io.lease import LeaseLostError, OutputInUseError  # noqa: E402
from curator_dask.io.overlap import InputPaths, check_output_path, input_paths  # noqa: E402

__all__ += ["ForeignFilesError", "OutputOverlapsInputError", "ResumeMismatchError",
            "InputPaths", "check_output_path", "input_paths", "OutputGuard",
            "OutputCollisionError", "OutputInUseError", "LeaseLostError"]
