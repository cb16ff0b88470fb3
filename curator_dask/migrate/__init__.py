"""Moving NeMo Curator code to curator-dask.

One table, :mod:`curator_dask.migrate.mapping`, says where every NeMo Curator module
path and name used by its scripts and documentation lives here, and how each of its
keyword arguments is spelled. Three things read it:

- ``curator-dask migrate SCRIPT.py`` (:mod:`curator_dask.migrate.codemod`, on LibCST)
  rewrites a script: imports, names, keywords, the ``__main__`` guard a script needs
  when it starts a cluster;
- importing a NeMo-shaped path from ``curator_dask`` (``curator_dask.modules``) raises
  :class:`~curator_dask.migrate.finder.NeMoModulePathError` naming where the thing lives
  (:mod:`curator_dask.migrate.finder`);
- :func:`curator_dask.compat.nemo_keywords` accepts NeMo Curator's keywords with a
  warning naming ours, or refuses them saying what to write.

This package imports nothing heavy: LibCST is imported by the codemod only.
"""

from __future__ import annotations

__all__ = ["MigrationReport", "NeMoModulePathError", "migrate_source"]


def __getattr__(name: str):
    if name == "NeMoModulePathError":
        from curator_dask.migrate.finder import NeMoModulePathError

        return NeMoModulePathError
    if name in ("migrate_source", "MigrationReport"):
        from curator_dask.migrate import codemod

        return getattr(codemod, name)
    raise AttributeError(f"module 'curator_dask.migrate' has no attribute {name!r}")
