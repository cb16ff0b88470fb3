"""Unicode repair with ftfy ("fixes text for you")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
import pyarrow.compute as pc

from curator_dask.errors import MissingDependencyError
from curator_dask.stages.modifiers.base import DocumentModifier
from curator_dask.text import arrow_text, like_input

if TYPE_CHECKING:
    from ftfy import TextFixerConfig

__all__ = ["UnicodeReformatter"]

# Text made only of these characters is returned unchanged by every ftfy fixer: they act
# on non-ASCII text, HTML entities ("&"), terminal escapes (ESC), "\r" line breaks and
# control characters, none of which is here. tests/test_modifiers.py checks the claim.
_UNTOUCHED_BY_FTFY = r"^[\t\n\x20-\x25\x27-\x7e]*$"


class UnicodeReformatter(DocumentModifier):
    """Repair mojibake, HTML entities, control characters and other Unicode damage with
    ``ftfy.fix_text``, as NeMo Curator's ``UnicodeReformatter`` (same parameters and
    defaults; see https://ftfy.readthedocs.io/en/latest/config.html).

    ftfy works one document at a time in Python, so this modifier is a loop over
    documents — the one modifier here that is. To keep that loop short, documents of
    plain printable ASCII without ``&`` (which no ftfy fixer changes) are recognised with
    one vectorised regular expression and skipped.

    Needs the ``ftfy`` package (``pip install 'curator-dask[text]'``).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("ftfy")  # the text extra
    >>> import pandas as pd
    >>> texts = pd.Series(["caf\\u00c3\\u00a9 &amp; cr\\u00c3\\u00a8me", "plain"])
    >>> UnicodeReformatter().modify(texts).tolist()
    ['café & crème', 'plain']
    """

    name = "unicode_reformatter"

    def __init__(self, config: TextFixerConfig | None = None, unescape_html: str | bool = "auto",
                 remove_terminal_escapes: bool = True, fix_encoding: bool = True,
                 restore_byte_a0: bool = True, replace_lossy_sequences: bool = True,
                 decode_inconsistent_utf8: bool = True, fix_c1_controls: bool = True,
                 fix_latin_ligatures: bool = False, fix_character_width: bool = False,
                 uncurl_quotes: bool = False, fix_line_breaks: bool = False,
                 fix_surrogates: bool = True, remove_control_chars: bool = True,
                 normalization: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = None,
                 max_decode_length: int = 1000000, explain: bool = True):
        try:
            from ftfy import TextFixerConfig
        except ImportError as err:
            raise MissingDependencyError(
                "UnicodeReformatter needs ftfy: pip install 'curator-dask[text]'"
            ) from err
        if config is None:
            config = TextFixerConfig(
                unescape_html=unescape_html, remove_terminal_escapes=remove_terminal_escapes,
                fix_encoding=fix_encoding, restore_byte_a0=restore_byte_a0,
                replace_lossy_sequences=replace_lossy_sequences,
                decode_inconsistent_utf8=decode_inconsistent_utf8,
                fix_c1_controls=fix_c1_controls, fix_latin_ligatures=fix_latin_ligatures,
                fix_character_width=fix_character_width, uncurl_quotes=uncurl_quotes,
                fix_line_breaks=fix_line_breaks, fix_surrogates=fix_surrogates,
                remove_control_chars=remove_control_chars, normalization=normalization,
                max_decode_length=max_decode_length, explain=explain,
            )
        # explanations are never used here; skipping them saves time
        self.config = config._replace(explain=False)

    def modify(self, text):
        import ftfy

        arr = arrow_text(text)
        untouched = pc.match_substring_regex(arr, _UNTOUCHED_BY_FTFY).to_numpy(zero_copy_only=False)
        out = np.asarray(arr.to_pandas(), dtype=object)
        todo = np.flatnonzero(~untouched)
        out[todo] = [ftfy.fix_text(t, config=self.config) for t in out[todo]]
        return like_input(out, text, "str")
