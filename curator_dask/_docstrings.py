"""Sphinx cross-reference roles in docstrings, read outside Sphinx.

Docstrings here follow numpydoc and cross-reference with Sphinx roles, as dask's do
(``:class:`~curator_dask.DocumentDataset```). Two readers do not understand the roles:
the terminal (``curator-dask stages NAME`` prints a class's description) and the
documentation site (MkDocs with mkdocstrings). :func:`plain` writes them as the name
alone; the site's build rewrites them into links with :func:`replace_roles` (see
``docs/griffe_roles.py``).

Examples
--------
>>> plain("Wraps :class:`~curator_dask.dedup.ExactDuplicates` (see :func:`remove_ids`).")
'Wraps ExactDuplicates (see remove_ids).'
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["ROLE", "plain", "replace_roles"]

#: ``:role:`target```, ``:role:`~target``` (shown as its last part) and
#: ``:role:`title <target>```.
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):"
                  r"`(?P<tilde>~?)(?P<text>[^`<]*?)\s*(?:<(?P<target>[^`>]+)>)?`")


def replace_roles(text: str, render: Callable[[str, str], str]) -> str:
    """``text`` with each role replaced by ``render(shown, target)``."""
    def replace(match: re.Match) -> str:
        target = (match["target"] or match["text"]).strip()
        if match["target"]:
            shown = match["text"].strip()
        elif match["tilde"]:
            shown = target.rsplit(".", 1)[-1]
        else:
            shown = target
        return render(shown, target)

    return ROLE.sub(replace, text)


def plain(text: str) -> str:
    """``text`` for a terminal: roles as the names they show, ````code```` as ``code``."""
    text = replace_roles(text, lambda shown, target: shown)
    return re.sub(r"``([^`]+)``", r"\1", text)
