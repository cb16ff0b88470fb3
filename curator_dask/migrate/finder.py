"""An import error that says where a NeMo Curator module's contents live in curator-dask.

Code ported by replacing ``nemo_curator`` with ``curator_dask`` imports paths such as
``curator_dask.modules`` or ``curator_dask.stages.text.io.reader``, which do not exist
here. :class:`NeMoPathFinder`, installed by ``import curator_dask`` at the end of
``sys.meta_path``, answers only for such names: a name under ``curator_dask.`` that no
other finder found (so it never shadows a real module and costs nothing on a
successful import) and that :func:`~curator_dask.migrate.mapping.nemo_module_for`
recognises. It raises :class:`NeMoModulePathError` naming where each thing lives here,
and suggests ``curator-dask migrate``. Any other missing name gets Python's usual
``ModuleNotFoundError``.

Examples
--------
>>> import curator_dask
>>> try:
...     import curator_dask.modules
... except ModuleNotFoundError as err:
...     print(str(err).splitlines()[0])
No module named 'curator_dask.modules': it is NeMo Curator's nemo_curator.modules.
"""

from __future__ import annotations

import sys

from curator_dask.errors import CuratorError

__all__ = ["NeMoModulePathError", "NeMoPathFinder", "install", "top_level_hint"]


class NeMoModulePathError(CuratorError, ModuleNotFoundError):
    """A NeMo Curator module path imported from ``curator_dask``; the message says where
    its names live here. Still a ``ModuleNotFoundError`` (and an ``ImportError``)."""


def _message(fullname: str, nemo_module: str) -> str:
    from curator_dask.migrate.mapping import MODULES, import_lines

    module = MODULES[nemo_module]
    lines = [f"No module named {fullname!r}: it is NeMo Curator's {nemo_module}."]
    if module.ours:
        lines.append("In curator-dask:")
    else:
        lines.append(f"curator-dask has no counterpart: {module.note}.")
    lines.extend(f"  {line}" for line in import_lines(nemo_module))
    lines.append(_SUGGESTION)
    return "\n".join(lines)


_SUGGESTION = ("Run `curator-dask migrate SCRIPT.py` to rewrite a NeMo Curator script "
               "(a diff; --write applies it).")


def _name_message(fullname: str, name: str) -> str:
    from curator_dask.migrate.mapping import NAMES

    counterpart = NAMES[name]
    where = (f"from {counterpart.module} import {counterpart.name}" if counterpart.ours
             else f"curator-dask has no counterpart: {counterpart.note}")
    return (f"No module named {fullname!r}: {name} is NeMo Curator's, and curator_dask "
            f"does not export it at the top. {where}. Run `curator-dask migrate SCRIPT.py` "
            "to rewrite a NeMo Curator script.")


def top_level_hint(name: str) -> str:
    """Where a NeMo Curator name missing from ``curator_dask``'s top level lives, or ''."""
    from curator_dask.migrate.mapping import NAMES

    counterpart = NAMES.get(name)
    if counterpart is None:
        return ""
    if counterpart.ours:
        return f"; {name} is NeMo Curator's: from {counterpart.module} import {counterpart.name}"
    return f"; {name} is NeMo Curator's and has no counterpart: {counterpart.note}"


def _package_message(fullname: str, nemo_modules: list[str]) -> str:
    from curator_dask.migrate.mapping import import_lines

    package = "nemo_curator" + fullname[len("curator_dask"):]
    lines = [f"No module named {fullname!r}: it is NeMo Curator's {package}. In "
             "curator-dask, what its modules hold:"]
    for nemo in nemo_modules:
        lines.append(f"  {nemo}:")
        lines.extend(f"    {line}" for line in import_lines(nemo))
    lines.append(_SUGGESTION)
    return "\n".join(lines)


class NeMoPathFinder:
    """A ``sys.meta_path`` finder that turns a missing NeMo-shaped ``curator_dask.…``
    module into :class:`NeMoModulePathError`; it finds nothing itself."""

    @classmethod
    def find_spec(cls, fullname: str, path=None, target=None):
        if not fullname.startswith("curator_dask."):
            return None
        from curator_dask.migrate.mapping import NAMES, nemo_module_for, nemo_modules_under

        nemo_module = nemo_module_for(fullname)
        if nemo_module is None:
            parent, _, name = fullname.rpartition(".")
            if parent == "curator_dask" and name in NAMES:  # from curator_dask import Modify
                raise NeMoModulePathError(_name_message(fullname, name), name=None)
            below = nemo_modules_under(fullname)  # curator_dask.stages.text(.io.reader)
            if below:
                raise NeMoModulePathError(_package_message(fullname, below), name=None)
            return None
        # name=None: importlib's `from package import name` swallows a ModuleNotFoundError
        # whose name is the module it tried, which would hide the message.
        raise NeMoModulePathError(_message(fullname, nemo_module), name=None)


def install() -> None:
    """Append :class:`NeMoPathFinder` to ``sys.meta_path`` (once): after every real
    finder, so that it is asked only about modules that do not exist."""
    if NeMoPathFinder not in sys.meta_path:
        sys.meta_path.append(NeMoPathFinder)
