"""What a stage needs from a worker, and how that maps onto Dask worker resources.

Dask places a task on a worker only if the worker advertises every resource the task
asks for. curator-dask's workers advertise:

- CPU workers: ``{"CPU": <threads>}``
- dask-cuda GPU workers: ``{"GPU": 1, "GPU_MEMORY_GB": <device memory>}``

so a CPU stage (``{"CPU": c}``) never lands on a GPU worker and a GPU stage
(``{"GPU": g}`` or ``{"GPU_MEMORY_GB": m}``) never lands on a CPU worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from curator_dask.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["Resources"]


@dataclass(frozen=True)
class Resources:
    """Resources one task of a stage holds while it runs.

    Parameters
    ----------
    cpus : float, default 1.0
        CPU slots (worker threads) per task.
    gpus : float, default 0.0
        GPUs per task. Fractions pack several tasks onto one GPU (``0.25`` gives four
        concurrent tasks per GPU worker); more than one GPU only in whole numbers.
    gpu_memory_gb : float, default 0.0
        GPU memory per task, an alternative to ``gpus`` for stages whose footprint is
        known. Exclusive with ``gpus``.

    Examples
    --------
    >>> Resources().to_dask()
    {'CPU': 1.0}
    >>> Resources(gpus=0.5).to_dask()
    {'GPU': 0.5}
    >>> Resources(gpu_memory_gb=8).to_dask()
    {'GPU_MEMORY_GB': 8.0}
    >>> Resources(gpus=1.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curator_dask.errors.InvalidArgumentError: Resources(gpus=1.5): more than one GPU must be ...
    """

    cpus: float = 1.0
    gpus: float = 0.0
    gpu_memory_gb: float = 0.0

    def __post_init__(self) -> None:
        for field in ("cpus", "gpus", "gpu_memory_gb"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ArgumentTypeError(f"Resources({field}={value!r}): expected a number")
            if math.isnan(value) or value < 0:
                raise InvalidArgumentError(
                    f"Resources({field}={value!r}): must be a non-negative number")
            object.__setattr__(self, field, float(value))
        if self.gpus and self.gpu_memory_gb:
            raise InvalidArgumentError(
                f"Resources(gpus={self.gpus:g}, gpu_memory_gb={self.gpu_memory_gb:g}): "
                "give either gpus or gpu_memory_gb, not both"
            )
        if self.gpus > 1 and not self.gpus.is_integer():
            raise InvalidArgumentError(
                f"Resources(gpus={self.gpus:g}): more than one GPU must be a whole number "
                "(use 1 or 2, or a fraction below 1 to share a GPU)"
            )
        if not (self.cpus or self.gpus or self.gpu_memory_gb):
            raise InvalidArgumentError(
                "Resources(): a stage must ask for some CPU or GPU (all were 0)")

    @property
    def requires_gpu(self) -> bool:
        """Whether the stage must run on a GPU worker."""
        return bool(self.gpus or self.gpu_memory_gb)

    def to_dask(self) -> dict[str, float]:
        """The Dask worker resources a task of this stage is restricted to."""
        if self.gpus:
            return {"GPU": self.gpus}
        if self.gpu_memory_gb:
            return {"GPU_MEMORY_GB": self.gpu_memory_gb}
        return {"CPU": self.cpus}

    def __str__(self) -> str:
        return ", ".join(f"{k}={v:g}" for k, v in self.to_dask().items())
