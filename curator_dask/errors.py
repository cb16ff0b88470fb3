"""The base of every error curator-dask raises on purpose.

Every exception class the project defines derives from :class:`CuratorError`, so one
``except CuratorError`` catches them all. Each also keeps the builtin base it always had
(an :class:`~curator_dask.io.errors.InputError` is still a :class:`ValueError`, a
:class:`~curator_dask.executors.ResourceUnavailableError` still a :class:`RuntimeError`),
so code written against those bases keeps working.

Examples
--------
>>> from curator_dask import CuratorError
>>> from curator_dask.io.errors import MalformedLineError
>>> error = MalformedLineError("a.jsonl", 3, "Expecting value")
>>> isinstance(error, CuratorError), isinstance(error, ValueError)
(True, True)
"""

from __future__ import annotations

__all__ = ["CuratorError"]


def _restore(cls: type[CuratorError], args: tuple, state: dict) -> CuratorError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class CuratorError(Exception):
    """Base class of every error curator-dask raises on purpose.

    Catch it to handle any of the project's errors (bad input, unavailable resources,
    configuration mistakes, model directories, ...) while letting unexpected failures
    (bugs, interrupts) through.
    """

    def __reduce__(self):
        # Subclasses' constructors take the parts of the message, not the message: rebuild
        # from the arguments and attributes instead of calling __init__ again, so an error
        # raised on a Dask worker reaches the client intact (type, message, attributes).
        return _restore, (type(self), self.args, self.__dict__)
