"""Fingerprints: what a stage computes, as JSON, so a resume can tell that it changed.

A stage's fingerprint (:meth:`~curator_dask.ProcessingStage.fingerprint`) is its class's
qualified name and its parameters: the instance attributes, made JSON-able by
:func:`jsonable`, less what changes only where or how fast it runs (``name``,
``resources``, ``batch_size``, ``storage_options``, and what a class lists in
``fingerprint_ignores``). A function stage's is the function's qualified name and a
hash of its code and constants (:func:`function_fingerprint`), so editing the function
changes it; edits to *other* functions it calls do not (give the stage a new
``fingerprint()`` if that matters).

:func:`pipeline_changes` compares two pipelines' fingerprints and says what changed,
in words a user can act on.

Examples
--------
>>> old = [{"name": "word_count", "fingerprint": {"stage": "ScoreFilter",
...        "params": {"min_words": 50}}}]
>>> new = [{"name": "word_count", "fingerprint": {"stage": "ScoreFilter",
...        "params": {"min_words": 20}}}]
>>> pipeline_changes(old, new)
["stage 'word_count': min_words 50 -> 20"]
>>> pipeline_changes(old, [])
["stage 'word_count' was removed"]
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import re
import types
from collections.abc import Mapping, Sequence

# Parameters are compared where fingerprints are kept: the io layer's output state.
from curator_dask.io.identity import digest
from curator_dask.io.output_state import param_changes

__all__ = [
    "NOT_PARAMETERS",
    "digest",
    "function_fingerprint",
    "jsonable",
    "object_fingerprint",
    "param_changes",
    "pipeline_changes",
]

#: Attributes that never count: they change where or how fast a stage runs, not what
#: it computes (or, for ``storage_options``, hold credentials that must not be recorded).
NOT_PARAMETERS = frozenset({"name", "resources", "batch_size", "storage_options"})
_MAX_DEPTH = 6
_MAX_ITEMS = 256


def qualified_name(obj) -> str:
    """``module.QualName`` of a class or function."""
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def object_fingerprint(obj, ignore: Sequence[str] = ()) -> dict:
    """The class's qualified name and its public attributes, JSON-able.

    Attributes starting with ``_`` (state, caches, loaded models) and those in
    :data:`NOT_PARAMETERS` or ``ignore`` are left out.
    """
    skip = NOT_PARAMETERS | set(ignore)
    params = {k: jsonable(v, 1) for k, v in sorted(vars(obj).items())
              if not k.startswith("_") and k not in skip}
    return {"stage": qualified_name(type(obj)), "params": params}


# One return per kind of value a stage's parameters may hold.
def jsonable(value, depth: int = 0):  # noqa: PLR0911, PLR0912
    """``value`` as JSON-able data that is equal for equal parameters on every run.

    Examples
    --------
    >>> jsonable({"b": {3, 1}, "a": (1.5, None)})
    {'a': [1.5, None], 'b': [1, 3]}
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth > _MAX_DEPTH:
        return {"class": qualified_name(type(value))}
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return jsonable(value.item(), depth)  # a numpy scalar
    if isinstance(value, Mapping):
        return _bounded({str(k): jsonable(v, depth + 1)
                         for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))})
    if isinstance(value, (list, tuple)):
        return _bounded([jsonable(v, depth + 1) for v in value])
    if isinstance(value, (set, frozenset)):
        return _bounded(sorted((jsonable(v, depth + 1) for v in value),
                               key=lambda v: json.dumps(v, sort_keys=True)))
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, bytes):
        return {"bytes": hashlib.sha256(value).hexdigest()}
    if isinstance(value, re.Pattern):
        return {"regex": value.pattern, "flags": int(value.flags)}
    if isinstance(value, type):
        return {"class": qualified_name(value)}
    if isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
        return function_fingerprint(value, depth + 1)
    fingerprint = getattr(value, "fingerprint", None)
    if callable(fingerprint) and not isinstance(value, type):
        return fingerprint()
    if hasattr(value, "tobytes") and hasattr(value, "dtype"):  # numpy arrays
        return {"array": hashlib.sha256(value.tobytes()).hexdigest(), "dtype": str(value.dtype),
                "shape": list(getattr(value, "shape", ()))}
    if dataclasses.is_dataclass(value):
        return {"class": qualified_name(type(value)),
                **{f.name: jsonable(getattr(value, f.name), depth + 1)
                   for f in dataclasses.fields(value) if not f.name.startswith("_")}}
    if hasattr(value, "__dict__"):
        # A nested object (a filter, a modifier, a config): its private attributes are
        # its parameters too (``WordCountFilter._min_words``), shown without the "_".
        return {"class": qualified_name(type(value)),
                **{k.lstrip("_"): jsonable(v, depth + 1) for k, v in sorted(vars(value).items())
                   if k.lstrip("_") not in NOT_PARAMETERS and not k.startswith("__")}}
    return {"class": qualified_name(type(value))}


