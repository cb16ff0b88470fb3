"""A Griffe extension for the API reference: Sphinx roles in docstrings become links.

``:class:`~curator_dask.DocumentDataset``` becomes an optional autorefs cross-reference
(a link where the target is on a page of the site, the name in code font otherwise), so
no raw role reaches the built site. Names are looked up as Python would: a bare or
dotted name from the documented object outwards (its class, its module's names and
imports), a full path through the aliases the package exports. Loaded by mkdocstrings
(``mkdocs.yml``).
"""

from __future__ import annotations

import html

import griffe

from curator_dask._docstrings import replace_roles


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring once the object tree is loaded."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs) -> None:
        if obj.docstring is None or ":`" not in obj.docstring.value:
            return

        def link(shown: str, target: str) -> str:
            identifier = _resolve(target, obj, loader)
            return (f'<autoref identifier="{html.escape(identifier)}" optional>'
                    f"<code>{html.escape(shown)}</code></autoref>")

        obj.docstring.value = replace_roles(obj.docstring.value, link)


def _resolve(target: str, obj: griffe.Object, loader: griffe.GriffeLoader) -> str:
    """The canonical path ``target`` names, seen from ``obj`` (``target`` if unknown)."""
    candidates = [target]
    holder = obj if obj.is_class or obj.is_module else obj.parent
    while holder is not None:
        candidates.append(f"{holder.path}.{target}")
        holder = holder.parent
    for path in candidates:
        try:
            return loader.modules_collection[path].canonical_path
        except Exception:  # not there, or an alias to a package not loaded
            continue
    return target
