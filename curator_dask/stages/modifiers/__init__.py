"""Document modifiers and the ``Modify`` stage that applies them.

Usage::

    from curator_dask.stages.modifiers import Modify, UnicodeReformatter
    ds = Modify(UnicodeReformatter())(ds)

Layout: :mod:`.base` (``DocumentModifier``, ``Modify``), :mod:`.unicode` (ftfy),
:mod:`.normalize` (newlines, whitespace), :mod:`.url`, :mod:`.c4` (C4's line cleaning).
"""

from curator_dask.stages.modifiers.base import DocumentModifier, Modify
from curator_dask.stages.modifiers.c4 import C4LineCleaner
from curator_dask.stages.modifiers.normalize import NewlineNormalizer, WhitespaceNormalizer
from curator_dask.stages.modifiers.unicode import UnicodeReformatter
from curator_dask.stages.modifiers.url import UrlRemover

__all__ = [
    "C4LineCleaner",
    "DocumentModifier",
    "Modify",
    "NewlineNormalizer",
    "UnicodeReformatter",
    "UrlRemover",
    "WhitespaceNormalizer",
]