def _bounded(value):
    """A long collection (a vocabulary, a word list) as its length and a digest, so a
    manifest stays small; a change still shows as a change."""
    if len(value) <= _MAX_ITEMS:
        return value
    return {"items": len(value), "digest": digest(value)}


def function_fingerprint(func, depth: int = 0) -> dict:
    """A function's qualified name and a hash of its code, constants, defaults and the
    values it closes over; the same for the same source in any module or process.

    Examples
    --------
    >>> def a(df):
    ...     return df[df["n"] > 1]
    >>> def b(df):
    ...     return df[df["n"] > 2]
    >>> function_fingerprint(a)["code"] == function_fingerprint(b)["code"]
    False
    """
    if isinstance(func, types.MethodType):
        return {"method": func.__func__.__qualname__,
                "self": jsonable(func.__self__, depth + 1),
                **function_fingerprint(func.__func__, depth + 1)}
    code = getattr(func, "__code__", None)
    if code is None:
        return {"function": qualified_name(func)}
    closure = []
    for cell in func.__closure__ or ():
        try:
            closure.append(jsonable(cell.cell_contents, depth + 1))
        except ValueError:  # an empty cell
            closure.append(None)
    return {"function": func.__qualname__,
            "code": _code_digest(code, func.__doc__),
            "defaults": jsonable(func.__defaults__, depth + 1),
            "kwdefaults": jsonable(func.__kwdefaults__, depth + 1),
            "closure": closure}


def _code_digest(code: types.CodeType, doc: str | None = None) -> str:
    """A hash of what the code does: bytecode, names and constants (a docstring, line
    numbers and the file name left out)."""
    h = hashlib.sha256()
    h.update(code.co_code)
    h.update(json.dumps([code.co_names, code.co_varnames, code.co_argcount,
                         code.co_kwonlyargcount]).encode())
    for const in code.co_consts:
        if doc is not None and const is doc:
            continue
        if isinstance(const, types.CodeType):
            h.update(_code_digest(const).encode())
        else:
            h.update(json.dumps(jsonable(const), sort_keys=True).encode())
    return h.hexdigest()


# -- saying what changed ---------------------------------------------------------------------

def pipeline_changes(old: Sequence[Mapping], new: Sequence[Mapping]) -> list[str]:
    """What differs between two pipelines, each a list of ``{"name", "fingerprint"}``
    entries in order (as :meth:`~curator_dask.executors.layout.Layout.fingerprint` makes).

    Stages are matched by fingerprint first, so a removed or added stage is named as
    such; a stage whose class stayed but whose parameters changed is listed with them.
    """
    old_keys = [digest(e["fingerprint"]) for e in old]
    new_keys = [digest(e["fingerprint"]) for e in new]
    out: list[str] = []
    matcher = difflib.SequenceMatcher(a=old_keys, b=new_keys, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        removed, added = list(old[i1:i2]), list(new[j1:j2])
        # A stage of the same name and class, then of the same name, then of the same
        # class, is the same stage changed, not one removed and another added.
        for same in (lambda a, b: _kind(a) == _kind(b) and a["name"] == b["name"],
                     lambda a, b: a["name"] == b["name"],
                     lambda a, b: _kind(a) == _kind(b)):
            for before in list(removed):
                match = next((a for a in added if same(before, a)), None)
                if match is None:
                    continue
                removed.remove(before)
                added.remove(match)
                out.append(_changed(before, match))
        out += [f"stage '{e['name']}' was removed" for e in removed]
        out += [f"stage '{e['name']}' was added" for e in added]
    if not out and old_keys != new_keys:
        out.append("the stages are in another order")
    return out


def _kind(entry: Mapping) -> str | None:
    return entry["fingerprint"].get("stage")


def _changed(before: Mapping, after: Mapping) -> str:
    changes = []
    if _kind(before) != _kind(after):
        changes.append(f"now {_kind(after)} (was {_kind(before)})")
    changes += param_changes(before["fingerprint"].get("params"),
                             after["fingerprint"].get("params"))
    name = after["name"] if after["name"] == before["name"] else (
        f"{before['name']}' (now '{after['name']}")
    return f"stage '{name}': " + ", ".join(changes or ["its definition changed"])
