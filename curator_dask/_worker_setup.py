"""What each worker process of a cluster this project starts runs first (a dask preload).

Ctrl-C in a terminal reaches every process of the foreground group: the driver, and the
worker processes of the local cluster it started. The driver answers it (the command
stops, keeps the parts it finished, exits 130 and closes its cluster); a worker process
ignores it, so that it ends when the driver closes it, instead of each worker printing a
traceback of its own interruption.
"""

from __future__ import annotations

import signal
import threading

__all__ = ["PRELOAD", "dask_setup"]

#: The module name ``get_client`` gives its workers as a preload.
PRELOAD = __name__


def dask_setup(worker) -> None:
    """Ignore SIGINT in a worker process (its main thread runs the worker's event loop);
    a worker running in the driver's own process (threads) leaves the driver's handler."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
