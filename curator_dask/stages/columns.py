"""Declared columns: what a stage reads, adds and removes, and the errors when data disagrees.

Every stage states the columns it reads (``input_columns``), adds or replaces
(``output_columns``, with dtypes) and removes (``removed_columns``). They are checked in
two places, each written once here:

- on the client, before anything runs: a stage reading a column the input lacks is a
  :class:`ColumnNotFoundError` (:func:`require_columns`, also used by the dedup steps);
- on every output partition (:func:`check_output_columns`, called by the stage runtime):
  a stage whose output has columns it does not declare, or lacks declared ones, is an
  :class:`UndeclaredColumnError` naming the stage and the declaration to add.

NeMo Curator 1.x stages declare the same with ``inputs()``/``outputs()``, each returning
``(task attributes, columns)``; :func:`nemo_declared_columns` maps them onto ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from curator_dask.errors import ArgumentTypeError, CuratorError, NameNotFoundError

__all__ = ["ColumnNotFoundError", "UndeclaredColumnError", "check_output_columns", "id_column_fix",
           "nemo_declared_columns", "require_columns"]


class ColumnNotFoundError(NameNotFoundError):
    """A stage or dedup step reads a column that its input does not have.

    A :class:`KeyError` (as pandas raises for a missing column), with a message that names
    the reader, the column, the columns there are and the fix.
    """

    def __init__(self, message: str, missing: Sequence[str] = ()):
        super().__init__(message)
        self.missing = list(missing)


class UndeclaredColumnError(CuratorError, ValueError):
    """A stage returned other columns than it declares (``output_columns``,
    ``removed_columns``): the schema Dask and the next stages rely on would be wrong."""


def _columns(names: Sequence[str]) -> str:
    return f"column {names[0]!r}" if len(names) == 1 else f"columns {list(names)}"


def require_columns(owner: str, present: Iterable[str], wanted: Iterable[str], *,
                    verb: str = "reads", fix: str = "") -> None:
    """Raise :class:`ColumnNotFoundError` unless every ``wanted`` column is ``present``.

    ``owner`` names what reads them (``"stage 'word_count'"``, ``"MinHash"``) and ``fix``
    says what to do (``"Pass text_field= to name the right one."``).

    Examples
    --------
    >>> require_columns("stage 'count'", ["text"], ["text"])
    >>> require_columns("stage 'count'", ["text"], ["body"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curator_dask.stages.columns.ColumnNotFoundError: stage 'count' reads column 'body', ...
    """
    present = list(present)
    missing = [c for c in dict.fromkeys(wanted) if c not in present]
    if missing:
        raise ColumnNotFoundError(
            f"{owner} {verb} {_columns(missing)}, which the input does not have; the input "
            f"columns are {present}." + (f" {fix}" if fix else ""), missing)


def check_output_columns(stage_name: str, expected: Sequence[str], out) -> None:
    """Raise :class:`UndeclaredColumnError` when ``out``'s columns are not ``expected``.

    Compares column names only (order aside): a dtype may legitimately differ, a
    column may not appear or vanish unannounced.

    Examples
    --------
    >>> import pandas as pd
    >>> out = pd.DataFrame({"text": ["a"], "chars": [1]})
    >>> check_output_columns("chars", ["text"], out)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curator_dask.stages.columns.UndeclaredColumnError: stage 'chars' returned ...: add ...
    """
    columns = list(out.columns)
    if len(columns) == len(expected) and set(columns) == set(expected):
        return
    extra = [c for c in columns if c not in set(expected)]
    lacking = [c for c in expected if c not in set(columns)]
    problems = []
    if extra:
        declared = ", ".join(f"{c!r}: {str(out[c].dtype)!r}" for c in extra)
        problems.append(f"returned {_columns(extra)} that it does not declare: add "
                        f"output_columns={{{declared}}} to the stage")
    if lacking:
        problems.append(f"did not return {_columns(lacking)} that it declares: return "
                        f"{'it' if len(lacking) == 1 else 'them'}, or list "
                        f"{'it' if len(lacking) == 1 else 'them'} in removed_columns (or "
                        "drop them from output_columns)")
    raise UndeclaredColumnError(f"stage {stage_name!r} " + "; it also ".join(problems))


def nemo_declared_columns(stage, input_columns: Sequence[str],
                          output_columns: Mapping[str, object]) -> list[str]:
    """The columns a stage reads, its NeMo Curator 1.x ``inputs()``/``outputs()`` included.

    NeMo Curator 1.x stages return ``(top-level task attributes, columns)`` from both
    methods; the only task attribute that means something here is ``"data"`` (the
    partition). Columns of ``inputs()`` are read like ``input_columns``; a column of
    ``outputs()`` must be an input (modified in place) or declared with its dtype in
    ``output_columns``, since a dtype cannot be guessed without running the stage.
    """
    name = getattr(stage, "name", None) or type(stage).__name__
    wanted = list(input_columns)
    for method in ("inputs", "outputs"):
        declared = getattr(stage, method, None)
        if declared is None or getattr(declared, "_curator_default", False):
            continue
        try:
            attributes, columns = declared()
        except (TypeError, ValueError):
            raise ArgumentTypeError(
                f"stage {name!r}: {method}() must return (task attributes, columns), as in "
                f"NeMo Curator 1.x: for example (['data'], ['text'])") from None
        others = [a for a in attributes if a != "data"]
        if others:
            raise ArgumentTypeError(
                f"stage {name!r}: {method}() names task attributes {others}; a curator-dask "
                "stage works on a partition and has only 'data'. Declare columns with "
                "input_columns=, output_columns= and removed_columns= instead")
        if method == "inputs":
            wanted += [c for c in columns if c not in wanted]
            continue
        undeclared = [c for c in columns if c not in output_columns and c not in wanted]
        if undeclared:
            raise ArgumentTypeError(
                f"stage {name!r}: outputs() names {_columns(undeclared)} without a dtype; "
                "declare what the stage adds with output_columns={" +
                ", ".join(f"{c!r}: <dtype>" for c in undeclared) + "} (or list a column "
                "it modifies in inputs())")
    return wanted


def id_column_fix(id_field: str, missing: Sequence[str]) -> str:
    """The fix for a missing id column (``""`` when ``id_field`` is not missing)."""
    if id_field not in missing:
        return ""
    return (f"To add one, assign ids with AddId(id_field={id_field!r}) first (or pass "
            "id_field= naming the id column).")
