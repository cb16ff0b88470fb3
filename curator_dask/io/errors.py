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


# -- output: what a write must not destroy or mix ----------------------------------------

class OutputOverlapsInputError(InputError):
    """An output (or cache) directory that is, contains or lies inside an input path.

    Writing there would delete the input (``overwrite``), or read the output back as
    input on the next run (``append``), so it is refused before anything is written.
    """

    def __init__(self, what: str, path: str, other_what: str, other: str, relation: str,
                 resolved: tuple[str, str] | None = None):
        self.path, self.other, self.relation = path, other, relation
        shown = ""
        if resolved is not None and (resolved[0] != path or resolved[1] != other):
            shown = f" (resolved: {resolved[0]!r} and {resolved[1]!r})"
        super().__init__(
            f"{what} {path!r} {relation} the {other_what} {other!r}{shown}; writing there "
            "could delete or re-read the input. Write to a directory that is neither "
            "inside nor around an input path, for example a sibling such as "
            f"{_sibling(other)!r}."
        )


def _sibling(path: str) -> str:
    base = path.rstrip("/") or path
    return f"{base}-curated"


class ForeignFilesError(FileExistsError):
    """``mode="overwrite"`` over a directory that holds files curator-dask did not write."""

    def __init__(self, path: str, foreign: list[str]):
        self.path, self.foreign = path, list(foreign)
        shown = ", ".join(repr(name) for name in self.foreign[:5])
        more = f" and {len(self.foreign) - 5} more" if len(self.foreign) > 5 else ""
        super().__init__(
            f"output directory {path!r} holds {len(self.foreign)} file(s) that curator-dask "
            f"did not write: {shown}{more}. mode='overwrite' replaces only the project's own "
            "files (its parts, markers and manifest). Move those files away, choose another "
            "output directory, or pass mode='overwrite_all' to delete everything in the "
            "directory."
        )


class ResumeMismatchError(ValueError):
    """A resume against output (or a cache) written by another pipeline or from other input.

    ``changes`` lists what differs, one line each (``"stage 'word_count': min_words 50 ->
    20"``).
    """

    def __init__(self, path: str, changes: list[str], fix: str | None = None):
        self.path, self.changes = path, list(changes)
        fix = fix or ("Run with resume=False and mode='overwrite' to start over (the parts "
                      "written so far are replaced), or write to a new output directory.")
        super().__init__(
            f"cannot resume into {path!r}: it was written by a different run "
            f"({'; '.join(self.changes)}). {fix}"
        )


__all__ += ["OutputOverlapsInputError", "ForeignFilesError", "ResumeMismatchError"]
