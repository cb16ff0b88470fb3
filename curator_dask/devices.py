"""Which device a kernel with a CPU and a torch/CUDA implementation runs on.

Stages with such kernels (semantic dedup's k-means and similarities, MinHash) take a
``device`` option: ``"cpu"``, ``"cuda"`` / ``"cuda:N"``, or ``"auto"``. It is checked
where the stage is made (:func:`check_device_name`) and resolved where the kernel runs
(:func:`compute_device`), so ``"auto"`` finds the worker's GPU, not the client's.

Examples
--------
>>> compute_device("cpu")
'cpu'
>>> check_device_name("tpu")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
curator_dask.errors.InvalidArgumentError: device must be ..., got 'tpu'
"""

from __future__ import annotations

import os
import sys

from curator_dask.errors import InvalidArgumentError

__all__ = ["DEVICES", "NVIDIA_CONTROL_DEVICE", "check_device_name", "compute_device"]

DEVICES = ("auto", "cpu", "cuda")

#: The device node every Linux NVIDIA driver creates (containers with GPUs get it too).
NVIDIA_CONTROL_DEVICE = "/dev/nvidiactl"


def check_device_name(device: str) -> str:
    """``device`` if it is ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``, else a
    ValueError."""
    if not isinstance(device, str) or not (device in DEVICES or device.startswith("cuda:")):
        raise InvalidArgumentError(
            f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    return device


def compute_device(device: str) -> str:
    """``"cpu"`` or the CUDA device to run on, for a device option, in this process.

    ``"auto"`` is ``"cuda"`` when torch is installed and sees a GPU, else ``"cpu"``. A
    machine without an NVIDIA driver gets ``"cpu"`` without importing torch, whose import
    alone costs a CPU worker some 250 MB. Other names are returned as they are.
    """
    check_device_name(device)
    if device != "auto":
        return device
    if "torch" not in sys.modules and not os.path.exists(NVIDIA_CONTROL_DEVICE):
        return "cpu"
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"
