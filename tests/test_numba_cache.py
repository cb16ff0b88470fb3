"""Compiled kernels go to one cache per user, also from a read-only installation."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import curator_dask

# Compiles one small kernel, then says whether it came from the cache.
_SCRIPT = """
import numpy as np
from curator_dask import numba_cache
from curator_dask.text import kernels
assert list(kernels.prefix_hashes(np.arange(3, dtype=np.int64)))[0] == 0
print(numba_cache.cache_dir(), kernels.prefix_hashes.stats.cache_hits.__len__() > 0)
"""


def _read_only_copy(tmp_path: Path) -> Path:
    package = tmp_path / "site" / "curator_dask"
    shutil.copytree(Path(curator_dask.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in [package, *package.rglob("*")]:
        mode = path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        path.chmod(mode)
    return package.parent


def _run(site: Path, env_overrides: dict) -> tuple[str, bool]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(env_overrides, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout.split()
    return out[0], out[1] == "True"


def _nbi_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.nbi"))


@pytest.mark.slow
def test_kernels_cache_in_the_user_cache_dir_from_a_read_only_install(tmp_path):
    site = _read_only_copy(tmp_path)
    xdg = tmp_path / "xdg"
    try:
        where, hit = _run(site, {"XDG_CACHE_HOME": str(xdg), "HOME": str(tmp_path)})
        assert Path(where) == xdg / "curator-dask" / "numba"
        assert not hit  # compiled this time...
        assert _nbi_files(Path(where)), "the compiled kernel was not written to the cache"
        assert not _nbi_files(site), "nothing is written into the installed package"
        _, hit = _run(site, {"XDG_CACHE_HOME": str(xdg), "HOME": str(tmp_path)})
        assert hit  # ...and loaded from the cache by the next process
    finally:
        for path in [site, *site.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.mark.slow
def test_a_numba_cache_dir_the_user_set_is_used_as_is(tmp_path):
    site = _read_only_copy(tmp_path)
    mine = tmp_path / "mine"
    try:
        where, _ = _run(site, {"NUMBA_CACHE_DIR": str(mine),
                               "XDG_CACHE_HOME": str(tmp_path / "xdg")})
        assert Path(where) == mine
        assert _nbi_files(mine)
        assert not (tmp_path / "xdg").exists()
    finally:
        for path in [site, *site.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
