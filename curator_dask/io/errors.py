"""Errors for bad input: each names the file, the line (or row) or byte offset, and the fix.

Every error here is an :class:`InputError` with ``path`` and ``line`` attributes: ``line``
is the 1-based line of a JSONL file, or the 1-based row of a Parquet file (``None`` when
the problem concerns a whole file).
"""

from __future__ import annotations

import lzma
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from curator_dask.errors import CuratorError

__all__ = [
    "CorruptFileError",
    "InputError",
    "InputNotFoundError",
    "InvalidEncodingError",
    "MalformedLineError",
    "MissingColumnError",
    "SchemaConflictError",
    "SchemaMismatchError",
    "TextTypeError",
    "TruncatedFileError",
    "UnexpectedColumnError",
    "as_input_error",
    "reading",
]

_SKIP_HINT = "or read with on_bad_lines='skip' (or 'warn') to skip and count such lines"


def _where(path: str, line: int | None, unit: str = "line") -> str:
    return f"{path}, {unit} {line}" if line is not None else str(path)


class InputError(CuratorError, ValueError):
    """Base class of errors about input data."""

    path: str | None = None
    line: int | None = None


class MalformedLineError(InputError):
    """A JSONL line that is not a JSON object."""

    def __init__(self, path: str, line: int, reason: str):
        self.path, self.line, self.reason = path, line, reason
        super().__init__(
            f"{path}, line {line}: malformed JSON ({reason}). Fix the line, {_SKIP_HINT}."
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

    def __init__(self, column: str, path: str, present: list[str], *, line: int | None = None,
                 unit: str = "line"):
        self.column, self.path, self.present, self.line = column, path, present, line
        where = f" (from {unit} {line})" if line is not None else ""
        super().__init__(
            f"column {column!r} not found in {path}; it has {present}{where}. Pass "
            "text_field= with the name of the text column, or text_field=None to read "
            "files that have none (a list of ids, scores)."
        )


class SchemaMismatchError(InputError):
    """A column whose values cannot be read with the dataset's type."""

    def __init__(self, column: str, path: str, expected: str, found: str, *,
                 line: int | None = None, unit: str = "line", skippable: bool = False):
        self.column, self.path, self.line = column, path, line
        self.expected, self.found = expected, found
        skip = f", {_SKIP_HINT}" if skippable else ""
        super().__init__(
            f"{_where(path, line, unit)}: column {column!r} holds {found}, but the dataset "
            f"reads it as {expected} (inferred from a sample of the files, or set by "
            f"input_meta). Pass input_meta={{{column!r}: ...}} to read it with one type in "
            f"every file{skip}."
        )


class SchemaConflictError(SchemaMismatchError):
    """Two input files (or two parts of one) give a column incompatible types."""

    def __init__(self, column: str, first: tuple, second: tuple, *, unit: str = "line",
                 skippable: bool = False):
        (type_a, path_a, line_a), (type_b, path_b, line_b) = first, second
        self.column, self.path, self.line = column, path_b, line_b
        self.expected, self.found = str(type_a), str(type_b)
        self.first_path, self.first_line = path_a, line_a
        skip = (", or on_bad_lines='skip' to keep the first type and skip (and count) the "
                "lines that do not fit it") if skippable else ""
        self.summary = (f"column {column!r} is {type_a} in {_where(path_a, line_a, unit)} but "
                        f"{type_b} in {_where(path_b, line_b, unit)}")
        InputError.__init__(
            self,
            f"{self.summary}. Pass input_meta={{{column!r}: ...}} to read it with one type "
            f"(for example 'str'), or columns= without it{skip}."
        )


class TextTypeError(SchemaMismatchError):
    """A text column whose values are not strings."""

    def __init__(self, column: str, path: str, found: str, *, line: int | None = None,
                 unit: str = "line", skippable: bool = False):
        self.column, self.path, self.line = column, path, line
        self.expected, self.found = "string", found
        skip = f", {_SKIP_HINT}" if skippable else ""
        InputError.__init__(
            self,
            f"{_where(path, line, unit)}: the text column {column!r} holds {found}, not "
            f"strings. Fix the data, read with text_cast=True to cast such values to strings "
            f"(counted in a warning per file){skip}."
        )


class UnexpectedColumnError(InputError):
    """A field that is in the data but not in the dataset's schema: it would be lost.

    ``column`` is a top-level column, or for a field inside a struct its path
    (``meta.source``), with ``within`` the top-level column that holds it.
    """

    def __init__(self, column: str, path: str, *, line: int | None = None, unit: str = "line",
                 within: str | None = None):
        self.column, self.path, self.line, self.within = column, path, line, within
        if within is None:
            fix = f"Pass input_meta={{{column!r}: ...}} to read it"
        else:
            fix = (f"Pass input_meta={{{within!r}: ...}} with a type that has the field "
                   "(a pyarrow struct type) to read it")
        super().__init__(
            f"{_where(path, line, unit)}: field {column!r} is not in the dataset's schema "
            f"(inferred from a sample of the files), so it would be dropped. {fix}, or "
            "columns= to choose the columns to keep."
        )


class CorruptFileError(InputError):
    """A file that cannot be decoded (a corrupt compressed stream, a broken Parquet file)."""

    def __init__(self, path: str, reason: str, *, line: int | None = None, unit: str = "row",
                 fix: str = "Re-create or re-download the file, or remove it from the input."):
        self.path, self.line, self.reason = path, line, reason
        super().__init__(f"{_where(path, line, unit)}: cannot read the file ({reason}). {fix}")


class TruncatedFileError(CorruptFileError):
    """A compressed file whose stream ends early: the lines after the break are gone."""

    def __init__(self, path: str, reason: str, *, line: int, offset: int):
        self.path, self.line, self.offset, self.reason = path, line, offset, reason
        InputError.__init__(
            self,
            f"{path}: the compressed stream ends early ({reason}) after line {line} "
            f"(byte {offset} of the decompressed data); the rest of the file is lost. "
            "Re-create or re-download the file, or read with on_bad_lines='skip' to keep "
            f"the {line} lines before the break (the partial line after them is counted "
            "under reader.truncated_file)."
        )


class InputNotFoundError(CuratorError, FileNotFoundError):
    """An input path that does not exist, a pattern that matches nothing, or input
    directories without a file of the reader's format.

    ``path`` is the path as given; ``pattern`` says it was read as a glob (it does not
    exist and holds ``*``, ``?`` or ``[``).
    """

    def __init__(self, path: str, *, pattern: bool = False, extensions: str | None = None):
        self.path, self.pattern = path, pattern
        if extensions is not None:
            message = f"no files ending in {extensions} under {path}"
        elif pattern:
            example = path.replace("[", "[[]", 1)
            message = (
                f"no files match the pattern {path!r}: no file or directory of that name "
                "exists, so it was read as a glob pattern, where '*', '?' and '[...]' are "
                "wildcards. Check the path; to match a name that holds '[' in a pattern, "
                f"write the bracket as '[[]' (for example {example!r})")
        else:
            message = f"input path does not exist: {path!r}"
        super().__init__(message)


# -- the one place where what reading raises becomes a named error -------------------

#: What parsing, decoding or decompressing bad bytes raises: Arrow's errors, Python's
#: decoders' (JSON, UTF-8, zlib, lzma; zstandard's is an Exception subclass checked by
#: name), a stream that ends early, and nesting too deep to parse.
_DATA_ERRORS = (pa.ArrowException, ValueError, UnicodeError, zlib.error, lzma.LZMAError,
                EOFError, RecursionError, OverflowError)
#: What the reader's own code raises when bad input breaks an assumption (reported as
#: an unreadable file, with a request to report it: it is a gap in the reader).
_SURPRISES = (TypeError, KeyError, IndexError, AttributeError, AssertionError)


def as_input_error(err: BaseException, path: str, *, line: int | None = None,
                   offset: int | None = None) -> BaseException:
    """The named error for what reading ``path`` raised: ``err`` itself when it is one of
    the project's errors or not about the data (a missing file, a refused permission, a
    network error, an interrupt), else a :class:`CorruptFileError` naming the file, the
    line (or the byte ``offset``) and the cause."""
    if isinstance(err, CuratorError):
        return err
    is_data = isinstance(err, _DATA_ERRORS) or type(err) is OSError \
        or type(err).__name__ == "ZstdError"
    if not is_data and not isinstance(err, _SURPRISES):
        return err
    reason = f"{type(err).__name__}: {err}"
    if offset is not None and line is None:
        reason += f", in the bytes from offset {offset}"
    fix = "Re-create or re-download the file, or remove it from the input."
    if not is_data:
        fix += (" If the file is valid, this is a gap in curator-dask's reader: please "
                "report it with the file.")
    unit = "line"
    return CorruptFileError(path, reason, line=line, unit=unit, fix=fix)


@contextmanager
def reading(path: str, *, line: int | None = None, offset: int | None = None
            ) -> Iterator[None]:
    """Around reading one file (or a slice of it): anything the bytes make the parsers,
    decoders or the reader itself raise leaves as a named error (:func:`as_input_error`),
    never as a raw exception."""
    try:
        yield
    except Exception as err:  # sorted by as_input_error
        named = as_input_error(err, path, line=line, offset=offset)
        if named is err:
            raise
        raise named from err


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


class OutputExistsError(CuratorError, FileExistsError):
    """An output that is already there and may not be replaced: a directory that is not
    empty under ``mode="error"``, a file where a directory is wanted, a file that two
    partitions would both write."""


class ForeignFilesError(OutputExistsError):
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


class ResumeMismatchError(CuratorError, ValueError):
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


__all__ += [
    "ForeignFilesError",
    "OutputExistsError",
    "OutputOverlapsInputError",
    "ResumeMismatchError",
]
