"""A progress bar over input partitions: tqdm in terminals and notebooks.

``tqdm.auto`` draws a widget in Jupyter and a text bar on a terminal; with output not
a terminal (CI, log files) the bar is off and progress goes to the log instead.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["Progress"]

logger = logging.getLogger(__name__)


class Progress:
    """Counts finished partitions; shows a bar when ``enabled`` and output is interactive."""

    def __init__(self, total: int, description: str, enabled: bool = True):
        self.total, self.description, self.done = total, description, 0
        self._bar = None
        self._next_log = 0.1
        if enabled and total:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # progress goes to the log
                tqdm = None
            if tqdm is not None and _interactive():
                self._bar = tqdm(total=total, desc=description, unit="part", leave=True)

    def update(self, n: int = 1, **postfix) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            if postfix:
                self._bar.set_postfix(postfix, refresh=False)
        elif self.total and self.done / self.total >= self._next_log:
            logger.info("%s: %d/%d partitions", self.description, self.done, self.total)
            self._next_log = self.done / self.total + 0.1

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _interactive() -> bool:
    if "ipykernel" in sys.modules:
        return True
    stream = sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())
