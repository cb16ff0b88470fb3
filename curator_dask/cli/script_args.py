"""Command-line options for a Dask cluster in a user's script: NeMo Curator's ``ArgumentHelper``.

NeMo Curator's example scripts build their command line with
``ArgumentHelper(parser).add_distributed_args()`` and start their cluster with
``get_client(**ArgumentHelper.parse_client_args(args))``. The same two calls work here
and give :func:`~curator_dask.get_client` its options: ``--device cpu|gpu`` (the
cluster type), ``--n-workers``, ``--threads-per-worker``, ``--scheduler-address``,
``--scheduler-file``, ``--protocol``, ``--rmm-pool-size`` and ``--enable-spilling`` (GPU
clusters), and the reading options NeMo Curator's scripts also take
(``--files-per-partition``, ``--num-files``).

Examples
--------
>>> import argparse
>>> parser = ArgumentHelper(argparse.ArgumentParser()).add_distributed_args()
>>> args = parser.parse_args(["--n-workers", "2"])
>>> ArgumentHelper.parse_client_args(args)
{'cluster_type': 'cpu', 'n_workers': 2, 'threads_per_worker': 1, 'protocol': 'tcp'}
"""

from __future__ import annotations

import argparse
import os

import psutil

__all__ = ["ArgumentHelper"]

#: Options of a local cluster that reach get_client as they are, when set.
_CLIENT_OPTIONS = ("n_workers", "threads_per_worker", "protocol")
#: Options of GPU clusters only.
_GPU_OPTIONS = {"rmm_pool_size": "rmm_pool_size", "enable_spilling": "enable_cudf_spill"}


class ArgumentHelper:
    """Adds a script's cluster options to an ``argparse`` parser; NeMo Curator's names.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    """

    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser

    def add_distributed_args(self) -> argparse.ArgumentParser:
        """The options of a local or remote Dask cluster; returns the parser."""
        add = self.parser.add_argument
        add("--device", choices=("cpu", "gpu"), default="cpu",
            help="cpu: a cluster of CPU worker processes; gpu: one worker per GPU "
                 "(dask-cuda)")
        add("--files-per-partition", type=int, default=2,
            help="JSONL files read into one partition")
        add("--n-workers", type=int, default=os.cpu_count(),
            help="worker processes of a local CPU cluster")
        add("--num-files", type=int, default=None,
            help="read at most this many files")
        add("--nvlink-only", action="store_true",
            help="accepted for NeMo Curator's scripts; pass dask-cuda's options to "
                 "get_client instead")
        add("--protocol", default="tcp", help="the cluster's protocol (tcp or ucx)")
        add("--rmm-pool-size", default=None,
            help="RMM pool of each GPU worker (e.g. 14GB)")
        add("--scheduler-address", default=None,
            help="connect to this scheduler (tcp://host:8786) instead of starting a cluster")
        add("--scheduler-file", default=None,
            help="connect to the scheduler this file names (dask scheduler --scheduler-file)")
        add("--threads-per-worker", type=int, default=1,
            help="threads of each worker process")
        return self.parser

    def add_distributed_classifier_cluster_args(self) -> None:
        """:meth:`add_distributed_args` and the GPU memory options of classifier scripts."""
        self.add_distributed_args()
        self.parser.add_argument("--enable-spilling", action="store_true",
                                 help="spill cuDF memory to the host (GPU clusters)")
        self.parser.add_argument("--max-mem-gb-classifier", type=int, default=None,
                                 help="accepted for NeMo Curator's scripts; batches are sized "
                                      "by max_tokens_per_batch here")
        self.parser.set_defaults(rmm_pool_size="512MB")

    def set_default_n_workers(self, max_mem_gb_per_worker: float) -> None:
        """Default ``--n-workers`` to as many workers as cores and memory allow, each
        using up to ``max_mem_gb_per_worker`` GB."""
        memory_gb = psutil.virtual_memory().total / 1024**3
        self.parser.set_defaults(n_workers=int(max(1, min(os.cpu_count() or 1,
                                                          memory_gb // max_mem_gb_per_worker))))

    @staticmethod
    def parse_client_args(args: argparse.Namespace) -> dict:
        """The keywords of :func:`~curator_dask.get_client` that ``args`` holds."""
        values = vars(args)
        if values.get("scheduler_address") or values.get("scheduler_file"):
            # A running cluster: connect, and change nothing about it.
            return {name: values[name] for name in ("scheduler_address", "scheduler_file")
                    if values.get(name)}
        device = values.get("device", "cpu")
        options = {"cluster_type": device}
        for name in _CLIENT_OPTIONS:
            if values.get(name) is not None:
                options[name] = values[name]
        if device == "gpu":
            options.update({ours: values[name] for name, ours in _GPU_OPTIONS.items()
                            if values.get(name) not in (None, False)})
        return options
