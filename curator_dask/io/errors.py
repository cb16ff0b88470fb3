"""Errors for bad input: each names the file, the line or column, and the fix."""

from __future__ import annotations

__all__ = ["InputError", "MalformedLineError", "InvalidEncodingError", "MissingColumnError",
           "SchemaMismatchError"]


class InputError(ValueError):
    """Base class of errors about input data."""


class MalformedLineError(InputError):
    """A JSONL line that is not a JSON object."""

    def __init__(self, path: str, line: int, reason: str):
        self.path, self.line, self.reason = path, line, reason
        super().__init__(
            f"{path}, line {line}: malformed JSON ({reason}). Fix the line, or read with "
            "on_bad_lines='skip' (or 'warn') to skip and count such lines."
        )


class InvalidEncodingError(InputError):
    """Bytes that are not valid UTF-8."""

    def __init__(self, path: str, line: int, reason: str):
        self.path, self.line = path, line
        super().__init__(
            f"{path}, line {line}: invalid UTF-8 ({reason}). Re-encode the file as UTF-8, "
            "or read with encoding_errors='replace' to replace bad bytes with U+FFFD."
        )


class MissingColumnError(InputError):
    """A required column is absent from a file."""

    def __init__(self, column: str, path: str, present: list[str]):
        self.column, self.path, self.present = column, path, present
        super().__init__(
            f"column {column!r} not found in {path}; it has {present}. Pass text_field= "
            "with the name of the text column (or columns= to choose what to read)."
        )


class SchemaMismatchError(InputError):
    """A column whose values cannot be read with the dataset's type."""

    def __init__(self, column: str, path: str, expected: str, found: str):
        self.column, self.path = column, path
        super().__init__(
            f"column {column!r} in {path} holds {found}, but the dataset reads it as "
            f"{expected} (inferred from the first file). Pass input_meta={{{column!r}: ...}} "
            "to set the type for every file."
        )
