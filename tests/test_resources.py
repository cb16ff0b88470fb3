"""Resources: validation and the mapping to Dask worker resources."""

import pytest

from curator_dask import Resources


@pytest.mark.parametrize("resources,expected", [
    (Resources(), {"CPU": 1.0}),
    (Resources(cpus=2), {"CPU": 2.0}),
    (Resources(gpus=0.25), {"GPU": 0.25}),
    (Resources(gpus=2), {"GPU": 2.0}),
    (Resources(gpu_memory_gb=16), {"GPU_MEMORY_GB": 16.0}),
])
def test_maps_to_dask_worker_resources(resources, expected):
    assert resources.to_dask() == expected
    assert resources.requires_gpu == ("CPU" not in expected)


@pytest.mark.parametrize("kwargs,message", [
    ({"cpus": -1}, "non-negative"),
    ({"gpus": float("nan")}, "non-negative"),
    ({"gpus": 1, "gpu_memory_gb": 8}, "either gpus or gpu_memory_gb"),
    ({"gpus": 1.5}, "whole number"),
    ({"cpus": 0}, "some CPU or GPU"),
])
def test_invalid_resources_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Resources(**kwargs)


def test_non_numbers_are_rejected():
    with pytest.raises(TypeError, match="expected a number"):
        Resources(cpus="1")
